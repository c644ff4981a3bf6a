"""`/alerts list | mute SUBJECT 2h | unmute SUBJECT | test`: open alerts and mutes of the alert scheduler.

Each acts on the command's deployment (its channel, or `--deployment NAME`): its ledger's open alerts and
counts, its alert channel for the test.

A mute's subject is anything an alert is about (`ops.alerts.mute_subjects`): a queued resource or node
name, the vLLM endpoint ("vllm" or its URL) or an alert kind (`bot.routing.KINDS`). A subject the bot
does not know is refused with the list of known ones, so a typo never silences nothing.
"""

from __future__ import annotations

import contextlib
from datetime import timedelta

from bot import scheduler
from bot.alert_reach import reach_lines
from bot.commands import Param, Role, duration, registry
from bot.context import Context
from bot.membership import invite_hint
from bot.render import (
    Reply,
    blocks_reply,
    channel_link,
    context,
    header,
    human_duration,
    mention,
    section,
    utc,
)
from bot.routing import KINDS
from bot.slack_gateway import SlackDeliveryError, refusal_of
from ops.alert_outbox import UNDELIVERED, AlertOutbox
from ops.alerts import AlertLedger, identity
from ops.diagnosis.notices import refusal_finding
from ops.errors import BadInput, OpsError
from ops.linear import linear
from ops.maintenance import MaintenanceWindows

MAX_MUTE = timedelta(days=7)
_SUBJECT = linear(r"^[A-Za-z0-9_.:/\[\]-]{1,100}$")


def subject(word: str) -> str:
    """An argument type: an alert subject (a name, a kind, "vllm" or a URL without spaces)."""
    if not _SUBJECT.match(word):
        raise ValueError(f"{word!r} is not an alert subject (a name, a kind, vllm or the vLLM URL)")
    return word


def known_subjects(ctx: Context) -> tuple[set[str], list[str]]:
    """(subjects that exist now, zones that could not be read): alert kinds, "vllm" and the endpoint URL,
    queued resources (not being deleted) and their nodes in the watched zones."""
    known = set(KINDS) | {"vllm"}
    missing: list[str] = []
    with contextlib.suppress(OpsError):  # no endpoint now: "vllm" still names it
        known.add(ctx.services.endpoints.resolve().url)
    listing = ctx.services.tpu.list_queued_resources(ctx.services.settings.tpu_zones)
    missing += sorted(listing.errors)
    for qr in listing.resources:
        if qr.state == "DELETING":
            continue
        known.add(qr.name)
        known.update(qr.node_ids)
    return known, missing


# Ledger statuses in plain words (ops.alerts.AlertLedger.claim).
_STATUS_WORDS = {
    "sent": "posted",
    "suppressed": "suppressed while muted",
    "superseded": "skipped for a more urgent one",
    "sending": "being posted",
    "undelivered": "held back while Slack refused the channel",
}


@registry.command("alerts list", "Open alerts of the last 7 days and the muted resources")
def alerts_list(ctx: Context) -> Reply:
    """Open alerts (sent, neither acknowledged nor resolved) of resources that still exist, and active
    mutes. An alert of a queued resource that is gone (deleted, or recreated under the same name: a new
    create time is a new resource) is left out and counted; where a zone did not answer, its alerts stay."""
    now = ctx.services.now()
    ledger = AlertLedger(ctx.services.store, ctx.deployment)
    open_rows = ledger.open_alerts(since=now - timedelta(days=7))
    gone, note = _gone_resources(ctx, {r.resource for r in open_rows})
    shown = [r for r in open_rows if r.resource not in gone]
    lines = [f"• {r.text} _({human_duration(now - r.at)} ago, `{r.kind}`)_" for r in shown[-30:]]
    hidden = len(open_rows) - len(shown)
    if hidden:
        lines.append(f"_{hidden} alert(s) of queued resources that no longer exist are not shown._")
    mutes = ledger.mutes(now)
    mute_lines = [
        f"• `{name}` until {utc(until)} (by {mention(by)})" for name, (until, by) in sorted(mutes.items())
    ]
    window = MaintenanceWindows(ctx.services.store).current(ctx.deployment)
    if window is not None:
        mute_lines.append(
            f"• health alerts held: `{window.reason}` by {mention(window.opened_by)} until vLLM serves "
            f"(at most until {utc(window.deadline)})"
        )
    counts = ledger.counts()
    recorded = ", ".join(f"{n} {_STATUS_WORDS.get(status, status)}" for status, n in sorted(counts.items()))
    refused = [section(line) for line in reach_lines(ctx.services.store, ctx.deployment)]
    held = AlertOutbox(ctx.services.store, ctx.deployment).held()
    titles = {r.key: r.text for r in ledger.rows(status=UNDELIVERED)}
    held_lines = [
        f"• {titles.get(h.key) or h.text} _(held since {utc(h.at)} for {channel_link(h.channel)})_"
        for h in held[-30:]
    ]
    blocks = [
        header("Alerts"),
        *refused,
        section("*Open*\n" + ("\n".join(lines) or "none")),
        *([section("*Undelivered* (Slack refused the channel)\n" + "\n".join(held_lines))] if held else []),
        section("*Muted*\n" + ("\n".join(mute_lines) or "none")),
        context(f"Alerts so far: {recorded}." if recorded else "No alert has been raised yet."),
    ]
    if note:
        blocks.insert(len(refused) + 2, context(note))
    return blocks_reply(blocks)


def _gone_resources(ctx: Context, resources: set[str]) -> tuple[set[str], str]:
    """The queued-resource identities among `resources` ("zone/name@create", see `ops.alerts.identity`)
    whose zone answered and no longer lists them; and a note when the listing failed somewhere."""
    queued = {r for r in resources if "/" in r and not r.startswith("vllm:")}
    if not queued:
        return set(), ""
    try:
        listing = ctx.services.tpu.list_queued_resources(ctx.services.settings.tpu_zones)
    except OpsError as exc:
        return set(), f":warning: could not check which resources still exist: {exc.message}"
    present = {identity(qr) for qr in listing.resources if qr.state != "DELETING"}
    answered = set(ctx.services.settings.tpu_zones) - set(listing.errors)
    gone = {r for r in queued if r.split("/", 1)[0] in answered and r not in present}
    note = ""
    if listing.errors:
        zones = ", ".join(f"`{zone}`" for zone in sorted(listing.errors))
        note = f":warning: {zones} did not answer: alerts of resources there are shown as recorded."
    return gone, note


@registry.command(
    "alerts mute",
    "Mute alerts of a queued resource, node, the vLLM endpoint or an alert kind for a while (at most 7d)",
    Param(
        "name",
        "queued resource, node, vllm (or its URL) or alert kind",
        kind=subject,
        required=True,
        metavar="SUBJECT",
    ),
    Param("length", "how long, e.g. 30m, 2h, 1d", kind=duration, required=True, metavar="DURATION"),
    role=Role.OPERATOR,
)
def alerts_mute(ctx: Context, name: str, length: timedelta) -> Reply:
    """Mute subject `name` for `length` (at most 7 days). Alerts due meanwhile are recorded as suppressed.

    Raises:
        BadInput: zero length or longer than 7 days; a subject the bot does not know (the hint lists the
            known ones), or one it cannot tell from a typo because a zone did not answer.
    """
    if length <= timedelta(0) or length > MAX_MUTE:
        raise BadInput(f"cannot mute for {human_duration(length)}", "give a duration from 1m to 7d")
    known, missing = known_subjects(ctx)
    if name not in known:
        if missing:
            zones = ", ".join(missing)
            raise BadInput(
                f"cannot tell whether `{name}` exists: {zones} did not answer", "try again shortly"
            )
        listed = ", ".join(f"`{s}`" for s in sorted(known))
        raise BadInput(f"no alert subject `{name}`", f"known subjects: {listed}"[:1500])
    until = ctx.services.now() + length
    AlertLedger(ctx.services.store, ctx.deployment).mute(name, until, by=ctx.user_id)
    by = mention(ctx.user_id)
    return blocks_reply([section(f":mute: Alerts of `{name}` muted until {utc(until)} by {by}.")])


@registry.command(
    "alerts unmute",
    "Unmute an alert subject",
    Param("name", "the muted subject", kind=subject, required=True, metavar="SUBJECT"),
    role=Role.OPERATOR,
)
def alerts_unmute(ctx: Context, name: str) -> Reply:
    """Remove the mute of `name`."""
    removed = AlertLedger(ctx.services.store, ctx.deployment).unmute(name)
    text = f":bell: Alerts of `{name}` unmuted." if removed else f"`{name}` was not muted."
    return blocks_reply([section(text)])


def _watcher(ctx: Context) -> scheduler.AlertScheduler | None:
    """The running alert scheduler of the command's deployment, or None (none running, or this deployment
    has no alert channel)."""
    running = scheduler.active()
    return None if running is None else running.watchers.get(ctx.deployment)


@registry.command("alerts test", "Post a test alert to the alert channel", writes=True)
def alerts_test(ctx: Context) -> Reply:
    """Post a test message to the alert channel of the command's deployment.

    Raises:
        BadInput: no alert scheduler runs, or this deployment has none (no alert channel); Slack refused
            the channel because the bot is not in it (the hint says how to invite it).
    """
    if scheduler.active() is None:
        raise BadInput("the alert scheduler is not running", "set ALERT_CHANNEL and restart the bot")
    running = _watcher(ctx)
    if running is None:
        raise BadInput(
            f"deployment `{ctx.deployment}` has no alert channel",
            "set `alert_channel` for it in DEPLOYMENTS_FILE and restart the bot",
        )
    where = channel_link(running.channel)
    try:
        running.post_test(ctx.user_id)
    except SlackDeliveryError as exc:
        refusal = refusal_of(exc)
        if refusal is None:
            raise
        finding = refusal_finding(refusal.slack_text)
        raise BadInput(
            f"Slack refused the alert channel {where}: `{refusal.code}`",
            finding.fix if finding else invite_hint(running.channel),
        ) from None
    return blocks_reply([section(f":white_check_mark: Test alert posted to {where}.")])
