"""APScheduler jobs in the bot process: evaluate alerts and post them to the alert channel, exactly once.

`AlertScheduler.tick()` is one evaluation: list the watched queued resources, `ops.alerts.evaluate`, then
for each alert claim its key in the ledger (insert-if-absent) and post only if the claim won. A muted
resource's alerts are claimed as "suppressed" (never sent later); thresholds passed while the bot was down
are claimed as "superseded". State changes keep ONE message per resource, updated in place
(`chat_update`), with each transition posted in its thread. The daily digest is a cron job.

Messages carry names, zones, states, times and USD figures only: never tokens, secrets or URLs with
credentials. They leave through `bot.slack_gateway.SlackGateway` (`post`, `update`), which also redacts and
escapes whatever a backend put in an alert's text (an error message, a health detail).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from functools import partial
from urllib.parse import urlsplit, urlunsplit

from apscheduler.schedulers.background import BackgroundScheduler

from bot.commands import registry
from bot.config import Settings
from bot.context import Context
from bot.diagnosis import alert_diagnosis
from bot.membership import invite_hint, not_member
from bot.recovery import projected_usd, recover
from bot.render import Block, Reply, context, human_duration, mention, section, utc
from bot.routing import Router, parse_routes
from bot.services import Services
from bot.slack_gateway import SlackGateway
from llm.diagnose import diagnose
from ops import alerts as alerts_mod
from ops.alerts import (
    DEFAULT_THRESHOLDS,
    Alert,
    AlertLedger,
    VllmCheck,
    VllmWatch,
    evaluate,
    evaluate_vllm,
    mute_subjects,
    qr_alert,
    subject_alert,
)
from ops.cost import burn
from ops.errors import BackendTimeout, OpsError
from ops.idle import IdleWatch, Schedule, parse_schedule
from ops.maintenance import DEFAULT_DEPLOYMENT, MaintenanceWindows, Window
from ops.metrics import summarize
from ops.ownership import MANAGED_BY, MANAGED_BY_KEY, created_by_bot
from ops.recovery import RecoveryBudget, dead_reason
from ops.slo import DEFAULT_RULES, SloRule, SloWatch, Snapshot, evaluate_slo, load_rules, parse_span
from ops.store import AuditEntry
from ops.tpu_model import QueuedResourceInfo

log = logging.getLogger(__name__)

# Alerts about serving point at the metrics chart of their window (`/vllm metrics --chart`).
SERVING_KINDS = frozenset({"vllm_down", "kv_cache", "preemptions", "slo", "idle", "serving"})

_active: AlertScheduler | None = None
_active_lock = threading.Lock()


def active() -> AlertScheduler | None:
    """The started AlertScheduler of this process (for `/alerts test`), or None."""
    return _active


LEASE = "alert-scheduler"
DIGEST_MISFIRE_GRACE_S = 3600
"""How late the daily digest may still run after its time (a stalled or suspended process), seconds.
APScheduler's default is 1 s: a process busy for 2 s at 09:00 skips the day's digest with only a warning
("Run time of job ... was missed by"); https://apscheduler.readthedocs.io/en/3.x/userguide.html#missed-job-executions-and-coalescing."""


@dataclass
class TickResult:
    """What one tick did (counts of alert keys): sent, superseded, suppressed (muted), already recorded."""

    sent: int = 0
    superseded: int = 0
    suppressed: int = 0
    duplicate: int = 0
    failed: int = 0
    errors: list[str] = field(default_factory=list)


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


def _cost_line(qr: QueuedResourceInfo | None, now: datetime) -> str:
    """The line "Cost so far: $12.34 ($5.00/h)", or "" when the QR is not ACTIVE or has no sourced price."""
    if qr is None or qr.state != "ACTIVE":
        return ""
    try:
        spend = burn(qr, now)
    except OpsError:
        return ""
    return f"Cost so far: ${spend.usd_so_far:,.2f} (${spend.usd_per_hour:,.2f}/h)"


def _public_url(url: str) -> str:
    """The URL without user info or query (a URL may embed credentials; they are never posted)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


def _span(delta: timedelta) -> str:
    """Whole minutes for messages: "11 min", "1 h 5 min" ("40 s" under a minute)."""
    if delta < timedelta(minutes=1):
        return f"{max(0, int(delta.total_seconds()))} s"
    total = round(delta.total_seconds() / 60)
    hours, minutes = divmod(total, 60)
    return f"{hours} h {minutes} min" if hours else f"{minutes} min"


def _stamp(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _idle_cost(qr: QueuedResourceInfo, idle: timedelta, now: datetime) -> str:
    """ "About $X of it while idle" from the live burn; "" without a sourced price."""
    try:
        spend = burn(qr, now)
    except OpsError:
        return ""
    idle_h = min(idle.total_seconds() / 3600, spend.hours_so_far)
    return f"About ${spend.usd_per_hour * idle_h:,.2f} of it while idle."


def _snapshot(text: str | None, now: datetime) -> Snapshot | None:
    if text is None:
        return None
    try:
        return Snapshot.from_text(text, now)
    except ValueError:
        return None


def parse_key(key: str) -> tuple[str, str, str]:
    """(zone, name, create time) of a queued-resource alert key; raises ValueError for other keys."""
    resource = key.split("|", 1)[0]
    where, _, created = resource.partition("@")
    zone, _, name = where.partition("/")
    if not zone or not name or not created:
        raise ValueError(f"not a queued-resource alert key: {key!r}")
    return zone, name, created


@dataclass(frozen=True)
class OncallOptions:
    """What makes alerts trustworthy, from the settings (defaults: everything to the alert channel, default
    SLO rules, no idle alerts, no automatic recovery).

    Attributes:
        routes: kind or severity -> channel id; mention_group: user group mentioned on critical alerts.
        digest_channel: the daily digest's channel (None: the alert channel).
        slo_rules: serving rules (ops/slo.py).
        idle_after: alert after no request for this long (None: off); idle_stop_at: proposed stop times.
        idle_keep_hours: hours the Keep button silences idle alerts.
        primary: the queued resource recovery and idle stop are about (TPU_PRIMARY).
        auto_recover, auto_recover_max_per_day, auto_recover_max_usd_per_day: automatic recovery and its caps.
        elsewhere: names of queued resources another deployment of the same Google project watches (its
            primary): listed in this deployment's zones too, but alerted only by their own deployment.
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

    @classmethod
    def from_settings(cls, settings: Settings, elsewhere: frozenset[str] = frozenset()) -> OncallOptions:
        """The options of validated Settings (see bot/config.py); `elsewhere` as the attribute."""
        return cls(
            routes=parse_routes(settings.alert_routes),
            mention_group=settings.alert_mention_group,
            digest_channel=settings.digest_channel,
            slo_rules=load_rules(settings.slo_rules_file) if settings.slo_rules_file else DEFAULT_RULES,
            idle_after=parse_span(settings.idle_alert_after) if settings.idle_alert_after else None,
            idle_stop_at=parse_schedule(settings.idle_stop_at) if settings.idle_stop_at else None,
            idle_keep_hours=settings.idle_keep_hours,
            primary=settings.tpu_primary,
            auto_recover=settings.auto_recover,
            auto_recover_max_per_day=settings.auto_recover_max_per_day,
            auto_recover_max_usd_per_day=settings.auto_recover_max_usd_per_day,
            elsewhere=elsewhere,
        )


AUTO_RECOVER_USER = "auto-recover"  # the audit trail's user id of automatic recoveries


def recover_buttons(qr: QueuedResourceInfo) -> Block:
    """Recover (delete and recreate in its zone) / Recover by capacity search; value "zone/name"."""
    value = f"{qr.zone}/{qr.name}"
    return action_buttons(
        "recover",
        ("alert_recover", "Recover", value, "primary"),
        ("alert_recover_search", "Recover by capacity search", value, None),
    )


def idle_buttons(key: str, keep_hours: int) -> Block:
    """Delete / Keep for N hours on an idle alert; Delete carries the alert key, Keep the hours."""
    return action_buttons(
        "idle",
        ("alert_delete", "Delete", key, "danger"),
        ("alert_keep", f"Keep for {keep_hours} h", f"{keep_hours}", None),
    )


def _probe_timed_out(services: Services) -> bool | None:
    """Whether a one-token chat completion timed out (None: it failed otherwise, so it says nothing)."""
    try:
        gemma, _ = services.gemma()
        with gemma:
            gemma.probe()
    except BackendTimeout:
        return True
    except OpsError:
        return None
    return False


class AlertScheduler:
    """Alert jobs of the bot process.

    Args:
        services: the bot's backends (`tpu`, `store`, `settings.tpu_zones`, `vllm()` are used).
        slack: the bot's SlackGateway.
        channel: alert channel id (e.g. Settings.alert_channel).
        interval_s: seconds between ticks (default 60).
        clock: returns timezone-aware UTC now (default: `services.now`); tests pass a controllable one.
        thresholds: minutes before a deadline (default 60, 15, 5).
        vllm_checks: also check vLLM /health and /metrics on each tick.
        health_failures: failed /health checks in a row before "vLLM down" (default 3).
        kv_threshold: KV-cache usage fraction 0..1 (default 0.9); kv_checks: checks in a row (default 3).
        digest_hour: UTC hour of the daily digest (default 9).
        options: routing, maintenance windows, SLO rules, idle stop and recovery (default: OncallOptions()).
        deployment: the name of the deployment watched (bot.deployments; "default" with a single one): its
            maintenance window holds these alerts, its ledger records them (`AlertLedger`), its budget caps
            automatic recovery, and a named deployment's messages say its name.

    With several deployments each has its AlertScheduler; the first one's `start()` runs every one's
    tick and digest (`peers`) under the one scheduler lease, so one replica does all the alert work.
    """

    def __init__(
        self,
        services: Services,
        slack: SlackGateway,
        channel: str,
        *,
        interval_s: float = 60,
        clock: Callable[[], datetime] | None = None,
        thresholds: Sequence[int] = DEFAULT_THRESHOLDS,
        vllm_checks: bool = True,
        health_failures: int = 3,
        kv_threshold: float = 0.9,
        kv_checks: int = 3,
        digest_hour: int = 9,
        on_sent: Callable[[str], None] | None = None,
        options: OncallOptions | None = None,
        deployment: str = DEFAULT_DEPLOYMENT,
    ) -> None:
        self.services = services
        self.deployment = deployment
        self.slack = slack
        self.channel = channel
        self.interval_s = interval_s
        self.clock = clock or services.now
        self.thresholds = tuple(thresholds)
        self.vllm_checks = vllm_checks
        self.health_failures = health_failures
        self.kv_threshold = kv_threshold
        self.kv_checks = kv_checks
        self.digest_hour = digest_hour
        self.ledger = AlertLedger(services.store, deployment)
        self.replica_id = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.on_sent = on_sent
        self.options = options or OncallOptions()
        self.router = Router(channel, self.options.routes, self.options.mention_group)
        self.windows = MaintenanceWindows(services.store)
        self.budget = RecoveryBudget(
            services.store,
            max_per_day=self.options.auto_recover_max_per_day,
            max_usd_per_day=self.options.auto_recover_max_usd_per_day,
            deployment=deployment,
        )
        self.peers: list[AlertScheduler] = []  # the other deployments' schedulers, run by `start()`
        self.refused: str | None = None  # Slack's error while the bot is not in the alert channel
        self._lock = threading.Lock()
        self._scheduler: BackgroundScheduler | None = None

    # ---- lifecycle
    @property
    def watchers(self) -> dict[str, AlertScheduler]:
        """Deployment name -> its AlertScheduler: this one, then `peers`."""
        return {each.deployment: each for each in (self, *self.peers)}

    def tick_all(self) -> dict[str, TickResult]:
        """`tick()` of every deployment in turn (each never raises). Returns deployment -> its TickResult."""
        return {name: each.tick() for name, each in self.watchers.items()}

    def digest_all(self) -> None:
        """`digest()` of every deployment; one that fails is logged and the others still post."""
        for name, each in self.watchers.items():
            try:
                each.digest()
            except Exception:
                log.exception("daily digest of %s failed", name)

    def start(self) -> AlertScheduler:
        """Start the BackgroundScheduler: a tick of every deployment (this one and `peers`) every
        `interval_s` (first one now) and their daily digests."""
        global _active
        scheduler = BackgroundScheduler(timezone=UTC)
        scheduler.add_job(
            self._with_lease(self.tick_all),
            "interval",
            seconds=self.interval_s,
            id="alerts-tick",
            max_instances=1,
            coalesce=True,
            next_run_time=datetime.now(UTC),
        )
        scheduler.add_job(
            self._with_lease(self.digest_all),
            "cron",
            hour=self.digest_hour,
            minute=0,
            id="alerts-digest",
            max_instances=1,
            # Late rather than never, and once: runs missed during a stall collapse into one.
            misfire_grace_time=DIGEST_MISFIRE_GRACE_S,
            coalesce=True,
        )
        scheduler.start()
        self._scheduler = scheduler
        with _active_lock:
            _active = self
        return self

    def _with_lease(self, job: Callable[[], object]) -> Callable[[], None]:
        """Run `job` only on the replica holding the scheduler lease (state store, TTL three intervals), so
        with several replicas exactly one posts alerts and another takes over within an interval or so after
        the holder dies."""

        def run() -> None:
            ttl_s = max(3 * self.interval_s, 5.0)
            try:
                held = self.services.store.acquire_lease(LEASE, self.replica_id, ttl_s, datetime.now(UTC))
            except Exception:
                log.exception("cannot read the scheduler lease")
                return
            if held:
                job()

        return run

    def shutdown(self) -> None:
        """Stop the jobs (waits for a running tick) and give up the scheduler lease."""
        global _active
        if self._scheduler is not None:
            self._scheduler.shutdown(wait=True)
            self._scheduler = None
            try:
                self.services.store.release_lease(LEASE, self.replica_id)
            except Exception:
                log.exception("cannot release the scheduler lease")
        with _active_lock:
            if _active is self:
                _active = None

    # ---- one evaluation
    def tick(self) -> TickResult:
        """Evaluate once and post what is due. Never raises: failures are logged and counted.

        Returns:
            A TickResult with the counts of this tick.
        """
        result = TickResult()
        with self._lock:
            now = self.clock()
            try:
                self._tick_resources(now, result)
            except Exception as exc:  # a failing backend must not kill the job
                log.exception("alert tick failed")
                result.errors.append(f"{type(exc).__name__}: {exc}"[:300])
            if self.vllm_checks:
                try:
                    held = self._tick_maintenance(now, result)
                    if not held:
                        self._tick_vllm(now, result)
                except Exception as exc:
                    log.exception("vLLM alert check failed")
                    result.errors.append(f"vllm: {type(exc).__name__}"[:300])
        return result

    def _tick_resources(self, now: datetime, result: TickResult) -> None:
        listing = self.services.tpu.list_queued_resources(self.services.settings.tpu_zones)
        for zone, error in listing.errors.items():
            result.errors.append(f"{zone}: {error.message}")
        resources = [
            qr
            for qr in listing.resources
            if qr.zone not in listing.errors and qr.name not in self.options.elsewhere
        ]
        by_identity = {alerts_mod.identity(qr): qr for qr in resources}
        previous = self.ledger.observations()
        found = evaluate(
            resources,
            now,
            thresholds=self.thresholds,
            previous=previous,
            watch_since=self.ledger.watch_since(now),
        )
        mutes = self.ledger.mutes(now)
        threads: dict[str, tuple[str | None, str | None]] = {}
        for alert in found:
            qr = by_identity.get(alert.resource)
            for key in alert.supersedes:
                if self.ledger.claim_key(key, alert.kind, alert.resource, "superseded", now=now):
                    result.superseded += 1
            if mute_subjects(alert) & mutes.keys():
                if self.ledger.claim(alert, "suppressed", now=now):
                    result.suppressed += 1
                else:
                    result.duplicate += 1
                continue
            if not self.ledger.claim(alert, "sending", now=now):
                result.duplicate += 1
                continue
            if alert.kind in ("state", "preempted", "node_gone"):
                self._send(alert, partial(self._post_state, alert, qr, now, threads), result, qr=qr)
            else:
                self._send(alert, partial(self._post, alert, qr, now), result, qr=qr)
        self._auto_recover_dead(found, by_identity, now, result)
        changed = {}
        for ident, qr in by_identity.items():
            seen = alerts_mod.observe(qr)
            if previous.get(ident) != seen:
                changed[ident] = seen
        self.ledger.observe_many(changed, now=now)

    # ---- posting
    def _blocks(self, alert: Alert, qr: QueuedResourceInfo | None, now: datetime) -> list[Block]:
        icon = {"stale": ":wastebasket:", "vllm_down": ":red_circle:", "vllm_up": ":large_green_circle:"}
        mention = "" if alert.resolves else self.router.mention(alert)
        lines = [f"{mention}{icon.get(alert.kind, ':alarm_clock:')} *{alert.title}*"]
        if alert.text:
            lines.append(alert.text)
        cost = _cost_line(qr, now)
        if cost:
            lines.append(cost)
        blocks = [section("\n".join(lines))]
        if alert.buttons:
            blocks.append(alert_buttons(alert.key))
        if alert.kind == "idle":
            blocks.append(idle_buttons(alert.key, self.options.idle_keep_hours))
        chart = " · the hour before: `/vllm metrics --chart 1h`" if alert.kind in SERVING_KINDS else ""
        if chart and self.ledger.scoped:
            chart = chart.replace("1h`", f"1h --deployment {self.deployment}`")
        blocks.append(context(f"{self._named()}alert `{alert.kind}` · {utc(now)}{chart}"))
        return blocks

    def _named(self, text: str = "") -> str:
        """`text` after "deployment `NAME` · " for a deployment of DEPLOYMENTS_FILE (`default`: as is)."""
        return f"deployment `{self.deployment}` · {text}" if self.ledger.scoped else text

    def _post(
        self,
        alert: Alert,
        qr: QueuedResourceInfo | None,
        now: datetime,
        thread: tuple[str, str | None] | None = None,
    ) -> str | None:
        """Post `alert` to its routed channel, or as a reply in `thread` (channel, ts) when given; a
        resolution updates the resolved alert's message in place."""
        blocks = self._blocks(alert, qr, now)
        if alert.resolves:
            row = self.ledger.get(alert.resolves)
            if row is not None and row.ts:
                ts = self.slack.update(
                    row.channel or self.channel,
                    row.ts,
                    Reply(
                        text=self._named(alert.title),
                        blocks=[section(f":large_green_circle: *Resolved:* {alert.title}")],
                    ),
                )
                self.ledger.resolve(alert.resolves, now=now)
                return ts
        channel, thread_ts = thread or (self.router.channel(alert), None)
        return (
            self.slack.post(channel, Reply(text=self._named(alert.title), blocks=blocks), thread_ts) or None
        )

    def _post_state(
        self,
        alert: Alert,
        qr: QueuedResourceInfo | None,
        now: datetime,
        threads: dict[str, tuple[str | None, str | None]],
    ) -> str | None:
        channel, ts = threads.get(alert.resource) or self.ledger.thread(alert.resource)
        state = qr.state if qr else alert.state
        summary = f":satellite: *`{alert.name}`* ({alert.zone}): *{state}*"
        if qr is not None and qr.state == "FAILED" and qr.error:
            summary += f"\nError: {qr.error}"
        if qr is not None and qr.state == "SUSPENDED":
            summary += f"\nInitiated by {qr.state_initiator or 'unknown'}"
        blocks = [section(summary), context(self._named(f"updated {utc(now)} · transitions in the thread"))]
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
        reply_blocks = [section(self.router.mention(alert) + alert.title)]
        if qr is not None and qr.name == self.options.primary and dead_reason(qr):
            reply_blocks.append(recover_buttons(qr))
        return self.slack.post(channel or self.channel, Reply(alert.title, reply_blocks), ts) or None

    # ---- vLLM
    def _tick_vllm(self, now: datetime, result: TickResult) -> None:
        try:
            client, endpoint = self.services.vllm()
        except OpsError:
            return  # no endpoint (nothing ACTIVE): not an outage
        with client:
            health = client.health()
            # "not-vllm": an OpenAI-compatible server without vLLM's /health answered: not an outage
            check = VllmCheck(ok=health.state in ("ready", "not-vllm"), detail=health.detail)
            text: str | None = None
            if check.ok:
                try:
                    text = client.metrics_text()
                    summary = summarize(text)
                    check = VllmCheck(
                        True,
                        "",
                        summary.kv_cache_usage,
                        summary.preemptions,
                        summary.running,
                        summary.waiting,
                        summary.generation_tokens,
                        _probe_timed_out(self.services) if summary.waiting and summary.running == 0 else None,
                    )
                except (OpsError, ValueError):
                    text = None
        watch = VllmWatch.from_json(self.ledger.get_value("vllm_watch"))
        found, watch = evaluate_vllm(
            check,
            watch,
            now,
            endpoint=_public_url(endpoint.url),
            failures=self.health_failures,
            kv_threshold=self.kv_threshold,
            kv_checks=self.kv_checks,
        )
        self.ledger.set_value("vllm_watch", watch.to_json())
        snapshot = _snapshot(text, now)
        found += self._serving_alerts(snapshot, _public_url(endpoint.url), now)
        mutes = self.ledger.mutes(now)
        for alert in found:
            self._deliver(alert, None, now, result, mutes)
        self._tick_idle(snapshot, now, result, mutes)

    def _deliver(
        self,
        alert: Alert,
        qr: QueuedResourceInfo | None,
        now: datetime,
        result: TickResult,
        mutes: dict[str, tuple[datetime, str]],
        thread: tuple[str, str | None] | None = None,
    ) -> None:
        """Claim and post one alert: suppressed when one of its subjects is muted, or when it resolves an
        alert that was suppressed (nobody saw the problem, so nobody needs its end)."""
        if alert.resolves:
            resolved = self.ledger.get(alert.resolves)
            muted = resolved is not None and resolved.status == "suppressed"
        else:
            muted = bool(mute_subjects(alert) & mutes.keys())
        if muted:
            if self.ledger.claim(alert, "suppressed", now=now):
                result.suppressed += 1
            return
        if not self.ledger.claim(alert, "sending", now=now):
            result.duplicate += 1
            return
        self._send(
            alert,
            partial(self._post, alert, qr, now, thread),
            result,
            channel=thread[0] if thread else None,
            qr=qr,
        )

    def _send(
        self,
        alert: Alert,
        post: Callable[[], str | None],
        result: TickResult,
        channel: str | None = None,
        qr: QueuedResourceInfo | None = None,
    ) -> None:
        """Post a claimed alert and record it as sent; on failure release the claim (next tick retries)."""
        try:
            ts = post()
        except Exception as exc:
            self.refused = not_member(exc)
            if self.refused:  # never silent: every tick says so until someone invites the bot
                log.error(
                    "alert %s not posted: %s; %s",
                    alert.key,
                    self.refused,
                    invite_hint(channel or self.router.channel(alert)),
                )
            else:
                log.warning("could not post alert %s: %s", alert.key, type(exc).__name__, exc_info=True)
            self.ledger.release(alert.key)
            result.failed += 1
            return
        self.refused = None
        self.ledger.mark_sent(alert.key, channel or self.router.channel(alert), ts)
        result.sent += 1
        if self.on_sent is not None:
            self.on_sent(alert.kind)
        self._post_diagnosis(alert, qr, channel or self.router.channel(alert), ts)

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

    # ---- planned work (maintenance windows)
    def _tick_maintenance(self, now: datetime, result: TickResult) -> bool:
        """While planned work is under way, hold the deployment's health alerts; when vLLM serves (or the
        window's deadline passes) close the window and say so in the command's thread.

        Returns:
            True while the window stays open (the vLLM health, SLO and idle checks are skipped).
        """
        window = self.windows.current(self.deployment)
        if window is None:
            return False
        if self._serving():
            if self.windows.close("serving", now=now, deployment=self.deployment):
                took = _span(now - window.opened_at)
                title = f"vLLM serving after {took} ({window.reason})"
                self._report_window(window, "serving", title, "", now, result)
            return False
        if now < window.deadline:
            return True
        if self.windows.close("stuck", now=now, deployment=self.deployment):
            took = _span(now - window.opened_at)
            title = f"vLLM still not serving after {took}: start-up looks stuck ({window.reason})"
            self._report_window(window, "stuck", title, self._startup_diagnosis(), now, result)
        return False

    def _report_window(
        self, window: Window, kind: str, title: str, text: str, now: datetime, result: TickResult
    ) -> None:
        key = f"maintenance:{window.deployment}@{_stamp(window.opened_at)}|{kind}|"
        alert = subject_alert(key, kind, f"maintenance:{window.deployment}", title, text)
        thread = (window.channel, window.thread_ts) if window.channel else None
        self._deliver(alert, None, now, result, {}, thread)

    def _serving(self) -> bool:
        """Whether the deployment's vLLM answers /health with 200 (no endpoint yet: not serving)."""
        try:
            client, _ = self.services.vllm()
        except OpsError:
            return False
        with client:
            return bool(client.health().state == "ready")

    def _startup_diagnosis(self) -> str:
        """What the TPU VM says about a start-up that does not finish: the container's state and the known
        failure signatures in its log; a failing SSH or docker gives one line saying so."""
        try:
            container, host = self.services.container()
            with host:
                status = container.status()
                findings = diagnose(container.logs(tail=400)) if status.exists else []
        except OpsError as exc:
            return f"Diagnosis unavailable: {exc.message}" + (f" ({exc.hint})" if exc.hint else "")
        except Exception as exc:  # diagnosis is best effort: the stuck notice must still go out
            log.warning("start-up diagnosis failed: %s", type(exc).__name__)
            return f"Diagnosis unavailable: {type(exc).__name__}"
        lines = [f"Container `{container.name}`: {status.state}, {status.restart_count} restart(s)"]
        lines += [f"• *{f.name}*: {f.conclusion} _Fix:_ {f.fix}" for f in findings[:3]]
        if not findings:
            lines.append("No known failure signature in the last 400 log lines; see `/vllm logs`.")
        return "\n".join(lines)

    # ---- serving SLO rules and idle stop
    def _serving_alerts(self, snapshot: Snapshot | None, endpoint: str, now: datetime) -> list[Alert]:
        watch = SloWatch.from_json(self.ledger.get_value("slo_watch"))
        found, watch = evaluate_slo(snapshot, watch, self.options.slo_rules, now, endpoint=endpoint)
        self.ledger.set_value("slo_watch", watch.to_json())
        return found

    def _tick_idle(
        self,
        snapshot: Snapshot | None,
        now: datetime,
        result: TickResult,
        mutes: dict[str, tuple[datetime, str]],
    ) -> None:
        """Idle alert after `idle_after` without a finished request (again every `idle_after` while it
        lasts), and the proposed stop at each `idle_stop_at` time; both offer Delete / Keep for N hours."""
        opts = self.options
        if snapshot is None or (opts.idle_after is None and opts.idle_stop_at is None):
            return
        watch = IdleWatch.from_json(self.ledger.get_value("idle_watch")).observe(snapshot.requests, now)
        self.ledger.set_value("idle_watch", watch.to_json())
        idle = watch.idle_for(now)
        due: list[tuple[str, str]] = []
        if opts.idle_after is not None and idle >= opts.idle_after:
            periods = int(idle / opts.idle_after)
            due.append((f"{watch.since}#{periods}", f"served no request for {_span(idle)}"))
        moment = opts.idle_stop_at.latest(now) if opts.idle_stop_at is not None else None
        if moment is not None and now - moment <= timedelta(minutes=15):
            due.append((f"stop@{_stamp(moment)}", f"is still running at its scheduled stop ({utc(moment)})"))
        if not due:
            return
        qr = self._primary()
        if qr is None or qr.state != "ACTIVE":
            return
        for suffix, what in due:
            alert = qr_alert(qr, "idle", suffix, f"`{qr.name}` ({qr.zone}) {what}", _idle_cost(qr, idle, now))
            self._deliver(alert, qr, now, result, mutes)

    def _primary(self) -> QueuedResourceInfo | None:
        try:
            return self.services.tpu.get_queued_resource(
                self.options.primary, self.services.settings.tpu_zones
            )
        except OpsError:
            return None

    # ---- automatic recovery of the primary
    def _auto_recover_dead(
        self,
        found: Sequence[Alert],
        by_identity: dict[str, QueuedResourceInfo],
        now: datetime,
        result: TickResult,
    ) -> None:
        if not self.options.auto_recover:
            return
        for ident in dict.fromkeys(a.resource for a in found if a.kind in ("state", "preempted")):
            qr = by_identity.get(ident)
            if qr is not None and qr.name == self.options.primary and dead_reason(qr):
                self._auto_recover(qr, now, result)

    def _auto_recover(self, qr: QueuedResourceInfo, now: datetime, result: TickResult) -> None:
        """Recover a dead primary without a click: only one the bot created, within the day's caps;
        announced in the thread of its state message and written to the audit trail."""
        ident = alerts_mod.identity(qr)
        key = f"{ident}|recovery|auto"
        channel, ts = self.ledger.thread(ident)
        thread = (channel, ts) if channel and ts else None
        reason = dead_reason(qr) or qr.state
        command = f"tpu recover {qr.name} --zone {qr.zone}"
        refusal: str | None = None
        usd = 0.0
        if not created_by_bot(qr):
            refusal = f"`{qr.name}` was not created by the bot (no `{MANAGED_BY_KEY}: {MANAGED_BY}` label)"
        else:
            try:
                usd = projected_usd(qr)
                refusal = self.budget.refusal(usd, now)
            except OpsError as exc:
                refusal = f"no price to check the spend cap against: {exc.message}"
        if refusal is not None:
            note = qr_alert(qr, "recovery", "auto", f"Automatic recovery skipped: {refusal}. Use Recover.")
            if self.ledger.get(key) is None:
                self._audit_auto(channel, command, f"refused: {refusal}")
            self._deliver(note, None, now, result, {}, thread)
            return
        title = f":ambulance: Recovering `{qr.name}` automatically ({reason}): delete it and create it again"
        attempt = len(self.budget.today(now)) + 1
        text = f"Projected spend ${usd:,.2f}; automatic recovery {attempt} of {self.budget.max_per_day} today"
        announce = qr_alert(qr, "recovery", "auto", title, text)
        if not self.ledger.claim(announce, "sending", now=now):
            result.duplicate += 1
            return
        self._send(announce, partial(self._post, announce, None, now, thread), result, channel=channel)
        self._audit_auto(channel, command, f"started: {reason}")
        # The recovery's maintenance window is this deployment's, so it holds this deployment's alerts.
        ctx = Context(
            self.services, registry, AUTO_RECOVER_USER, channel or self.channel, deployment=self.deployment
        )
        try:
            outcome = recover(ctx, qr, search=False, thread=thread)
        except OpsError as exc:
            outcome = f"failed: {exc.message}"
        except Exception as exc:  # an unexpected failure is reported, never silent
            log.exception("automatic recovery failed")
            outcome = f"failed unexpectedly: {type(exc).__name__}"
        self.budget.record(ident, usd, outcome, now=now)
        self._audit_auto(channel, command, outcome)
        done = qr_alert(qr, "recovery", "auto|done", f"Automatic recovery of `{qr.name}`: {outcome}")
        self._deliver(done, None, now, result, {}, thread)

    def _audit_auto(self, channel: str | None, command: str, outcome: str) -> None:
        entry = AuditEntry(
            self.clock(), AUTO_RECOVER_USER, channel or self.channel, "auto-recover", command, outcome[:200]
        )
        log.info("audit action=auto-recover command=%r outcome=%r", command, outcome)
        try:
            self.services.store.record(entry)
        except Exception:
            log.exception("could not write the audit entry")

    # ---- digest and test
    def digest(self) -> str | None:
        """Post the daily digest (once per UTC day): running resources, cost in the last 24 h (USD), alerts
        raised in the last 24 h and open. Returns the message ts, or None if already posted today."""
        now = self.clock()
        day = now.strftime("%Y-%m-%d")
        where = f":{self.deployment}" if self.ledger.scoped else ""
        key = f"digest{where}@{day}|digest|"
        marker = subject_alert(key, "digest", "digest", f"Daily digest {day}")
        if not self.ledger.claim(marker, "sending", now=now):
            return None
        try:
            text = self.digest_text(now)
            channel = self.options.digest_channel or self.channel
            ts = self.slack.post(channel, Reply(text=text, blocks=[section(text)])) or None
        except Exception:
            self.ledger.release(key)
            raise
        self.ledger.mark_sent(key, channel, ts)
        return ts

    def digest_text(self, now: datetime) -> str:
        """The digest's text (mrkdwn)."""
        since = now - timedelta(hours=24)
        listing = self.services.tpu.list_queued_resources(self.services.settings.tpu_zones)
        running = [
            qr for qr in listing.resources if qr.state == "ACTIVE" and qr.name not in self.options.elsewhere
        ]
        total, unknown = 0.0, 0
        for qr in running:
            try:
                spend = burn(qr, now)
            except OpsError:
                unknown += 1
                continue
            total += spend.usd_per_hour * min(spend.hours_so_far, 24.0)
        raised = [r for r in self.ledger.rows(since=since) if r.status == "sent" and r.kind != "digest"]
        open_alerts = self.ledger.open_alerts(since=now - timedelta(days=7))
        names = ", ".join(f"`{qr.name}`" for qr in running) or "none"
        lines = [
            f":newspaper: *Daily digest* {self._named(utc(now))}",
            f"Running: {len(running)} ({names})",
            f"Cost in the last 24 h: ${total:,.2f}" + (f" (+{unknown} without a price)" if unknown else ""),
            f"Alerts raised in the last 24 h: {len(raised)}; open: {len(open_alerts)}",
        ]
        if listing.errors:
            lines.append("Zones not read: " + ", ".join(sorted(listing.errors)))
        return "\n".join(lines)

    def post_test(self, user_id: str) -> str | None:
        """Post a test message (no buttons) to the alert channel; returns its ts."""
        now = self.clock()
        text = (
            f":test_tube: Test alert requested by {mention(user_id)} at {utc(now)}: the alert channel works."
        )
        return self.slack.post(self.channel, Reply(text=text, blocks=[section(text)])) or None

    def open_summary(self, now: datetime) -> list[str]:
        """One line per open alert of the last 7 days (for `/alerts list`)."""
        return [
            f"• {r.text} _({human_duration(now - r.at)} ago, `{r.kind}`)_"
            for r in self.ledger.open_alerts(since=now - timedelta(days=7))
        ]
