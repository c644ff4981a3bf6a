"""Alert messages: the blocks of an alert, of a queued resource's state message, and their buttons; the line
every surface shows while Slack refuses the alert channel.

The scheduler (bot/oncall/scheduler.py) decides what is due and where it goes; this module only renders.
Messages
carry names, zones, states, times and USD figures only: never tokens, secrets or URLs with credentials.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.slack.render import (
    Block,
    Reply,
    blocks_reply,
    channel_link,
    context,
    header,
    human_duration,
    mention,
    plural,
    section,
    utc,
)
from ops.alerts.ledger import Alert, LedgerRow
from ops.alerts.outbox import ALL_CHANNELS, DeliveryProblem, HeldAlert
from ops.alerts.placement import GoneAlert
from ops.alerts.planned import Window
from ops.cost.pricing import burn
from ops.diagnosis.notices import Finding
from ops.errors import OpsError
from ops.times import minutes_text
from ops.tpu.model import QueuedResourceInfo

# Alerts about serving point at the metrics chart of their window (`/vllm metrics --chart`).
SERVING_KINDS = frozenset({"vllm_down", "kv_cache", "preemptions", "slo", "idle", "serving"})
_ICONS = {"stale": ":wastebasket:", "vllm_down": ":red_circle:", "vllm_up": ":large_green_circle:"}


def action_buttons(block_id: str, *buttons: tuple[str, str, str, str | None]) -> Block:
    """An actions block of buttons, each given as (action_id, label, value, style: "primary", "danger" or
    None); the alert buttons' listeners in bot/slack/listeners.py read the value."""
    elements = []
    for action_id, label, value, style in buttons:
        button = {
            "type": "button",
            "action_id": action_id,
            "text": {"type": "plain_text", "text": label},
            "value": value,
        }
        if style:
            button["style"] = style
        elements.append(button)
    return {"type": "actions", "block_id": block_id, "elements": elements}


def alert_buttons(key: str) -> Block:
    """Delete now / Snooze 1 h / Acknowledge buttons; each carries the alert key as its value."""
    return action_buttons(
        "alert",
        ("alert_delete", "Delete now", key, "danger"),
        ("alert_snooze", "Snooze 1 h", key, None),
        ("alert_ack", "Acknowledge", key, None),
    )


def recover_buttons(qr: QueuedResourceInfo) -> Block:
    """Recover (delete and recreate in its zone) / Recover by capacity search; value "zone/name"."""
    value = f"{qr.zone}/{qr.name}"
    return action_buttons(
        "recover",
        ("alert_recover", "Recover", value, "primary"),
        ("alert_recover_search", "Recover by capacity search", value, None),
    )


def idle_buttons(key: str, keep_hours: int) -> Block:
    """Delete / Keep for N hours on an idle alert; Delete carries the alert key, Keep "N KEY" (the hours, then
    the key that names the alert's deployment)."""
    return action_buttons(
        "idle",
        ("alert_delete", "Delete", key, "danger"),
        ("alert_keep", f"Keep for {keep_hours} h", f"{keep_hours} {key}", None),
    )


def cost_line(qr: QueuedResourceInfo | None, now: datetime) -> str:
    """The line "Cost so far: $12.34 ($5.00/h)" ("at most" when the price row is missing and the on-demand
    row bounds it), or "" when the QR is not ACTIVE or cannot be priced at all."""
    if qr is None or qr.state != "ACTIVE":
        return ""
    try:
        spend = burn(qr, now)
    except OpsError:
        return ""
    bound = spend.quote.bound
    return f"Cost so far: {bound}${spend.usd_so_far:,.2f} ({bound}${spend.usd_per_hour:,.2f}/h)"


def idle_cost(qr: QueuedResourceInfo, idle: timedelta, now: datetime) -> str:
    """ "About $X of it while idle" ("At most" from a ceiling price) from the live burn; "" without any
    price."""
    try:
        spend = burn(qr, now)
    except OpsError:
        return ""
    idle_h = min(idle.total_seconds() / 3600, spend.hours_so_far)
    lead = "At most" if spend.quote.bound == "at most " else "About"
    return f"{lead} ${spend.usd_per_hour * idle_h:,.2f} of it while idle."


def span(delta: timedelta) -> str:
    """Whole minutes for messages, rounded: "11 min", "1 h 5 min" ("40 s" under a minute)."""
    return minutes_text(delta, seconds_under_a_minute=True)


def named(deployment: str | None, text: str = "") -> str:
    """`text` after "deployment `NAME` · " for a named deployment (None: `text` as is)."""
    return f"deployment `{deployment}` · {text}" if deployment else text


def alert_blocks(
    alert: Alert,
    qr: QueuedResourceInfo | None,
    now: datetime,
    *,
    mention: str,
    deployment: str | None,
    keep_hours: int,
) -> list[Block]:
    """The blocks of one alert message.

    Args:
        alert: the alert; qr: its queued resource (its cost so far is shown while ACTIVE), or None.
        now: timezone-aware UTC time shown in the footer.
        mention: the live group mention to lead with ("" for none; see `bot.oncall.routing.Router.mention`).
        deployment: the named deployment it belongs to (None for the single `default` one).
        keep_hours: the hours of the Keep button of an idle alert.
    """
    lines = [f"{mention}{_ICONS.get(alert.kind, ':alarm_clock:')} *{alert.title}*"]
    if alert.text:
        lines.append(alert.text)
    cost = cost_line(qr, now)
    if cost:
        lines.append(cost)
    blocks = [section("\n".join(lines))]
    if alert.buttons:
        blocks.append(alert_buttons(alert.key))
    if alert.kind == "idle":
        blocks.append(idle_buttons(alert.key, keep_hours))
    chart = ""
    if alert.kind in SERVING_KINDS:
        where = f" --deployment {deployment}" if deployment else ""
        chart = f" · the hour before: `/vllm metrics --chart 1h{where}`"
    blocks.append(context(f"{named(deployment)}alert `{alert.kind}` · {utc(now)}{chart}"))
    return blocks


def resolved_blocks(title: str) -> list[Block]:
    """What a resolved alert's message becomes (updated in place)."""
    return [section(f":large_green_circle: *Resolved:* {title}")]


def state_summary(alert: Alert, qr: QueuedResourceInfo | None) -> str:
    """The first lines of a queued resource's state message: its name, zone and state, the error of a
    FAILED one and who initiated a SUSPENDED one."""
    state = qr.state if qr else alert.state
    summary = f":satellite: *`{alert.name}`* ({alert.zone}): *{state}*"
    if qr is not None and qr.state == "FAILED" and qr.error:
        summary += f"\nError: {qr.error}"
    if qr is not None and qr.state == "SUSPENDED":
        summary += f"\nInitiated by {qr.state_initiator or 'unknown'}"
    return summary


def serving_down(primary: str, state: str) -> str:
    """The line of a transition that takes serving down: the deployment's primary left ACTIVE."""
    return (
        f":red_circle: *Serving is down*: vLLM runs on `{primary}`, the primary, which is now {state}; "
        "it serves again once the primary is ACTIVE (Recover, or `/tpu recover`)."
    )


def state_blocks(summary: str, now: datetime, deployment: str | None) -> list[Block]:
    """The blocks of a state message (updated in place on each transition)."""
    return [section(summary), context(named(deployment, f"updated {utc(now)} · transitions in the thread"))]


# Ledger statuses in plain words (ops.alerts.ledger.AlertLedger.claim).
_STATUS_WORDS = {
    "sent": "posted",
    "suppressed": "suppressed while muted",
    "superseded": "skipped for a more urgent one",
    "sending": "being posted",
    "undelivered": "held back while Slack refused the channel",
}
_SHOWN = 30  # the newest open and held alerts listed


@dataclass(frozen=True)
class AlertsOverview:
    """What `/alerts` shows, as gathered by the handler.

    Attributes:
        shown: open alerts of resources that still exist, oldest first; gone: those left out, each with the
            resource now listed under its name, if any (`ops.alerts.placement.place_open_alerts`).
        mutes: subject -> (muted until, Slack user id of who muted it). window: an open maintenance window.
        counts: ledger keys per status. refused: why alerts cannot reach their channel, one line each.
        held: alerts held back while Slack refused the channel; titles: their ledger text by key.
        note: a warning when the resources could not all be checked ("" when none). now: the moment read.
    """

    shown: list[LedgerRow]
    gone: list[GoneAlert]
    mutes: dict[str, tuple[datetime, str]]
    window: Window | None
    counts: dict[str, int]
    refused: list[str]
    held: list[HeldAlert]
    titles: dict[str, str]
    note: str
    now: datetime


def row_subjects(row: LedgerRow) -> frozenset[str]:
    """The `/alerts mute` subjects that silence the alert of `row`, read from its ledger key as
    `ops.alerts.ledger.mute_subjects` reads an Alert: its kind ("slo" too for slo_ok), the queued resource's
    name (from the identity "zone/name@create time"), the node a node's alert names as its key's last part
    ("resource|kind|node"), and for a vLLM endpoint ("vllm:<url>") "vllm" and the URL."""
    subjects = {row.kind, *(["slo"] if row.kind == "slo_ok" else [])}
    if row.resource.startswith("vllm:"):
        subjects.update({"vllm", row.resource.removeprefix("vllm:")})
    elif "/" in row.resource:
        subjects.add(row.resource.split("/", 1)[1].split("@", 1)[0])
    subjects.add(row.key.rsplit("|", 1)[-1])
    return frozenset(subjects)


def open_alert_line(row: LedgerRow, now: datetime, mutes: dict[str, tuple[datetime, str]]) -> str:
    """One open alert: its text, age and kind, then every mute that silences it now, e.g. ":mute: muted
    (`gemma4-old`) until 2026-11-29 16:05 UTC by @ana", so a muted alert is never shown as if it would page.

    Args:
        row: the open alert. now: the moment read. mutes: active mutes, subject -> (until, who muted it)
            (`AlertLedger.mutes`).
    """
    line = f"• {row.text} _({human_duration(now - row.at)} ago, `{row.kind}`)_"
    silencing = sorted(row_subjects(row) & mutes.keys())
    for name in silencing:
        until, by = mutes[name]
        line += f" :mute: muted (`{name}`) until {utc(until)} by {mention(by)}"
    return line


_GONE_NAMED = 10  # the resources a line of alerts left out names


def gone_line(gone: list[GoneAlert]) -> str:
    """The line for open alerts left out because their queued resource no longer exists, naming each
    resource and what became of it, e.g. "_1 alert of a queued resource that no longer exists is not shown:
    `gemma4-old` (recreated at 2026-12-06 08:10 UTC; this alert was about the one before)._" ("(deleted)"
    when nothing of that name is listed now); "" when `gone` is empty."""
    if not gone:
        return ""
    by_resource: dict[tuple[str, str], list[GoneAlert]] = {}
    for alert in gone:
        by_resource.setdefault((alert.zone, alert.name), []).append(alert)
    names = []
    for (_, name), alerts in list(by_resource.items())[:_GONE_NAMED]:
        successor = alerts[-1].successor
        if successor is None:
            names.append(f"`{name}` (deleted)")
            continue
        these = "this alert was" if len(alerts) == 1 else f"these {len(alerts)} alerts were"
        names.append(f"`{name}` (recreated at {utc(successor.create_time)}; {these} about the one before)")
    if len(by_resource) > _GONE_NAMED:
        names.append(f"and {len(by_resource) - _GONE_NAMED} more")
    one = len(by_resource) == 1
    whose = "a queued resource that no longer exists" if one else "queued resources that no longer exist"
    verb = "is" if len(gone) == 1 else "are"
    return f"_{plural(len(gone), 'alert')} of {whose} {verb} not shown: {', '.join(names)}._"


def alerts_overview(o: AlertsOverview) -> Reply:
    """`/alerts`: why alerts cannot reach their channel, the open alerts (each with the mutes that silence
    it: `open_alert_line`), the undelivered ones, the mutes and maintenance hold, and how many alerts the
    ledger recorded, by status."""
    lines = [open_alert_line(r, o.now, o.mutes) for r in o.shown[-_SHOWN:]] or ["none"]
    if o.gone:
        lines.append(gone_line(o.gone))
    mute_lines = [
        f"• `{name}` until {utc(until)} (by {mention(by)})" for name, (until, by) in sorted(o.mutes.items())
    ]
    if o.window is not None:
        mute_lines.append(
            f"• health alerts held: `{o.window.reason}` by {mention(o.window.opened_by)} until vLLM serves "
            f"(at most until {utc(o.window.deadline)})"
        )
    recorded = ", ".join(f"{n} {_STATUS_WORDS.get(status, status)}" for status, n in sorted(o.counts.items()))
    held_lines = [
        f"• {o.titles.get(h.key) or h.text} _(held since {utc(h.at)} for {channel_link(h.channel)})_"
        for h in o.held[-_SHOWN:]
    ]
    refused = [section(line) for line in o.refused]
    blocks = [
        header("Alerts"),
        *refused,
        section("*Open*\n" + "\n".join(lines)),
        *([section("*Undelivered* (Slack refused the channel)\n" + "\n".join(held_lines))] if o.held else []),
        section("*Muted*\n" + ("\n".join(mute_lines) or "none")),
        context(f"Alerts so far: {recorded}." if recorded else "No alert has been raised yet."),
    ]
    if o.note:
        blocks.insert(len(refused) + 2, context(o.note))
    return blocks_reply(blocks)


def muted(name: str, until: datetime, by: str) -> Reply:
    """`/alerts mute`: subject `name` muted until `until` by the Slack user `by`."""
    return blocks_reply([section(f":mute: Alerts of `{name}` muted until {utc(until)} by {mention(by)}.")])


def unmuted(name: str, removed: bool) -> Reply:
    """`/alerts unmute`: the mute of `name` removed, or that there was none."""
    return blocks_reply(
        [section(f":bell: Alerts of `{name}` unmuted." if removed else f"`{name}` was not muted.")]
    )


def test_posted(channel: str) -> Reply:
    """`/alerts test`: the test alert was posted to `channel` (a Slack channel id)."""
    return blocks_reply([section(f":white_check_mark: Test alert posted to {channel_link(channel)}.")])


def refusal_line(problem: DeliveryProblem, held: int, finding: Finding | None) -> str:
    """One mrkdwn line while Slack refuses a deployment's alert channel (or its token): where alerts cannot
    go since when, the fault catalogue's cause and fix (`finding`; None: Slack's code alone), and how many
    alerts are held back meanwhile."""
    where = "any channel" if problem.channel == ALL_CHANNELS else channel_link(problem.channel)
    cause = finding.cause if finding else f"Slack answers `{problem.code}`"
    fix = f" *Fix:* {finding.fix}." if finding else ""
    kept = f" {plural(held, 'alert')} held back, posted once it works." if held else ""
    return f":warning: *Alerts cannot reach {where}* since {utc(problem.since)}: {cause}.{fix}{kept}"
