"""Alert messages: the blocks of an alert, of a queued resource's state message, and their buttons.

The scheduler (bot/scheduler.py) decides what is due and where it goes; this module only renders. Messages
carry names, zones, states, times and USD figures only: never tokens, secrets or URLs with credentials.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from bot.render import Block, context, section, utc
from ops.alerts import Alert
from ops.cost import burn
from ops.durations import minutes_text
from ops.errors import OpsError
from ops.tpu_model import QueuedResourceInfo

# Alerts about serving point at the metrics chart of their window (`/vllm metrics --chart`).
SERVING_KINDS = frozenset({"vllm_down", "kv_cache", "preemptions", "slo", "idle", "serving"})
_ICONS = {"stale": ":wastebasket:", "vllm_down": ":red_circle:", "vllm_up": ":large_green_circle:"}


def action_buttons(block_id: str, *buttons: tuple[str, str, str, str | None]) -> Block:
    """An actions block of buttons, each given as (action_id, label, value, style: "primary", "danger" or
    None); the listeners in bot/listeners/alerts.py read the value."""
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
        mention: the live group mention to lead with ("" for none; see `bot.routing.Router.mention`).
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
    """The first line(s) of a queued resource's state message: its name, zone and state, the error of a
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
