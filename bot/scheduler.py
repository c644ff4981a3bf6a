"""APScheduler jobs in the bot process: evaluate alerts and post them to the alert channel, exactly once.

`AlertScheduler.tick()` is one evaluation: list the watched queued resources, `ops.alerts.evaluate`, then
for each alert claim its key in the ledger (insert-if-absent) and post only if the claim won. A muted
resource's alerts are claimed as "suppressed" (never sent later); thresholds passed while the bot was down
are claimed as "superseded". State changes keep ONE message per resource, updated in place
(`chat_update`), with each transition posted in its thread. TPU host maintenance Google announced on a
node is told once before its window (`ops.tpu_maintenance`) and resolved in place when it is over. A
channel Slack refuses is left alone and re-checked (`bot.alert_delivery`). The daily digest is a cron job.

Messages carry names, zones, states, times and USD figures only: never tokens, secrets or URLs with
credentials. They leave through `bot.slack_gateway.SlackGateway` (`post`, `update`), which also redacts and
escapes whatever a backend put in an alert's text (an error message, a health detail).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from functools import partial
from urllib.parse import urlsplit, urlunsplit

from apscheduler.schedulers.background import BackgroundScheduler

from bot.alert_delivery import OncallOptions, TickResult
from bot.alert_reach import reach_lines
from bot.identity import identify
from bot.oncall import OncallJobs
from bot.render import Reply, human_duration, mention, section, utc
from bot.services import Services
from bot.slack_gateway import refusal_of
from ops import alerts as alerts_mod
from ops.alert_outbox import UNDELIVERED
from ops.alerts import evaluate, lapsed_countdowns, mute_subjects, subject_alert
from ops.errors import BackendTimeout, OpsError
from ops.metrics import summarize
from ops.ownership import SEARCH_KEY
from ops.slo import Snapshot
from ops.spend import DeploymentSpend, deployment_spend
from ops.tpu_maintenance import maintenance_alerts, maintenance_over
from ops.tpu_model import QueuedResourceInfo, ZoneListing
from ops.vllm_watch import VllmCheck, VllmWatch, evaluate_vllm

__all__ = [
    "DIGEST_MISFIRE_GRACE_S",
    "LEASE",
    "AlertScheduler",
    "OncallOptions",
    "TickResult",
    "active",
    "parse_key",
]

log = logging.getLogger(__name__)

_active: AlertScheduler | None = None
_active_lock = threading.Lock()


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


def _public_url(url: str) -> str:
    """The URL without user info or query (a URL may embed credentials; they are never posted)."""
    parts = urlsplit(url)
    host = parts.hostname or ""
    netloc = f"{host}:{parts.port}" if parts.port else host
    return urlunsplit((parts.scheme, netloc, parts.path, "", ""))


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


def _probe_timed_out(services: Services) -> bool | None:
    """Whether a one-token chat completion timed out (None: it failed otherwise, so it says nothing)."""
    try:
        services.probe()
    except BackendTimeout:
        return True
    except OpsError:
        return None
    return False


class AlertScheduler(OncallJobs):
    """Alert jobs of the bot process: a tick (queued resources, vLLM health, then the on-call checks of
    `bot.oncall`) every `interval_s` and the daily digest. Arguments: see `bot.alert_delivery.AlertDelivery`.

    With several deployments each has its AlertScheduler; the first one's `start()` runs every one's
    tick and digest (`peers`) under the one scheduler lease, so one replica does all the alert work.
    """

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
        """The watcher whose primary is queued resource `name` in one of its zones (a Recover button's
        resource), None when no deployment's primary is that one."""
        return next(
            (
                each
                for each in self.watchers.values()
                if each.options.primary == name and zone in each.services.settings.tpu_zones
            ),
            None,
        )

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
            now = self.clock()
            try:
                self.recheck_refused(now, result)
            except Exception as exc:
                log.exception("re-check of refused alert channels failed")
                result.errors.append(f"recheck: {type(exc).__name__}"[:300])
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
        if self.on_tick is not None:
            self.on_tick(time.perf_counter() - started, time.thread_time() - started_cpu)
        return result

    def _tick_resources(self, now: datetime, result: TickResult) -> None:
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
        lead = self._lead(now)
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
        for alert in found:
            qr = by_identity.get(alert.resource)
            for key in alert.supersedes:
                if key in known:
                    continue
                if self.ledger.claim_key(key, alert.kind, alert.resource, "superseded", now=now):
                    result.superseded += 1
            if alert.key in known:
                result.duplicate += 1
                continue
            muted = self.unseen(alert, now) if alert.resolves else bool(mute_subjects(alert) & mutes.keys())
            if muted:
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
        names the search's operation, whose lease is live: `ops.ownership.hold_operation`)."""
        search = qr.labels.get(SEARCH_KEY)
        return search is not None and self.services.store.operation_running(search, now)

    def _lead(self, now: datetime) -> timedelta:
        """The clock time to the next tick, for countdowns to fire before their threshold rather than up
        to a tick after it: the last gap between ticks (the simulated clock of the demo runs faster than
        `interval_s`), at most half the smallest threshold so that no two thresholds merge."""
        last, self._last_tick = self._last_tick, now
        gap = now - last if last is not None and now > last else timedelta(seconds=self.interval_s)
        return min(gap, timedelta(minutes=min(self.thresholds)) / 2)

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
                # Who answers: a stale process on the port must not pass for the deployment's server.
                identity = identify(self.services, client, endpoint, health, metrics_text=text)
                if identity.other:
                    check = replace(check, other_server=identity.line())
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
        channel = self.options.digest_channel or self.channel
        try:
            text = self.digest_text(now)
            ts = self.post_or_hold(key, channel, Reply(text=text, blocks=[section(text)]))
        except Exception:
            self.ledger.release(key)
            raise
        if ts is not None:
            self.ledger.mark_sent(key, channel, ts)
        return ts

    def digest_text(self, now: datetime) -> str:
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
            f":newspaper: *Daily digest* {self._named(utc(now))}",
            f"Running: {len(running)} ({names})",
            f"Cost in the last 24 h: {_digest_cost(spend)}",
            f"Alerts raised in the last 24 h: {len(raised)}; open: {len(open_alerts)}",
        ]
        if listing.errors:
            lines.append("Zones not read: " + ", ".join(sorted(listing.errors)))
        return "\n".join(lines)

    def post_test(self, user_id: str) -> str | None:
        """Post a test message (no buttons) to the alert channel; returns its ts. A post that gets
        through clears a recorded refusal of the channel and posts what was held back; a refusal is
        recorded (and raised).

        Raises:
            SlackDeliveryError: Slack refused the post.
        """
        now = self.clock()
        text = (
            f":test_tube: Test alert requested by {mention(user_id)} at {utc(now)}: the alert channel works."
        )
        with self._lock:
            try:
                ts = self.slack.post(self.channel, Reply(text=text, blocks=[section(text)])) or None
            except Exception as exc:
                refusal = refusal_of(exc)
                if refusal is not None:
                    self._refused(refusal, self.channel)
                raise
            self.delivery_works(self.channel, now)
        return ts

    def open_summary(self, now: datetime) -> list[str]:
        """The refusals that keep alerts from their channel (`bot.alert_reach`), then one line per open
        alert of the last 7 days (for App Home)."""
        return [
            *reach_lines(self.services.store, self.deployment),
            *(
                f"• {r.text} _({human_duration(now - r.at)} ago, `{r.kind}`)_"
                for r in self.ledger.open_alerts(since=now - timedelta(days=7))
            ),
        ]


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
