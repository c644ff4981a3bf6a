"""`/alerts list | mute NAME 2h | unmute NAME | test`: open alerts and mutes of the alert scheduler."""

from __future__ import annotations

from datetime import timedelta

from bot import scheduler
from bot.commands import Param, Role, duration, registry, resource_name
from bot.context import Context
from bot.render import Reply, blocks_reply, context, header, human_duration, section, utc
from ops.alerts import AlertLedger, identity
from ops.errors import BadInput, OpsError

MAX_MUTE = timedelta(days=7)


# Ledger statuses in plain words (ops.alerts.AlertLedger.claim).
_STATUS_WORDS = {
    "sent": "posted",
    "suppressed": "suppressed while muted",
    "superseded": "skipped for a more urgent one",
    "sending": "being posted",
}


@registry.command("alerts list", "Open alerts of the last 7 days and the muted resources")
def alerts_list(ctx: Context) -> Reply:
    """Open alerts (sent, neither acknowledged nor resolved) of resources that still exist, and active
    mutes. An alert of a queued resource that is gone (deleted, or recreated under the same name: a new
    create time is a new resource) is left out and counted; where a zone did not answer, its alerts stay."""
    now = ctx.services.now()
    ledger = AlertLedger(ctx.services.store)
    open_rows = ledger.open_alerts(since=now - timedelta(days=7))
    gone, note = _gone_resources(ctx, {r.resource for r in open_rows})
    shown = [r for r in open_rows if r.resource not in gone]
    lines = [f"• {r.text} _({human_duration(now - r.at)} ago, `{r.kind}`)_" for r in shown[-30:]]
    hidden = len(open_rows) - len(shown)
    if hidden:
        lines.append(f"_{hidden} alert(s) of queued resources that no longer exist are not shown._")
    mutes = ledger.mutes(now)
    mute_lines = [
        f"• `{name}` until {utc(until)} (by <@{by}>)" for name, (until, by) in sorted(mutes.items())
    ]
    counts = ledger.counts()
    recorded = ", ".join(f"{n} {_STATUS_WORDS.get(status, status)}" for status, n in sorted(counts.items()))
    blocks = [
        header("Alerts"),
        section("*Open*\n" + ("\n".join(lines) or "none")),
        section("*Muted*\n" + ("\n".join(mute_lines) or "none")),
        context(f"Alerts so far: {recorded}." if recorded else "No alert has been raised yet."),
    ]
    if note:
        blocks.insert(2, context(note))
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


def _check_queued_resource(ctx: Context, name: str) -> None:
    """Check that `name` is a queued resource in the watched zones.

    Raises:
        BadInput: `name` is not among them (the message lists them), or a zone did not answer and `name`
            is not in the zones that did (it cannot be told apart from a typo).
    """
    listing = ctx.services.tpu.list_queued_resources(ctx.services.settings.tpu_zones)
    names = sorted({qr.name for qr in listing.resources if qr.state != "DELETING"})
    if name in names:
        return
    if listing.errors:
        zones = ", ".join(sorted(listing.errors))
        raise BadInput(f"cannot tell whether `{name}` exists: {zones} did not answer", "try again shortly")
    known = ", ".join(f"`{n}`" for n in names) or "none"
    raise BadInput(f"no queued resource `{name}` in the watched zones", f"queued resources: {known}")


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
        BadInput: zero length or longer than 7 days; `name` is no queued resource in the watched zones.
    """
    if length <= timedelta(0) or length > MAX_MUTE:
        raise BadInput(f"cannot mute for {human_duration(length)}", "give a duration from 1m to 7d")
    _check_queued_resource(ctx, name)
    until = ctx.services.now() + length
    AlertLedger(ctx.services.store).mute(name, until, by=ctx.user_id)
    return blocks_reply([section(f":mute: Alerts of `{name}` muted until {utc(until)} by <@{ctx.user_id}>.")])


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
    return blocks_reply([section(f":white_check_mark: Test alert posted to <#{running.channel}>.")])
