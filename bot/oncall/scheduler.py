"""APScheduler jobs in the bot process: evaluate alerts and post them to the alert channel, exactly once.

`AlertScheduler.tick()` is one evaluation: list the watched queued resources, `ops.alerts.ledger.evaluate`,
then
for each alert claim its key in the ledger (insert-if-absent) and post only if the claim won. A muted
resource's alerts are claimed as "suppressed" (never sent later); thresholds passed while the bot was down
are claimed as "superseded". State changes keep ONE message per resource, updated in place
(`chat_update`), with each transition posted in its thread. TPU host maintenance Google announced on a
node is told once before its window (`ops.tpu.maintenance`) and resolved in place when it is over. A
channel Slack refuses is left alone and re-checked (`bot.oncall.delivery`). The daily digest is a cron job.

The scheduler is given its collaborators, each a small class with one job (`AlertScheduler.build` wires
them from the settings): `AlertDelivery` (the one claim -> send path of every alert), `RefusedChannels`
(re-checking refused channels), `ResourceChecks` (queued resources and TPU host maintenance),
`PlannedWork`, `ServingChecks` and `AutoRecovery` (`bot.oncall.checks`), and `Digest`.

Messages carry names, zones, states, times and USD figures only: never tokens, secrets or URLs with
credentials. They leave through `bot.slack.gateway.SlackGateway` (`post`, `update`), which also redacts and
escapes whatever a backend put in an alert's text (an error message, a health detail).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime, timedelta

from apscheduler.schedulers.background import BackgroundScheduler

from bot.commands.runner import Runner
from bot.oncall.checks import AutoRecovery, PlannedWork, ServingChecks
from bot.oncall.delivery import AlertDelivery, OncallOptions, RefusedChannels, TickResult
from bot.oncall.routing import Router
from bot.services import Services
from bot.shared.diagnosis import refusal_lines
from bot.slack.gateway import SlackGateway, refusal_of
from bot.slack.render import Reply, mention, section, utc
from bot.views.alerts import gone_line, open_alert_line
from ops.alerts import ledger as alerts_mod
from ops.alerts.ledger import (
    DEFAULT_THRESHOLDS,
    AlertLedger,
    LedgerRow,
    evaluate,
    lapsed_countdowns,
    subject_alert,
)
from ops.alerts.outbox import UNDELIVERED, AlertOutbox
from ops.alerts.placement import PlacedAlerts, place_open_alerts
from ops.alerts.planned import DEFAULT_DEPLOYMENT, MaintenanceWindows
from ops.cost.spend import DeploymentSpend, deployment_spend
from ops.errors import OpsError
from ops.tpu.maintenance import maintenance_alerts, maintenance_over
from ops.tpu.model import QueuedResourceInfo, ZoneListing, primary_among
from ops.tpu.ownership import SEARCH_KEY
from ops.tpu.recovery import RecoveryBudget

__all__ = [
    "DIGEST_MISFIRE_GRACE_S",
    "LEASE",
    "AlertScheduler",
    "Digest",
    "OncallOptions",
    "ResourceChecks",
    "TickResult",
    "active",
    "parse_key",
    "placed_open_alerts",
]

log = logging.getLogger(__name__)

_active: AlertScheduler | None = None
_active_lock = threading.Lock()


def placed_open_alerts(services: Services, rows: list[LedgerRow]) -> tuple[PlacedAlerts, str]:
    """`rows` (open alerts) placed against the queued resources of the watched zones listed now
    (`ops.alerts.placement.place_open_alerts`: by identity, so an alert of a resource since deleted and
    recreated under its name is gone, with the new one named), and a warning line when a zone, or the
    listing, did not answer ("" otherwise): their alerts are then kept as recorded. /alerts list and App
    Home place them so."""
    zones = services.settings.tpu_zones
    try:
        listing = services.tpu.list_queued_resources(zones)
    except OpsError as exc:
        return PlacedAlerts(
            list(rows), []
        ), f":warning: could not check which resources still exist: {exc.message}"
    answered = set(zones) - set(listing.errors)
    note = ""
    if listing.errors:
        missing = ", ".join(f"`{zone}`" for zone in sorted(listing.errors))
        note = f":warning: {missing} did not answer: alerts of resources there are shown as recorded."
    return place_open_alerts(rows, listing.resources, answered), note


def active() -> AlertScheduler | None:
    """The started AlertScheduler of this process (for `/alerts test`), or None."""
    return _active


LEASE = "alert-scheduler"
DIGEST_MISFIRE_GRACE_S = 3600
PRUNE_EVERY = timedelta(hours=1)
"""How often a tick forgets the history of resources gone for longer than ALERT_RETENTION_DAYS."""
"""How late the daily digest may still run after its time (a stalled or suspended process), seconds.
APScheduler's default is 1 s: a process busy for 2 s at 09:00 skips the day's digest with only a warning
("Run time of job ... was missed by"); https://apscheduler.readthedocs.io/en/3.x/userguide.html#missed-job-executions-and-coalescing."""


def parse_key(key: str) -> tuple[str, str, str]:
    """(zone, name, create time) of a queued-resource alert key; raises ValueError for other keys."""
    resource = key.split("|", 1)[0]
    where, _, created = resource.partition("@")
    zone, _, name = where.partition("/")
    if not zone or not name or not created:
        raise ValueError(f"not a queued-resource alert key: {key!r}")
    return zone, name, created


class AlertScheduler:
    """Alert jobs of one deployment, given their collaborators: a tick (refused channels re-checked, queued
    resources, then planned work and the serving checks) every `interval_s`, and the daily digest.
    `build` wires them from the settings; the arguments are the collaborators of one deployment.

    Args:
        services: the deployment's backends (the scheduler lease lives in `services.store`).
        delivery: the one claim -> send path (its `channel`, `ledger`, `outbox`, `options`, `deployment`
            are the scheduler's).
        refused: re-checks the channels Slack refused.
        resources: the queued-resource checks (and automatic recovery).
        digest: the daily digest.
        planned: maintenance windows (None: not checked, nor the serving checks).
        serving: vLLM health, SLO rules and idle stop (None: not checked).
        interval_s: seconds between ticks (default 60).
        digest_hour: UTC hour of the daily digest (default 9).
        on_tick: called after each tick with its wall time and its thread's CPU time, seconds
            (`Metrics.alert_tick_finished`).

    With several deployments each has its AlertScheduler; the first one's `start()` runs every one's
    tick and digest (`peers`) under the one scheduler lease, so one replica does all the alert work.
    """

    def __init__(
        self,
        services: Services,
        delivery: AlertDelivery,
        refused: RefusedChannels,
        resources: ResourceChecks,
        digest: Digest,
        *,
        planned: PlannedWork | None = None,
        serving: ServingChecks | None = None,
        interval_s: float = 60,
        digest_hour: int = 9,
        on_tick: Callable[[float, float], None] | None = None,
    ) -> None:
        self.services = services
        self.delivery = delivery
        self.refused = refused
        self.resources = resources
        self.digests = digest
        self.planned = planned
        self.serving = serving
        self.interval_s = interval_s
        self.digest_hour = digest_hour
        self.on_tick = on_tick
        self.deployment = delivery.deployment
        self.channel = delivery.channel
        self.ledger = delivery.ledger
        self.outbox = delivery.outbox
        self.options = delivery.options
        self.replica_id = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.peers: list[AlertScheduler] = []  # the other deployments' schedulers, run by `start()`
        self._lock = threading.Lock()
        self._scheduler: BackgroundScheduler | None = None

    @classmethod
    def build(
        cls,
        services: Services,
        slack: SlackGateway,
        channel: str,
        *,
        runner: Runner | None = None,
        interval_s: float = 60,
        clock: Callable[[], datetime] | None = None,
        thresholds: Sequence[int] = DEFAULT_THRESHOLDS,
        vllm_checks: bool = True,
        health_failures: int = 3,
        kv_threshold: float = 0.9,
        kv_checks: int = 3,
        digest_hour: int = 9,
        on_sent: Callable[[str], None] | None = None,
        on_tick: Callable[[float, float], None] | None = None,
        options: OncallOptions | None = None,
        deployment: str = DEFAULT_DEPLOYMENT,
    ) -> AlertScheduler:
        """The AlertScheduler of one deployment with its collaborators wired.

        Args:
            services: the deployment's backends (`tpu`, `store`, `settings.tpu_zones`, `vllm()` are used).
            slack: the bot's SlackGateway.
            channel: alert channel id (e.g. Settings.alert_channel).
            runner: the bot's command runner, which runs automatic recovery (needed with
                `options.auto_recover`).
            interval_s: seconds between ticks (default 60).
            clock: returns timezone-aware UTC now (default: `services.now`); tests pass a controllable one.
            thresholds: minutes before a deadline (default 60, 15, 5).
            vllm_checks: also check maintenance windows and vLLM /health and /metrics on each tick.
            health_failures: failed /health checks in a row before "vLLM down" (default 3).
            kv_threshold: KV-cache usage fraction 0..1 (default 0.9); kv_checks: checks in a row (default 3).
            digest_hour: UTC hour of the daily digest (default 9).
            on_sent: called with an alert's kind after each post (the bot's `alerts_sent` counter).
            on_tick: called after each tick with its wall time and its thread's CPU time, seconds.
            options: routing, SLO rules, idle stop and recovery (default: OncallOptions()).
            deployment: the name of the deployment watched (bot.deployments; "default" with a single one):
                its maintenance window holds these alerts, its ledger records them (`AlertLedger`), its
                budget caps automatic recovery, and a named deployment's messages say its name.

        Raises:
            ValueError: `options.auto_recover` without a `runner`.
        """
        opts = options or OncallOptions()
        if opts.auto_recover and runner is None:
            raise ValueError("automatic recovery runs through the command runner: pass runner=")
        ledger = AlertLedger(services.store, deployment)
        delivery = AlertDelivery(
            services,
            slack,
            channel,
            ledger,
            AlertOutbox(services.store, deployment),
            Router(channel, opts.routes, opts.mention_group),
            opts,
            clock=clock or services.now,
            on_sent=on_sent,
        )
        budget = RecoveryBudget(
            services.store,
            max_per_day=opts.auto_recover_max_per_day,
            max_usd_per_day=opts.auto_recover_max_usd_per_day,
            deployment=deployment,
        )
        recovery = AutoRecovery(runner, delivery, budget, opts) if runner is not None else None
        serving = ServingChecks(
            services,
            delivery,
            opts,
            health_failures=health_failures,
            kv_threshold=kv_threshold,
            kv_checks=kv_checks,
        )
        planned = PlannedWork(services, delivery, MaintenanceWindows(services.store))
        return cls(
            services,
            delivery,
            RefusedChannels(delivery),
            ResourceChecks(
                services, delivery, opts, interval_s=interval_s, thresholds=thresholds, recovery=recovery
            ),
            Digest(services, delivery, opts),
            planned=planned if vllm_checks else None,
            serving=serving if vllm_checks else None,
            interval_s=interval_s,
            digest_hour=digest_hour,
            on_tick=on_tick,
        )

    # ---- lifecycle
    @property
    def watchers(self) -> dict[str, AlertScheduler]:
        """Deployment name -> its AlertScheduler: this one, then `peers`."""
        everyone: list[AlertScheduler] = [self, *self.peers]
        return {each.deployment: each for each in everyone}

    def owner_of(self, key: str) -> AlertScheduler | None:
        """The watcher (this one or a peer) whose deployment raised alert `key`; None for an unknown key."""
        deployment = self.ledger.owner(key)
        return None if deployment is None else self.watchers.get(deployment)

    def watcher_of(self, zone: str, name: str) -> AlertScheduler | None:
        """The watcher whose primary is queued resource `name` in `zone` (a Recover button's resource): the
        one `primary_among` its zones' listing picks, since a name is unique per zone only and another
        zone's resource of the primary's name is not the primary.

        Returns:
            That watcher; None when no deployment's primary is that one (a zone that did not answer holds
            none: `list_queued_resources` reports it instead of raising).
        """
        for each in self.watchers.values():
            zones = each.services.settings.tpu_zones
            if each.options.primary != name or zone not in zones:
                continue
            listing = each.services.tpu.list_queued_resources(zones)
            primary = primary_among(listing.resources, name, zones)
            if primary is not None and primary.zone == zone:
                return each
        return None

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
        started, started_cpu = time.perf_counter(), time.thread_time()
        with self._lock:
            now = self.delivery.clock()
            try:
                self.refused.recheck(now, result)
            except Exception as exc:
                log.exception("re-check of refused alert channels failed")
                result.errors.append(f"recheck: {type(exc).__name__}"[:300])
            try:
                self.resources.tick(now, result)
            except Exception as exc:  # a failing backend must not kill the job
                log.exception("alert tick failed")
                result.errors.append(f"{type(exc).__name__}: {exc}"[:300])
            if self.planned is not None or self.serving is not None:
                try:
                    held = self.planned is not None and self.planned.tick(now, result)
                    if not held and self.serving is not None:
                        self.serving.tick(now, result)
                except Exception as exc:
                    log.exception("vLLM alert check failed")
                    result.errors.append(f"vllm: {type(exc).__name__}"[:300])
        if self.on_tick is not None:
            self.on_tick(time.perf_counter() - started, time.thread_time() - started_cpu)
        return result

    # ---- digest and test
    def digest(self) -> str | None:
        """Post the daily digest (`Digest.post`). Returns the message ts, or None if already posted today."""
        return self.digests.post()

    def post_test(self, user_id: str) -> str | None:
        """Post a test message (no buttons) to the alert channel; returns its ts. A post that gets
        through clears a recorded refusal of the channel and posts what was held back; a refusal is
        recorded (and raised).

        Raises:
            SlackDeliveryError: Slack refused the post.
        """
        now = self.delivery.clock()
        text = (
            f":test_tube: Test alert requested by {mention(user_id)} at {utc(now)}: the alert channel works."
        )
        with self._lock:
            try:
                ts = self.delivery.slack.post(self.channel, Reply(text=text, blocks=[section(text)])) or None
            except Exception as exc:
                refusal = refusal_of(exc)
                if refusal is not None:
                    self.delivery.refused(refusal, self.channel)
                raise
            self.refused.delivery_works(self.channel, now)
        return ts

    def open_summary(self, now: datetime) -> list[str]:
        """The refusals that keep alerts from their channel (`bot.shared.diagnosis.refusal_lines`), then one
        line per open alert of the last 7 days with the mutes that silence it (`open_alert_line`), of the
        queued resources that exist now, and the line naming those left out (`gone_line`), as `/alerts list`
        shows them (`placed_open_alerts`; for App Home)."""
        mutes = self.ledger.mutes(now)
        placed, note = placed_open_alerts(
            self.services, self.ledger.open_alerts(since=now - timedelta(days=7))
        )
        return [
            *refusal_lines(AlertOutbox(self.services.store, self.deployment)),
            *(open_alert_line(r, now, mutes) for r in placed.current),
            *([gone_line(placed.gone)] if placed.gone else []),
            *([note] if note else []),
        ]


class ResourceChecks:
    """One job: the deployment's queued resources on each tick: thresholds, state changes, TPU host
    maintenance, countdowns that lapsed; the ledger's observations; and, when a dead primary is among this
    tick's alerts, automatic recovery (`recovery`).

    Args:
        services: the deployment's backends (`tpu`, `store`, `settings.tpu_zones` are used).
        delivery: the deployment's AlertDelivery.
        options: the deployment's OncallOptions (`elsewhere`, `maintenance_lead`, `retention_days`).
        interval_s: seconds between ticks; thresholds: minutes before a deadline (default 60, 15, 5).
        recovery: automatic recovery of the primary (None: off).
    """

    def __init__(
        self,
        services: Services,
        delivery: AlertDelivery,
        options: OncallOptions,
        *,
        interval_s: float = 60,
        thresholds: Sequence[int] = DEFAULT_THRESHOLDS,
        recovery: AutoRecovery | None = None,
    ) -> None:
        self.services = services
        self.delivery = delivery
        self.ledger = delivery.ledger
        self.options = options
        self.interval_s = interval_s
        self.thresholds = tuple(thresholds)
        self.recovery = recovery
        self._last_tick: datetime | None = None  # the clock at the last tick (`lead`)
        self._pruned_at: datetime | None = None  # the clock at the last prune (`_prune`)

    def tick(self, now: datetime, result: TickResult) -> None:
        """List the watched queued resources once and deliver what is due.

        Raises:
            OpsError: the TPU API failed (a zone that does not answer is an error line in `result`).
        """
        listing = self.services.tpu.list_queued_resources(self.services.settings.tpu_zones)
        for zone, error in listing.errors.items():
            result.errors.append(f"{zone}: {error.message}")
        answered = [qr for qr in listing.resources if qr.zone not in listing.errors]
        resources = [qr for qr in answered if qr.name not in self.options.elsewhere]
        by_identity = {alerts_mod.identity(qr): qr for qr in resources}
        previous = self.ledger.observations(by_identity)
        # A running capacity search reports its own requests in its progress message: no alerts about
        # them while it owns them (they are still observed, so the one it keeps is not "new" after).
        searching = {ident for ident, qr in by_identity.items() if self._searching(qr, now)}
        lead = self.lead(now)
        found = [
            alert
            for alert in evaluate(
                resources,
                now,
                thresholds=self.thresholds,
                previous=previous,
                watch_since=self.ledger.watch_since(now),
                lead=lead,
            )
            if alert.resource not in searching
        ]
        found += maintenance_alerts(resources, now, lead=self.options.maintenance_lead, tick=lead)
        zones = set(self.services.settings.tpu_zones) - set(listing.errors)
        week = now - timedelta(days=7)
        open_rows = self.ledger.open_alerts(since=week)
        found += lapsed_countdowns(open_rows, answered, zones)
        held = [r for r in self.ledger.rows(since=week, status=UNDELIVERED) if r.resolved_at is None]
        found += maintenance_over([*open_rows, *held], answered, zones)
        mutes = self.ledger.mutes(now)
        # An alert stays due on every tick of its window: claim only the keys not recorded yet (one read),
        # not one failing insert per known key and tick.
        known = self.ledger.known(key for alert in found for key in (alert.key, *alert.supersedes))
        threads: dict[str, tuple[str | None, str | None]] = {}
        primary = primary_among(resources, self.options.primary, self.services.settings.tpu_zones)
        for alert in found:
            for key in alert.supersedes:
                if key in known:
                    continue
                if self.ledger.claim_key(key, alert.kind, alert.resource, "superseded", now=now):
                    result.superseded += 1
            if alert.key in known:
                result.duplicate += 1
                continue
            qr = by_identity.get(alert.resource)
            self.delivery.deliver(alert, qr, now, result, mutes, threads=threads, primary=primary)
        if self.recovery is not None:
            self.recovery.tick(found, by_identity, now, result)
        changed = {}
        for ident, qr in by_identity.items():
            seen = alerts_mod.observe(qr)
            if previous.get(ident) != seen:
                changed[ident] = seen
        self.ledger.observe_many(changed, now=now)
        self._prune(now, by_identity.keys(), zones)

    def _prune(self, now: datetime, listed: Iterable[str], zones: set[str]) -> None:
        """At most once an hour, forget the ledger rows and observations of resources gone for longer than
        ALERT_RETENTION_DAYS, so that a tick's reads grow with the fleet, not with the bot's age."""
        if self._pruned_at is not None and now - self._pruned_at < PRUNE_EVERY:
            return
        self._pruned_at = now
        rows, seen = self.ledger.prune(
            now=now, keep_days=self.options.retention_days, listed=listed, zones=zones
        )
        if rows or seen:
            log.info("alert ledger: forgot %d rows and %d observations of resources gone", rows, seen)

    def _searching(self, qr: QueuedResourceInfo, now: datetime) -> bool:
        """Whether `qr` is a request of a capacity search that is still running (its `SEARCH_KEY` label
        names the search's operation, whose lease is live: `ops.tpu.ownership.hold_operation`)."""
        search = qr.labels.get(SEARCH_KEY)
        return search is not None and self.services.store.operation_running(search, now)

    def lead(self, now: datetime) -> timedelta:
        """The clock time to the next tick, for countdowns to fire before their threshold rather than up
        to a tick after it: the last gap between ticks (the simulated clock of the demo runs faster than
        `interval_s`), at most half the smallest threshold so that no two thresholds merge."""
        last, self._last_tick = self._last_tick, now
        gap = now - last if last is not None and now > last else timedelta(seconds=self.interval_s)
        return min(gap, timedelta(minutes=min(self.thresholds)) / 2)


class Digest:
    """One job: the daily digest of a deployment (once per UTC day, to DIGEST_CHANNEL or the alert channel).

    Args:
        services: the deployment's backends (`tpu`, `settings.tpu_zones` are used).
        delivery: the deployment's AlertDelivery (its ledger claims the day, `post_or_hold` posts).
        options: the deployment's OncallOptions (`digest_channel`, `elsewhere`).
    """

    def __init__(self, services: Services, delivery: AlertDelivery, options: OncallOptions) -> None:
        self.services = services
        self.delivery = delivery
        self.ledger = delivery.ledger
        self.options = options

    def post(self) -> str | None:
        """Post the daily digest (once per UTC day): running resources, cost in the last 24 h (USD), alerts
        raised in the last 24 h and open. Returns the message ts, or None if already posted today."""
        now = self.delivery.clock()
        day = now.strftime("%Y-%m-%d")
        where = f":{self.delivery.deployment}" if self.ledger.scoped else ""
        key = f"digest{where}@{day}|digest|"
        marker = subject_alert(key, "digest", "digest", f"Daily digest {day}")
        if not self.ledger.claim(marker, "sending", now=now):
            return None
        channel = self.options.digest_channel or self.delivery.channel
        try:
            text = self.text(now)
            ts = self.delivery.post_or_hold(key, channel, Reply(text=text, blocks=[section(text)]))
        except Exception:
            self.ledger.release(key)
            raise
        if ts is not None:
            self.ledger.mark_sent(key, channel, ts)
        return ts

    def text(self, now: datetime) -> str:
        """The digest's text (mrkdwn)."""
        since = now - timedelta(hours=24)
        listing = self.services.tpu.list_queued_resources(self.services.settings.tpu_zones)
        running = [
            qr for qr in listing.resources if qr.state == "ACTIVE" and qr.name not in self.options.elsewhere
        ]
        spend = deployment_spend(ZoneListing(tuple(running)), now, since)
        raised = [r for r in self.ledger.rows(since=since) if r.status == "sent" and r.kind != "digest"]
        open_alerts = self.ledger.open_alerts(since=now - timedelta(days=7))
        names = ", ".join(f"`{qr.name}`" for qr in running) or "none"
        lines = [
            f":newspaper: *Daily digest* {self.delivery.named(utc(now))}",
            f"Running: {len(running)} ({names})",
            f"Cost in the last 24 h: {_digest_cost(spend)}",
            f"Alerts raised in the last 24 h: {len(raised)}; open: {len(open_alerts)}",
        ]
        if listing.errors:
            lines.append("Zones not read: " + ", ".join(sorted(listing.errors)))
        return "\n".join(lines)


def _digest_cost(spend: DeploymentSpend) -> str:
    """The digest's cost figure: "$12.34", "at most $12.34 (...)" when a price row is missing and the
    on-demand row bounds it, "$12.34 (priced resources only; +1 without a price)", or "unknown (2 running
    without a price)" when nothing running can be priced (never "$0.00" for those)."""
    unpriced = len(spend.unpriced)
    if unpriced and unpriced == len(spend.resources):
        return f"unknown ({unpriced} running without a price)"
    bound = "at most " if spend.bounded else ""
    missing = "; ".join(dict.fromkeys(r.why for r in spend.resources if r.usd is not None and r.why))
    text = f"{bound}${spend.usd:,.2f}" + (f" ({missing})" if missing else "")
    if unpriced:
        return f"{text} (priced resources only; +{unpriced} without a price)"
    return text
