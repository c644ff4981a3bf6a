"""The on-call jobs of a deployment, run on each alert tick: planned work (maintenance windows hold health
alerts until vLLM serves), idle alerts and the proposed idle stop, and automatic recovery of a dead primary.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import datetime, timedelta
from functools import partial

from bot.alert_delivery import AlertDelivery, TickResult
from bot.commands import registry
from bot.context import Context
from bot.recovery import projected_usd, recover
from bot.render import utc
from bot.views.alerts import idle_cost, span
from llm.diagnose import diagnose
from ops import alerts as alerts_mod
from ops.alerts import Alert, qr_alert, subject_alert
from ops.errors import OpsError
from ops.idle import IdleWatch
from ops.maintenance import Window
from ops.ownership import MANAGED_BY, MANAGED_BY_KEY, created_by_bot
from ops.recovery import dead_reason
from ops.slo import SloWatch, Snapshot, evaluate_slo
from ops.store import AuditEntry
from ops.times import rfc3339
from ops.tpu_model import QueuedResourceInfo

log = logging.getLogger(__name__)

AUTO_RECOVER_USER = "auto-recover"  # the audit trail's user id of automatic recoveries


class OncallJobs(AlertDelivery):
    """The on-call checks of one deployment (see the module docstring); `bot.scheduler.AlertScheduler`
    calls them from its tick."""

    # ---- planned work (maintenance windows)
    def _tick_maintenance(self, now: datetime, result: TickResult) -> bool:
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
        self._deliver(alert, None, now, result, {}, thread)

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
                usd, _ = projected_usd(qr)
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
