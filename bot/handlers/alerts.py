"""`/alerts list | mute NAME 2h | unmute NAME | test`: open alerts and mutes of the alert scheduler."""

from __future__ import annotations

from datetime import timedelta

from bot import scheduler
from bot.commands import Param, Role, duration, registry, resource_name
from bot.context import Context
from bot.render import Reply, blocks_reply, channel_link, header, human_duration, mention, section, utc
from ops.alerts import AlertLedger
from ops.errors import BadInput

MAX_MUTE = timedelta(days=7)


@registry.command("alerts list", "Open alerts of the last 7 days and the muted resources")
def alerts_list(ctx: Context) -> Reply:
    """Open alerts (sent, neither acknowledged nor resolved) and active mutes."""
    now = ctx.services.now()
    ledger = AlertLedger(ctx.services.store)
    open_rows = ledger.open_alerts(since=now - timedelta(days=7))
    lines = [f"• {r.text} _({human_duration(now - r.at)} ago, `{r.kind}`)_" for r in open_rows[-30:]]
    mutes = ledger.mutes(now)
    mute_lines = [
        f"• `{name}` until {utc(until)} (by {mention(by)})" for name, (until, by) in sorted(mutes.items())
    ]
    counts = ledger.counts()
    summary = ", ".join(f"{n} {status}" for status, n in sorted(counts.items())) or "nothing recorded yet"
    return blocks_reply(
        [
            header("Alerts"),
            section("*Open*\n" + ("\n".join(lines) or "none")),
            section("*Muted*\n" + ("\n".join(mute_lines) or "none")),
            section(f"_Ledger: {summary}_"),
        ]
    )


@registry.command(
    "alerts mute",
    "Mute every alert of a queued resource for a while (e.g. 2h; at most 7d)",
    Param("name", "queued resource name", kind=resource_name, required=True, metavar="NAME"),
    Param("length", "how long, e.g. 30m, 2h, 1d", kind=duration, required=True, metavar="DURATION"),
    role=Role.OPERATOR,
)
def alerts_mute(ctx: Context, name: str, length: timedelta) -> Reply:
    """Mute `name` for `length` (at most 7 days). Alerts due meanwhile are recorded as suppressed.

    Raises:
        BadInput: zero length or longer than 7 days.
    """
    if length <= timedelta(0) or length > MAX_MUTE:
        raise BadInput(f"cannot mute for {human_duration(length)}", "give a duration from 1m to 7d")
    until = ctx.services.now() + length
    AlertLedger(ctx.services.store).mute(name, until, by=ctx.user_id)
    by = mention(ctx.user_id)
    return blocks_reply([section(f":mute: Alerts of `{name}` muted until {utc(until)} by {by}.")])


@registry.command(
    "alerts unmute",
    "Unmute a queued resource's alerts",
    Param("name", "queued resource name", kind=resource_name, required=True, metavar="NAME"),
    role=Role.OPERATOR,
)
def alerts_unmute(ctx: Context, name: str) -> Reply:
    """Remove the mute of `name`."""
    removed = AlertLedger(ctx.services.store).unmute(name)
    text = f":bell: Alerts of `{name}` unmuted." if removed else f"`{name}` was not muted."
    return blocks_reply([section(text)])


@registry.command("alerts test", "Post a test alert to the alert channel")
def alerts_test(ctx: Context) -> Reply:
    """Post a test message through the running alert scheduler."""
    running = scheduler.active()
    if running is None:
        raise BadInput("the alert scheduler is not running", "set ALERT_CHANNEL and restart the bot")
    running.post_test(ctx.user_id)
    where = channel_link(running.channel)
    return blocks_reply([section(f":white_check_mark: Test alert posted to {where}.")])
