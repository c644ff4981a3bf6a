"""Delivering alerts to Slack exactly once, and the on-call options of a deployment.

`AlertDelivery.deliver` is the one claim -> send path of every alert kind (queued-resource thresholds and
states, TPU host maintenance, vLLM health, SLO rules, idle stop, maintenance windows, automatic recovery):
claim the alert's key in the ledger (insert-if-absent) and post only if the claim won; a muted subject's
alerts are claimed as "suppressed" (never sent later). State changes keep ONE message per resource, updated
in place (`chat_update`), with each transition posted in its thread. Messages leave
through `bot.slack.gateway.SlackGateway` (`post`, `update`), which also redacts and escapes whatever a
backend put in an alert's text (an error message, a health detail); bot/views/alerts.py renders them.

A channel Slack refuses in a way sending again cannot fix (archived, not found, not joined, a missing scope,
or the token refused: `bot.slack.gateway.refusal_of`) is recorded for the deployment (`ops.alerts.outbox`)
and not sent to again: alerts due meanwhile stay claimed, their messages held back. Every
`ALERT_DELIVERY_RECHECK_S` a tick tries again with the oldest held message (or, with none held, a one-line
notice; a refused token is checked with `auth.test` first); once one gets through the refusal is cleared
and the rest follow in order (`RefusedChannels`).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import KW_ONLY, dataclass, field
from datetime import datetime, timedelta
from functools import partial
from typing import Literal

from bot.config import Settings
from bot.oncall.routing import Router, parse_routes
from bot.services import Services
from bot.shared.diagnosis import alert_diagnosis
from bot.slack.gateway import Refusal, SlackGateway, refusal_of
from bot.slack.render import Reply, context, section, utc
from bot.views.alerts import (
    alert_blocks,
    named,
    recover_buttons,
    resolved_blocks,
    serving_down,
    state_blocks,
    state_summary,
)
from ops.alerts import ledger as alerts_mod
from ops.alerts.ledger import Alert, AlertLedger, mute_subjects
from ops.alerts.outbox import ALL_CHANNELS, UNDELIVERED, AlertOutbox, DeliveryProblem
from ops.cost.idle import Schedule, parse_schedule
from ops.times import parse_duration
from ops.tpu.model import QueuedResourceInfo
from ops.tpu.recovery import dead_reason
from ops.vllm.slo import DEFAULT_RULES, SloRule, load_rules

log = logging.getLogger(__name__)

STATE_KINDS = ("state", "preempted", "node_gone")
"""Alert kinds kept as ONE message per resource (updated in place), each transition posted in its thread."""

Delivered = Literal["sent", "held", "suppressed", "duplicate", "failed"]
"""What `AlertDelivery.deliver` did with an alert (the TickResult count it added to)."""


@dataclass
class TickResult:
    """What one tick did (counts of alert keys): sent, superseded, suppressed (muted), already recorded,
    failed (released for the next tick), held back (the channel refuses the bot)."""

    sent: int = 0
    superseded: int = 0
    suppressed: int = 0
    duplicate: int = 0
    failed: int = 0
    held: int = 0
    errors: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class OncallOptions:
    """What makes alerts trustworthy, from the settings (defaults: everything to the alert channel, default
    SLO rules, no idle alerts, no automatic recovery).

    Attributes:
        routes: kind or severity -> channel id; mention_group: user group mentioned on critical alerts.
        digest_channel: the daily digest's channel (None: the alert channel).
        slo_rules: serving rules (ops/vllm/slo.py).
        idle_after: alert after no request for this long (None: off); idle_stop_at: proposed stop times.
        idle_keep_hours: hours the Keep button silences idle alerts.
        primary: the queued resource recovery and idle stop are about (TPU_PRIMARY).
        auto_recover, auto_recover_max_per_day, auto_recover_max_usd_per_day: automatic recovery and its caps.
        elsewhere: names of queued resources another deployment of the same Google project watches (its
            primary): listed in this deployment's zones too, but alerted only by their own deployment.
        maintenance_lead: how long before a TPU host maintenance window its alert is due.
        recheck: how long a channel that refused the bot is left alone before it is tried again.
        retention_days: how long the ledger keeps the alerts and last states of resources that are gone.
    """

    routes: dict[str, str] = field(default_factory=dict)
    mention_group: str | None = None
    digest_channel: str | None = None
    slo_rules: tuple[SloRule, ...] = DEFAULT_RULES
    idle_after: timedelta | None = None
    idle_stop_at: Schedule | None = None
    idle_keep_hours: int = 4
    primary: str = "gemma4-qr"
    auto_recover: bool = False
    auto_recover_max_per_day: int = 2
    auto_recover_max_usd_per_day: float = 200.0
    elsewhere: frozenset[str] = frozenset()
    maintenance_lead: timedelta = timedelta(hours=24)
    recheck: timedelta = timedelta(minutes=5)
    retention_days: int = 30

    @classmethod
    def from_settings(cls, settings: Settings, elsewhere: frozenset[str] = frozenset()) -> OncallOptions:
        """The options of validated Settings (see bot/config.py); `elsewhere` as the attribute."""
        return cls(
            routes=parse_routes(settings.alert_routes),
            mention_group=settings.alert_mention_group,
            digest_channel=settings.digest_channel,
            slo_rules=load_rules(settings.slo_rules_file) if settings.slo_rules_file else DEFAULT_RULES,
            idle_after=parse_duration(settings.idle_alert_after.strip())
            if settings.idle_alert_after
            else None,
            idle_stop_at=parse_schedule(settings.idle_stop_at) if settings.idle_stop_at else None,
            idle_keep_hours=settings.idle_keep_hours,
            primary=settings.tpu_primary,
            auto_recover=settings.auto_recover,
            auto_recover_max_per_day=settings.auto_recover_max_per_day,
            auto_recover_max_usd_per_day=settings.auto_recover_max_usd_per_day,
            elsewhere=elsewhere,
            maintenance_lead=parse_duration(settings.maintenance_alert_lead.strip()),
            recheck=timedelta(seconds=settings.alert_delivery_recheck_s),
            retention_days=settings.alert_retention_days,
        )


@dataclass(eq=False)
class AlertDelivery:
    """How alerts of one deployment reach Slack exactly once: claim a key in the ledger, post (or update in
    place), record. `bot.oncall.scheduler.AlertScheduler` and the on-call checks (`bot.oncall.checks`) decide
    what is due and hand each alert to `deliver`.

    Args:
        services: the bot's backends (`settings`, `store` and what `bot.shared.diagnosis.alert_diagnosis`
        reads).
        slack: the bot's SlackGateway.
        channel: the deployment's alert channel id (Settings.alert_channel).
        ledger: the deployment's AlertLedger (claims, threads, mutes).
        outbox: the deployment's AlertOutbox (channels Slack refuses, messages held back).
        router: kind or severity -> channel, and the mention of critical alerts.
        options: the deployment's OncallOptions (primary, idle Keep hours).
        clock: returns timezone-aware UTC now.
        on_sent: called with an alert's kind after each post (the bot's `alerts_sent` counter), or None.
    """

    services: Services
    slack: SlackGateway
    channel: str
    ledger: AlertLedger
    outbox: AlertOutbox
    router: Router
    options: OncallOptions
    _: KW_ONLY
    clock: Callable[[], datetime]
    on_sent: Callable[[str], None] | None = None

    @property
    def deployment(self) -> str:
        """The name of the deployment whose alerts these are (its ledger's)."""
        return self.ledger.deployment

    def named(self, text: str = "") -> str:
        """`text` after "deployment `NAME` · " for a deployment of DEPLOYMENTS_FILE (`default`: as is)."""
        return named(self.deployment if self.ledger.scoped else None, text)

    # ---- the one claim -> send path
    def deliver(
        self,
        alert: Alert,
        qr: QueuedResourceInfo | None,
        now: datetime,
        result: TickResult,
        mutes: dict[str, tuple[datetime, str]],
        thread: tuple[str, str | None] | None = None,
        threads: dict[str, tuple[str | None, str | None]] | None = None,
        primary: QueuedResourceInfo | None = None,
    ) -> Delivered:
        """Claim and post one alert, counting what happened in `result`.

        Suppressed when one of its subjects is in `mutes` (subject -> (until, by)), or when it resolves an
        alert nobody saw (`unseen`); a duplicate when its key is claimed already. A STATE_KINDS alert
        updates its resource's one message and posts in that message's thread (`threads`: resource ->
        (channel, ts) posted earlier in the same tick); any other is posted to its routed channel, or as a
        reply in `thread` (channel, ts) when given, and a resolution updates the resolved message in place.
        `primary` is the deployment's primary among the resources the tick read (`primary_among`, by zone
        and name): only a transition of that resource offers Recover and says serving is down, not one of
        another resource that shares its name in another zone (None: no resource is the primary).

        Returns:
            What was done: "sent", "held" (the channel refuses the bot), "suppressed", "duplicate", or
            "failed" (the claim is released for the next tick).
        """
        muted = self.unseen(alert, now) if alert.resolves else bool(mute_subjects(alert) & mutes.keys())
        if muted:
            if self.ledger.claim(alert, "suppressed", now=now):
                result.suppressed += 1
                return "suppressed"
            result.duplicate += 1
            return "duplicate"
        if not self.ledger.claim(alert, "sending", now=now):
            result.duplicate += 1
            return "duplicate"
        if alert.kind in STATE_KINDS:
            post = partial(self._post_state, alert, qr, now, {} if threads is None else threads, primary)
            return self._send(alert, post, result, qr=qr)
        return self._send(
            alert,
            partial(self.post, alert, qr, now, thread),
            result,
            channel=thread[0] if thread else None,
            qr=qr,
            thread_ts=thread[1] if thread else None,
        )

    def unseen(self, alert: Alert, now: datetime) -> bool:
        """Whether `alert` resolves an alert nobody saw: one suppressed while muted, or one held back while
        its channel refused the bot (its held message is dropped: what it said is over)."""
        resolved = self.ledger.get(alert.resolves) if alert.resolves else None
        if resolved is None or resolved.status not in ("suppressed", UNDELIVERED):
            return False
        if resolved.status == UNDELIVERED:
            self.outbox.drop(resolved.key)
            self.ledger.resolve(resolved.key, now=now)
        return True

    def _send(
        self,
        alert: Alert,
        post: Callable[[], str | None],
        result: TickResult,
        channel: str | None = None,
        qr: QueuedResourceInfo | None = None,
        thread_ts: str | None = None,
    ) -> Delivered:
        """Post a claimed alert and record it as sent. A channel that refuses the bot (now, or since an
        earlier refusal) gets no call: the alert is held back. On any other failure the claim is released
        (the next tick retries)."""
        target = channel or self.router.channel(alert)
        if self.outbox.problem(target) is not None:
            self._hold(alert, qr, target, thread_ts, result)
            return "held"
        try:
            ts = post()
        except Exception as exc:
            refusal = refusal_of(exc)
            if refusal is not None:
                self.refused(refusal, target)
                self._hold(alert, qr, target, thread_ts, result)
                return "held"
            log.warning("could not post alert %s: %s", alert.key, type(exc).__name__, exc_info=True)
            self.ledger.release(alert.key)
            result.failed += 1
            return "failed"
        self.ledger.mark_sent(alert.key, target, ts)
        result.sent += 1
        if self.on_sent is not None:
            self.on_sent(alert.kind)
        self._post_diagnosis(alert, qr, target, ts)
        return "sent"

    # ---- posting
    def post(
        self,
        alert: Alert,
        qr: QueuedResourceInfo | None,
        now: datetime,
        thread: tuple[str, str | None] | None = None,
    ) -> str | None:
        """Post `alert` (claimed or not: this only posts) to its routed channel, or as a reply in `thread`
        (channel, ts) when given; a resolution updates the resolved alert's message in place. Returns the
        message ts.

        Raises:
            Exception: what the gateway raised (`bot.slack.gateway.refusal_of` tells a refusal).
        """
        if alert.resolves:
            row = self.ledger.get(alert.resolves)
            if row is not None and row.ts:
                ts = self.slack.update(
                    row.channel or self.channel,
                    row.ts,
                    Reply(text=self.named(alert.title), blocks=resolved_blocks(alert.title)),
                )
                self.ledger.resolve(alert.resolves, now=now)
                return ts
        channel, thread_ts = thread or (self.router.channel(alert), None)
        return self.slack.post(channel, self._message(alert, qr, now), thread_ts) or None

    def _message(self, alert: Alert, qr: QueuedResourceInfo | None, now: datetime) -> Reply:
        """The message of `alert` (as posted, or held back while its channel refuses the bot)."""
        blocks = alert_blocks(
            alert,
            qr,
            now,
            mention="" if alert.resolves else self.router.mention(alert),
            deployment=self.deployment if self.ledger.scoped else None,
            keep_hours=self.options.idle_keep_hours,
        )
        return Reply(text=self.named(alert.title), blocks=blocks)

    def _post_state(
        self,
        alert: Alert,
        qr: QueuedResourceInfo | None,
        now: datetime,
        threads: dict[str, tuple[str | None, str | None]],
        primary: QueuedResourceInfo | None,
    ) -> str | None:
        channel, ts = threads.get(alert.resource) or self.ledger.thread(alert.resource)
        summary = state_summary(alert, qr)
        blocks = state_blocks(summary, now, self.deployment if self.ledger.scoped else None)
        if ts is None:
            channel = self.router.channel(alert)
            ts = self.slack.post(channel, Reply(text=summary, blocks=blocks))
        else:
            ts = self.slack.update(channel or self.channel, ts, Reply(text=summary, blocks=blocks))
        threads[alert.resource] = (channel, ts)
        self.ledger.observe(
            alert.resource,
            alerts_mod.observe(qr) if qr else alerts_mod.Observation(alert.state),
            now=now,
            channel=channel,
            ts=ts,
        )
        text = self.router.mention(alert) + alert.title
        # The primary by zone and name: a resource that only shares its name serves nothing here.
        is_primary = qr is not None and qr is primary
        if alert.kind == "state" and alert.previous == "ACTIVE" and is_primary:
            # The outage's one alert: with the primary gone there is no vLLM endpoint to call down.
            text += "\n" + serving_down(alert.name, alert.state)
        reply_blocks = [section(text)]
        if qr is not None and is_primary and dead_reason(qr):
            reply_blocks.append(recover_buttons(qr))
        return self.slack.post(channel or self.channel, Reply(alert.title, reply_blocks), ts) or None

    def _post_diagnosis(
        self, alert: Alert, qr: QueuedResourceInfo | None, channel: str, ts: str | None
    ) -> None:
        """One diagnosis in a failure alert's thread (state alerts: the resource's thread). Never raises."""
        try:
            text = alert_diagnosis(self.services, alert, qr)
            if alert.kind in ("state", "preempted", "node_gone"):
                state_channel, parent = self.ledger.thread(alert.resource)
                channel = state_channel or channel
            else:
                parent = ts
            if text and parent:
                self.slack.post(channel, Reply(text=text, blocks=[section(text)]), parent)
        except Exception as exc:  # the alert itself is out; its diagnosis must not undo it
            log.warning("could not post the diagnosis of %s: %s", alert.key, type(exc).__name__)

    def _hold(
        self,
        alert: Alert,
        qr: QueuedResourceInfo | None,
        channel: str,
        thread_ts: str | None,
        result: TickResult,
    ) -> None:
        """Keep a claimed alert's message for `channel` until the channel works
        (`RefusedChannels.recheck`)."""
        reply = self._message(alert, qr, self.clock())
        self.outbox.hold(alert.key, channel, reply.text, reply.blocks, now=self.clock(), thread_ts=thread_ts)
        result.held += 1

    def refused(self, refusal: Refusal, channel: str) -> DeliveryProblem:
        """Record that Slack refused `channel` (every channel, for a refused token); logged as an error the
        first time, the surfaces (`bot.shared.diagnosis.refusal_lines`) show it until it is cleared."""
        where = ALL_CHANNELS if refusal.whole_token else channel
        problem = self.outbox.record(
            where, refusal.code, now=self.clock(), needed=refusal.needed, provided=refusal.provided
        )
        if problem.attempts == 1:
            log.error("alerts of %s cannot reach %s: Slack answers %s", self.deployment, where, refusal.code)
        return problem

    def post_or_hold(self, key: str, channel: str, reply: Reply) -> str | None:
        """Post a claimed message that is not an alert (the digest) to `channel`, or hold it back like an
        alert while the channel refuses the bot. Returns the ts, None when held.

        Raises:
            Exception: what the post raised, when it is not such a refusal (the caller releases the claim).
        """
        if self.outbox.problem(channel) is None:
            try:
                return self.slack.post(channel, reply) or None
            except Exception as exc:
                refusal = refusal_of(exc)
                if refusal is None:
                    raise
                self.refused(refusal, channel)
        self.outbox.hold(key, channel, reply.text, reply.blocks, now=self.clock())
        return None


class RefusedChannels:
    """One job: try the channels Slack refused again (every `options.recheck`) and post what was held back
    for them, oldest first, once one works.

    Args:
        delivery: the deployment's AlertDelivery (its outbox, ledger, gateway and refusal record).
    """

    def __init__(self, delivery: AlertDelivery) -> None:
        self.delivery = delivery
        self.outbox = delivery.outbox

    def recheck(self, now: datetime, result: TickResult) -> None:
        """Try each refused channel again once `options.recheck` has passed since its last refusal: a
        refused token with `auth.test` first, then the held messages of the channel oldest first (or, with
        none held, a one-line notice). The first post that gets through clears the refusal."""
        for problem in self.outbox.problems():
            if now - problem.checked_at < self.delivery.options.recheck:
                continue
            if problem.channel == ALL_CHANNELS:
                try:
                    refusal = self.delivery.slack.token_refusal()
                except Exception as exc:  # a passing fault: the next tick tries again
                    log.warning("re-check of the Slack token failed: %s", type(exc).__name__)
                    continue
                if refusal is not None:
                    self.delivery.refused(refusal, ALL_CHANNELS)
                    continue
                self.outbox.clear(ALL_CHANNELS)
                log.info("Slack accepts the bot's token again; posting the alerts held back")
                channels = list(dict.fromkeys(item.channel for item in self.outbox.held()))
                for channel in channels:
                    if self.outbox.problem(channel) is None:
                        self._deliver_held(channel, problem, now, result)
            else:
                self._deliver_held(problem.channel, problem, now, result)

    def delivery_works(self, channel: str, now: datetime, result: TickResult | None = None) -> None:
        """A post to `channel` went through outside the alert job (e.g. `/alerts test`): clear its
        refusal (and the token's: the post proves it works) and post what was held back for it."""
        problem = self.outbox.problem(channel)
        self.outbox.clear(ALL_CHANNELS)
        self.outbox.clear(channel)
        if problem is not None or self.outbox.held(channel):
            self._deliver_held(channel, problem, now, result or TickResult(), probe=False)

    def _deliver_held(
        self,
        channel: str,
        problem: DeliveryProblem | None,
        now: datetime,
        result: TickResult,
        *,
        probe: bool = True,
    ) -> None:
        """Post the messages held back for `channel`, oldest first, each marked with when it was held; the
        refusal is cleared at the first that gets through and recorded again (stopping) at a refusal. With
        nothing held and `probe`, a one-line notice tries the channel instead."""
        held = self.outbox.held(channel)
        code = problem.code if problem is not None else ""
        since = f" since {utc(problem.since)}" if problem is not None else ""
        if not held and probe:
            text = f":white_check_mark: Alerts reach this channel again (Slack refused it{since}: `{code}`)."
            try:
                self.delivery.slack.post(
                    channel,
                    Reply(text=self.delivery.named(text), blocks=[section(self.delivery.named(text))]),
                )
            except Exception as exc:
                self._recheck_failed(exc, channel)
                return
            self.outbox.clear(channel)
            log.info("alerts of %s reach %s again", self.delivery.deployment, channel)
            return
        for item in held:
            note = f":hourglass: Held back since {utc(item.at)}: Slack refused the channel" + (
                f" (`{code}`)." if code else "."
            )
            reply = Reply(text=item.text, blocks=[*item.blocks, context(note)])
            try:
                ts = self.delivery.slack.post(item.channel, reply, item.thread_ts) or None
            except Exception as exc:
                self._recheck_failed(exc, channel)
                return
            self.outbox.clear(channel)
            self.outbox.delivered(item.key, item.channel, ts)
            result.sent += 1
            row = self.delivery.ledger.get(item.key)
            if self.delivery.on_sent is not None and row is not None:
                self.delivery.on_sent(row.kind)

    def _recheck_failed(self, exc: Exception, channel: str) -> None:
        refusal = refusal_of(exc)
        if refusal is not None:
            self.delivery.refused(refusal, channel)
        else:  # a passing fault: the next tick tries again
            log.warning("re-check of %s failed: %s", channel, type(exc).__name__)
