"""APScheduler jobs in the bot process: evaluate alerts and post them to the alert channel, exactly once.

`AlertScheduler.tick()` is one evaluation: list the watched queued resources, `ops.alerts.evaluate`, then
for each alert claim its key in the ledger (insert-if-absent) and post only if the claim won. A muted
resource's alerts are claimed as "suppressed" (never sent later); thresholds passed while the bot was down
are claimed as "superseded". State changes keep ONE message per resource, updated in place
(`chat_update`), with each transition posted in its thread. The daily digest is a cron job.

Messages carry names, zones, states, times and USD figures only: never tokens, secrets or URLs with
credentials.
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
from slack_sdk import WebClient

from bot.render import Block, context, human_duration, section, utc
from bot.services import Services
from ops import alerts as alerts_mod
from ops.alerts import DEFAULT_THRESHOLDS, Alert, AlertLedger, VllmCheck, VllmWatch, evaluate, evaluate_vllm
from ops.cost import burn
from ops.errors import OpsError
from ops.tpu import QueuedResourceInfo

log = logging.getLogger(__name__)

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


def alert_buttons(key: str) -> Block:
    """Delete now / Snooze 1 h / Acknowledge buttons; each carries the alert key as its value."""
    return {
        "type": "actions",
        "block_id": "alert",
        "elements": [
            {
                "type": "button",
                "action_id": "alert_delete",
                "style": "danger",
                "text": {"type": "plain_text", "text": "Delete now"},
                "value": key,
            },
            {
                "type": "button",
                "action_id": "alert_snooze",
                "text": {"type": "plain_text", "text": "Snooze 1 h"},
                "value": key,
            },
            {
                "type": "button",
                "action_id": "alert_ack",
                "text": {"type": "plain_text", "text": "Acknowledge"},
                "value": key,
            },
        ],
    }


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


def parse_key(key: str) -> tuple[str, str, str]:
    """(zone, name, create time) of a queued-resource alert key; raises ValueError for other keys."""
    resource = key.split("|", 1)[0]
    where, _, created = resource.partition("@")
    zone, _, name = where.partition("/")
    if not zone or not name or not created:
        raise ValueError(f"not a queued-resource alert key: {key!r}")
    return zone, name, created


class AlertScheduler:
    """Alert jobs of the bot process.

    Args:
        services: the bot's backends (`tpu`, `store`, `settings.tpu_zones`, `vllm()` are used).
        client: a Slack WebClient (the bot token).
        channel: alert channel id (e.g. Settings.alert_channel).
        interval_s: seconds between ticks (default 60).
        clock: returns timezone-aware UTC now (default: `services.now`); tests pass a controllable one.
        thresholds: minutes before a deadline (default 60, 15, 5).
        vllm_checks: also check vLLM /health and /metrics on each tick.
        health_failures: failed /health checks in a row before "vLLM down" (default 3).
        kv_threshold: KV-cache usage fraction 0..1 (default 0.9); kv_checks: checks in a row (default 3).
        digest_hour: UTC hour of the daily digest (default 9).
    """

    def __init__(
        self,
        services: Services,
        client: WebClient,
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
    ) -> None:
        self.services = services
        self.client = client
        self.channel = channel
        self.interval_s = interval_s
        self.clock = clock or services.now
        self.thresholds = tuple(thresholds)
        self.vllm_checks = vllm_checks
        self.health_failures = health_failures
        self.kv_threshold = kv_threshold
        self.kv_checks = kv_checks
        self.digest_hour = digest_hour
        self.ledger = AlertLedger(services.store)
        self.replica_id = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.on_sent = on_sent
        self._lock = threading.Lock()
        self._scheduler: BackgroundScheduler | None = None

    # ---- lifecycle
    def start(self) -> AlertScheduler:
        """Start the BackgroundScheduler: a tick every `interval_s` (first one now) and the daily digest."""
        global _active
        scheduler = BackgroundScheduler(timezone=UTC)
        scheduler.add_job(
            self._with_lease(self.tick),
            "interval",
            seconds=self.interval_s,
            id="alerts-tick",
            max_instances=1,
            coalesce=True,
            next_run_time=datetime.now(UTC),
        )
        scheduler.add_job(
            self._with_lease(self.digest),
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
                    self._tick_vllm(now, result)
                except Exception as exc:
                    log.exception("vLLM alert check failed")
                    result.errors.append(f"vllm: {type(exc).__name__}"[:300])
        return result

    def _tick_resources(self, now: datetime, result: TickResult) -> None:
        listing = self.services.tpu.list_queued_resources(self.services.settings.tpu_zones)
        for zone, error in listing.errors.items():
            result.errors.append(f"{zone}: {error.message}")
        resources = [qr for qr in listing.resources if qr.zone not in listing.errors]
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
            if alert.name in mutes:
                if self.ledger.claim(alert, "suppressed", now=now):
                    result.suppressed += 1
                else:
                    result.duplicate += 1
                continue
            if not self.ledger.claim(alert, "sending", now=now):
                result.duplicate += 1
                continue
            if alert.kind in ("state", "preempted"):
                self._send(alert, partial(self._post_state, alert, qr, now, threads), result)
            else:
                self._send(alert, partial(self._post, alert, qr, now), result)
        changed = {}
        for ident, qr in by_identity.items():
            seen = alerts_mod.observe(qr)
            if previous.get(ident) != seen:
                changed[ident] = seen
        self.ledger.observe_many(changed, now=now)

    # ---- posting
    def _blocks(self, alert: Alert, qr: QueuedResourceInfo | None, now: datetime) -> list[Block]:
        icon = {"stale": ":wastebasket:", "vllm_down": ":red_circle:", "vllm_up": ":large_green_circle:"}
        lines = [f"{icon.get(alert.kind, ':alarm_clock:')} *{alert.title}*"]
        if alert.text:
            lines.append(alert.text)
        cost = _cost_line(qr, now)
        if cost:
            lines.append(cost)
        blocks = [section("\n".join(lines))]
        if alert.buttons:
            blocks.append(alert_buttons(alert.key))
        blocks.append(context(f"alert `{alert.kind}` · {utc(now)}"))
        return blocks

    def _post(self, alert: Alert, qr: QueuedResourceInfo | None, now: datetime) -> str | None:
        blocks = self._blocks(alert, qr, now)
        if alert.resolves:
            row = self.ledger.get(alert.resolves)
            if row is not None and row.ts:
                self.client.chat_update(
                    channel=row.channel or self.channel,
                    ts=row.ts,
                    text=alert.title,
                    blocks=[section(f":large_green_circle: *Resolved:* {alert.title}")],
                )
                self.ledger.resolve(alert.resolves, now=now)
                return row.ts
        response = self.client.chat_postMessage(channel=self.channel, text=alert.title, blocks=blocks)
        return str(response.get("ts") or "") or None

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
        blocks = [section(summary), context(f"updated {utc(now)} · transitions in the thread")]
        if ts is None:
            response = self.client.chat_postMessage(channel=self.channel, text=summary, blocks=blocks)
            channel, ts = self.channel, str(response.get("ts"))
        else:
            self.client.chat_update(channel=channel or self.channel, ts=ts, text=summary, blocks=blocks)
        threads[alert.resource] = (channel, ts)
        self.ledger.observe(
            alert.resource,
            alerts_mod.observe(qr) if qr else alerts_mod.Observation(alert.state),
            now=now,
            channel=channel,
            ts=ts,
        )
        reply = self.client.chat_postMessage(
            channel=channel or self.channel, thread_ts=ts, text=alert.title, blocks=[section(alert.title)]
        )
        return str(reply.get("ts") or "") or None

    # ---- vLLM
    def _tick_vllm(self, now: datetime, result: TickResult) -> None:
        try:
            client, endpoint = self.services.vllm()
        except OpsError:
            return  # no endpoint (nothing ACTIVE): not an outage
        with client:
            health = client.health()
            check = VllmCheck(ok=health.state == "ready", detail=health.detail)
            if check.ok:
                try:
                    summary = client.metrics()
                    check = VllmCheck(True, "", summary.kv_cache_usage, summary.preemptions)
                except OpsError:
                    pass
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
        for alert in found:
            if not self.ledger.claim(alert, "sending", now=now):
                result.duplicate += 1
                continue
            self._send(alert, partial(self._post, alert, None, now), result)

    def _send(self, alert: Alert, post: Callable[[], str | None], result: TickResult) -> None:
        """Post a claimed alert and record it as sent; on failure release the claim (next tick retries)."""
        try:
            ts = post()
        except Exception as exc:
            log.warning("could not post alert %s: %s", alert.key, type(exc).__name__)
            self.ledger.release(alert.key)
            result.failed += 1
            return
        self.ledger.mark_sent(alert.key, self.channel, ts)
        result.sent += 1
        if self.on_sent is not None:
            self.on_sent(alert.kind)

    # ---- digest and test
    def digest(self) -> str | None:
        """Post the daily digest (once per UTC day): running resources, cost in the last 24 h (USD), alerts
        raised in the last 24 h and open. Returns the message ts, or None if already posted today."""
        now = self.clock()
        day = now.strftime("%Y-%m-%d")
        key = f"digest@{day}|digest|"
        marker = Alert(key, "digest", "digest", "", "", f"Daily digest {day}")
        if not self.ledger.claim(marker, "sending", now=now):
            return None
        try:
            text = self.digest_text(now)
            response = self.client.chat_postMessage(channel=self.channel, text=text, blocks=[section(text)])
        except Exception:
            self.ledger.release(key)
            raise
        ts = str(response.get("ts") or "") or None
        self.ledger.mark_sent(key, self.channel, ts)
        return ts

    def digest_text(self, now: datetime) -> str:
        """The digest's text (mrkdwn)."""
        since = now - timedelta(hours=24)
        listing = self.services.tpu.list_queued_resources(self.services.settings.tpu_zones)
        running = [qr for qr in listing.resources if qr.state == "ACTIVE"]
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
            f":newspaper: *Daily digest* {utc(now)}",
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
        text = f":test_tube: Test alert requested by <@{user_id}> at {utc(now)}: the alert channel works."
        response = self.client.chat_postMessage(channel=self.channel, text=text, blocks=[section(text)])
        return str(response.get("ts") or "") or None

    def open_summary(self, now: datetime) -> list[str]:
        """One line per open alert of the last 7 days (for `/alerts list`)."""
        return [
            f"• {r.text} _({human_duration(now - r.at)} ago, `{r.kind}`)_"
            for r in self.ledger.open_alerts(since=now - timedelta(days=7))
        ]
