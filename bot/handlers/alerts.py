"""`/alerts list | mute SUBJECT 2h | unmute SUBJECT | test`: open alerts and mutes of the alert scheduler.

Each acts on the command's deployment (its channel, or `--deployment NAME`): its ledger's open alerts and
counts, its alert channel for the test.

A mute's subject is anything an alert is about (`ops.alerts.ledger.mute_subjects`): a queued resource or node
name, the vLLM endpoint ("vllm" or its URL) or an alert kind (`bot.oncall.routing.KINDS`). A subject the bot
does not know is refused with the list of known ones, so a typo never silences nothing.
"""

from __future__ import annotations

import contextlib
from datetime import timedelta

from bot.commands.context import Context
from bot.commands.registry import Param, Role, duration, registry
from bot.oncall import scheduler
from bot.oncall.routing import KINDS
from bot.shared.diagnosis import refusal_lines
from bot.slack.gateway import SlackDeliveryError, refusal_of
from bot.slack.membership import invite_hint
from bot.slack.render import Reply, channel_link, human_duration
from bot.views.alerts import AlertsOverview, alerts_overview, muted, test_posted, unmuted
from ops.alerts.ledger import AlertLedger
from ops.alerts.outbox import UNDELIVERED, AlertOutbox
from ops.alerts.planned import MaintenanceWindows
from ops.diagnosis.notices import refusal_finding
from ops.errors import BadInput, OpsError
from ops.linear import linear

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


@registry.command("alerts list", "Open alerts of the last 7 days and the muted resources")
def alerts_list(ctx: Context) -> Reply:
    """Open alerts (sent, neither acknowledged nor resolved) of resources that still exist, and active
    mutes. An alert of a queued resource that is gone (deleted, or recreated under the same name: a new
    create time is a new resource) is left out and named with what became of it (`gone_line`); where a zone
    did not answer, its alerts stay."""
    now = ctx.services.now()
    ledger = AlertLedger(ctx.services.store, ctx.deployment)
    placed, note = scheduler.placed_open_alerts(
        ctx.services, ledger.open_alerts(since=now - timedelta(days=7))
    )
    window = MaintenanceWindows(ctx.services.store).current(ctx.deployment)
    outbox = AlertOutbox(ctx.services.store, ctx.deployment)
    refused, held = refusal_lines(outbox), outbox.held()
    titles = {r.key: r.text for r in ledger.rows(status=UNDELIVERED)}
    overview = AlertsOverview(
        placed.current, placed.gone, ledger.mutes(now), window, ledger.counts(), list(refused), held, titles,
        note, now,
    )  # fmt: skip
    return alerts_overview(overview)


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
    return muted(name, until, ctx.user_id)


@registry.command(
    "alerts unmute",
    "Unmute an alert subject",
    Param("name", "the muted subject", kind=subject, required=True, metavar="SUBJECT"),
    role=Role.OPERATOR,
)
def alerts_unmute(ctx: Context, name: str) -> Reply:
    """Remove the mute of `name`."""
    removed = AlertLedger(ctx.services.store, ctx.deployment).unmute(name)
    return unmuted(name, removed)


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
    return test_posted(running.channel)
