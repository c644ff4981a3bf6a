"""The on-call checks of a deployment, run on each alert tick, each a small class with one job: planned
work (`PlannedWork`: maintenance windows hold health alerts until vLLM serves), the serving checks
(`ServingChecks`: vLLM health, KV cache, SLO rules, idle alerts and the proposed idle stop), and automatic
recovery of a dead primary (`AutoRecovery`, run through the command runner like any command). Every alert
they raise leaves through the one claim -> send path, `bot.oncall.delivery.AlertDelivery.deliver`.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta
from urllib.parse import urlsplit, urlunsplit

from bot.commands.context import Context
from bot.commands.runner import Origin, Runner
from bot.oncall.delivery import AlertDelivery, OncallOptions, TickResult
from bot.services import Services, identify
from bot.shared.diagnosis import container_diagnosis, deployment_of
from bot.shared.recovery import projected_usd, recover
from bot.slack.render import plural, utc
from bot.views.alerts import idle_cost, span
from bot.views.findings import diagnosis_text
from ops.alerts import ledger as alerts_mod
from ops.alerts.ledger import Alert, AlertLedger, qr_alert, subject_alert
from ops.alerts.planned import MaintenanceWindows, Window
from ops.cost.idle import IdleWatch
from ops.errors import BackendTimeout, OpsError
from ops.times import rfc3339
from ops.tpu.model import QueuedResourceInfo, primary_among
from ops.tpu.ownership import MANAGED_BY, MANAGED_BY_KEY, created_by_bot
from ops.tpu.recovery import RecoveryBudget, dead_reason
from ops.vllm.metrics import summarize
from ops.vllm.slo import SloWatch, Snapshot, evaluate_slo
from ops.vllm.watch import VllmCheck, VllmWatch, evaluate_vllm

log = logging.getLogger(__name__)

AUTO_RECOVER_USER = "auto-recover"  # the audit trail's user id of automatic recoveries
STARTUP_LOG_TAIL = 400  # lines of the container's log a stuck start-up is diagnosed from, as /vllm status


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


def _probe_timed_out(services: Services) -> bool | None:
    """Whether a one-token chat completion timed out (None: it failed otherwise, so it says nothing)."""
    try:
        services.probe()
    except BackendTimeout:
        return True
    except OpsError:
        return None
    return False


class PlannedWork:
    """One job: the deployment's maintenance window (`ops.alerts.planned`), opened by a command's planned
    work.

    Args:
        services: the deployment's backends (`vllm()`, `vllm_at`, `endpoints`, `container()` are used).
        delivery: the deployment's AlertDelivery.
        windows: the maintenance windows of the state store.
    """

    def __init__(self, services: Services, delivery: AlertDelivery, windows: MaintenanceWindows) -> None:
        self.services = services
        self.delivery = delivery
        self.windows = windows
        self.deployment = delivery.deployment

    def tick(self, now: datetime, result: TickResult) -> bool:
        """While planned work is under way, hold the deployment's health alerts; once the work has finished
        and vLLM serves (or the window's deadline passes) close the window and say so in the command's
        thread. Serving is judged only after the work finished (`Window.work_done_at`): before that an
        answering server is the old one, and a failing step must not be announced as serving.

        Returns:
            True while the window stays open (the vLLM health, SLO and idle checks are skipped).
        """
        window = self.windows.current(self.deployment)
        if window is None:
            return False
        if window.work_done_at is not None and self._serving(window.target):
            if self.windows.close("serving", now=now, deployment=self.deployment):
                took = span(now - window.opened_at)
                title = f"vLLM serving after {took} ({window.reason})"
                self._report_window(window, "serving", title, "", now, result)
            return False
        if now < window.deadline:
            return True
        if self.windows.close("stuck", now=now, deployment=self.deployment):
            took = span(now - window.opened_at)
            if window.work_done_at is None:
                title = f"the planned work did not finish in {took} ({window.reason}): check the command"
                self._report_window(window, "stuck", title, "", now, result)
            else:
                title = f"vLLM still not serving after {took}: start-up looks stuck ({window.reason})"
                self._report_window(window, "stuck", title, self._startup_diagnosis(), now, result)
        return False

    def _report_window(
        self, window: Window, kind: str, title: str, text: str, now: datetime, result: TickResult
    ) -> None:
        key = f"maintenance:{window.deployment}@{rfc3339(window.opened_at)}|{kind}|"
        alert = subject_alert(key, kind, f"maintenance:{window.deployment}", title, text)
        thread = (window.channel, window.thread_ts) if window.channel else None
        self.delivery.deliver(alert, None, now, result, {}, thread)

    def _serving(self, target: str | None = None) -> bool:
        """Whether vLLM answers /health with 200: on the node of the queued resource `target` when given,
        else on the deployment's endpoint (no endpoint yet: not serving)."""
        try:
            if target is None:
                client, _ = self.services.vllm()
            else:
                endpoint = self.services.endpoints.of(target)
                if endpoint is None:
                    return False
                client = self.services.vllm_at(endpoint)
        except OpsError:
            return False
        with client:
            return bool(client.health().state == "ready")

    def _startup_diagnosis(self) -> str:
        """What the TPU VM says about a start-up that does not finish: the container's state, then its log
        diagnosed as `/vllm status` diagnoses it (`bot.shared.diagnosis.container_diagnosis`; a running
        container
        also counts as a stuck start-up); a failing SSH or docker gives one line saying so."""
        try:
            container, host = self.services.container()
            with host:
                status = container.status()
                timed = container.logs(tail=STARTUP_LOG_TAIL, timestamps=True) if status.exists else ""
            stuck = "start-up stuck: the container runs but vLLM does not answer" if status.running else ""
            ended = status.finished_at if status.exists and not status.running else None
            result = container_diagnosis(
                timed, deployment_of(self.services), ended_at=ended, now=self.services.now(), extra=stuck
            )
        except OpsError as exc:
            return f"Diagnosis unavailable: {exc.message}" + (f" ({exc.hint})" if exc.hint else "")
        except Exception as exc:  # diagnosis is best effort: the stuck notice must still go out
            log.warning("start-up diagnosis failed: %s", type(exc).__name__)
            return f"Diagnosis unavailable: {type(exc).__name__}"
        state = f"Container `{container.name}`: {status.state}, {plural(status.restart_count, 'restart')}"
        body = diagnosis_text(result, heading="Diagnosis") or (
            f"No known failure and no error line in the last {STARTUP_LOG_TAIL} log lines; see `/vllm logs`."
        )
        return f"{state}\n{body}"


class ServingChecks:
    """One job: what the deployment's vLLM endpoint says on each tick: /health (down after
    `health_failures` failures in a row), the KV cache (above `kv_threshold` for `kv_checks` checks), the
    serving SLO rules, idle alerts and the proposed idle stop.

    Args:
        services: the deployment's backends (`vllm()`, `gemma()`, `tpu` are used).
        delivery: the deployment's AlertDelivery.
        options: the deployment's OncallOptions (SLO rules, idle settings, primary).
        health_failures: failed /health checks in a row before "vLLM down" (default 3).
        kv_threshold: KV-cache usage fraction 0..1 (default 0.9); kv_checks: checks in a row (default 3).
    """

    def __init__(
        self,
        services: Services,
        delivery: AlertDelivery,
        options: OncallOptions,
        *,
        health_failures: int = 3,
        kv_threshold: float = 0.9,
        kv_checks: int = 3,
    ) -> None:
        self.services = services
        self.delivery = delivery
        self.ledger: AlertLedger = delivery.ledger
        self.options = options
        self.health_failures = health_failures
        self.kv_threshold = kv_threshold
        self.kv_checks = kv_checks

    def tick(self, now: datetime, result: TickResult) -> None:
        """Check the endpoint once and deliver what is due (no endpoint, nothing ACTIVE: nothing is due).

        Raises:
            OpsError, ValueError: a backend failed in a way the scheduler's tick logs and counts.
        """
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
            self.delivery.deliver(alert, None, now, result, mutes)
        self._tick_idle(snapshot, now, result, mutes)

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
            due.append((f"{watch.since}#{periods}", f"served no request for {span(idle)}"))
        moment = opts.idle_stop_at.latest(now) if opts.idle_stop_at is not None else None
        if moment is not None and now - moment <= timedelta(minutes=15):
            due.append((f"stop@{rfc3339(moment)}", f"is still running at its scheduled stop ({utc(moment)})"))
        if not due:
            return
        qr = self._primary()
        if qr is None or qr.state != "ACTIVE":
            return
        for suffix, what in due:
            alert = qr_alert(qr, "idle", suffix, f"`{qr.name}` ({qr.zone}) {what}", idle_cost(qr, idle, now))
            self.delivery.deliver(alert, qr, now, result, mutes)

    def _primary(self) -> QueuedResourceInfo | None:
        """The primary by zone and name (`primary_among` the zones' listing), not the first zone's resource of
        its name: that may be a second one, idle or not, while the primary serves. None when the zones that
        answered hold none (`list_queued_resources` reports a failing zone instead of raising)."""
        zones = self.services.settings.tpu_zones
        listing = self.services.tpu.list_queued_resources(zones)
        return primary_among(listing.resources, self.options.primary, zones)


class AutoRecovery:
    """One job: recover a dead primary without a click (AUTO_RECOVER): only one the bot created, within the
    day's caps (`ops.tpu.recovery.RecoveryBudget`); announced in the thread of its state message, and run
    through
    the command runner (`bot.commands.runner.Runner.run_unattended`), so it is audited and redacted like any
    command.

    Args:
        runner: the bot's command runner.
        delivery: the deployment's AlertDelivery (its notices leave through `deliver`).
        budget: the deployment's recovery budget.
        options: the deployment's OncallOptions (`primary`, `auto_recover`).
    """

    def __init__(
        self, runner: Runner, delivery: AlertDelivery, budget: RecoveryBudget, options: OncallOptions
    ) -> None:
        self.runner = runner
        self.delivery = delivery
        self.ledger = delivery.ledger
        self.budget = budget
        self.options = options

    def tick(
        self,
        found: Sequence[Alert],
        by_identity: dict[str, QueuedResourceInfo],
        now: datetime,
        result: TickResult,
    ) -> None:
        """Recover the primary when one of this tick's alerts (`found`, their resources in `by_identity`)
        says it died (a state or preemption alert, `ops.tpu.recovery.dead_reason`). Never raises for a failed
        recovery: its outcome is posted and audited."""
        if not self.options.auto_recover:
            return
        # The primary by zone and name: a dead resource that only shares its name is not recovered as it.
        zones = self.delivery.services.settings.tpu_zones
        primary = primary_among(by_identity.values(), self.options.primary, zones)
        for ident in dict.fromkeys(a.resource for a in found if a.kind in ("state", "preempted")):
            qr = by_identity.get(ident)
            if qr is not None and qr is primary and dead_reason(qr):
                self._recover(qr, now, result)

    def _recover(self, qr: QueuedResourceInfo, now: datetime, result: TickResult) -> None:
        ident = alerts_mod.identity(qr)
        key = f"{ident}|recovery|auto"
        channel, ts = self.ledger.thread(ident)
        thread = (channel, ts) if channel and ts else None
        reason = dead_reason(qr) or qr.state
        command = f"tpu recover {qr.name} --zone {qr.zone}"
        origin = Origin(AUTO_RECOVER_USER, channel or self.delivery.channel)
        refusal: str | None = None
        usd = 0.0
        if not created_by_bot(qr):
            refusal = f"`{qr.name}` was not created by the bot (no `{MANAGED_BY_KEY}: {MANAGED_BY}` label)"
        else:
            try:
                usd, _ = projected_usd(qr)
                refusal = self.budget.refusal(usd, now)
            except OpsError as exc:
                refusal = f"no price to check the spend cap against: {exc.message}"
        if refusal is not None:
            note = qr_alert(qr, "recovery", "auto", f"Automatic recovery skipped: {refusal}. Use Recover.")
            if self.ledger.get(key) is None:
                self.runner.refuse_unattended(command, origin, refusal)
            self.delivery.deliver(note, None, now, result, {}, thread)
            return
        title = f":ambulance: Recovering `{qr.name}` automatically ({reason}): delete it and create it again"
        attempt = len(self.budget.today(now)) + 1
        text = f"Projected spend ${usd:,.2f}; automatic recovery {attempt} of {self.budget.max_per_day} today"
        announce = qr_alert(qr, "recovery", "auto", title, text)
        if self.delivery.deliver(announce, None, now, result, {}, thread) == "duplicate":
            return

        def job(ctx: Context) -> str:
            # The recovery's maintenance window is this deployment's, so it holds this deployment's alerts.
            return recover(ctx, qr, search=False, thread=thread)

        outcome = self.runner.run_unattended(
            command,
            job,
            origin,
            services=self.delivery.services,
            deployment=self.delivery.deployment,
            why=f"started: {reason}",
        )
        self.budget.record(ident, usd, outcome, now=now)
        done = qr_alert(qr, "recovery", "auto|done", f"Automatic recovery of `{qr.name}`: {outcome}")
        self.delivery.deliver(done, None, now, result, {}, thread)
