"""Reconciliation of creates whose command ended or whose bot died (see `ops.tpu.ownership.reconcile`): at
start, then every RECONCILE_INTERVAL_S, so a create answered ambiguously (its resource appearing after the
command ended) is settled while the bot runs, not only at the next restart, and the requests of a previous
process are settled at the first run after its operation leases expired.

Each run happens on one replica only: the one holding the `reconcile` lease in the state store (TTL three
intervals, so another replica takes over when the holder dies). What a run settles is audited, the
commands' last messages are edited to say it (`bot.oncall.followup`), and a settled request whose command left
no
such message is announced in its channel (else the alert channel).
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid
from collections.abc import Callable
from datetime import UTC, datetime

from bot.commands.runner import Origin, Runner
from bot.oncall.followup import refresh
from bot.services import Services
from bot.slack.render import Reply, mention, section
from ops.store.followups import Followups
from ops.store.state import AuditEntry
from ops.tpu.ownership import Reconciled, reconcile

log = logging.getLogger(__name__)

LEASE = "reconcile"

_ICONS = {"deleted": ":wastebasket:", "adopted": ":inbox_tray:", "not ours": ":shield:"}


def _deployments(runner: Runner) -> list[Services]:
    """One Services per Google project (its in-flight records are read with that project's TPU API)."""
    by_project: dict[str, Services] = {}
    for services in runner.fleet.services.values():
        by_project.setdefault(services.tpu.project, services)
    return list(by_project.values())


def reconcile_now(runner: Runner) -> list[Reconciled]:
    """Reconcile every project once; audit and announce what was settled, and correct the messages of
    the commands whose outcome was still open.

    Returns:
        What reconciliation found, settled or not (records left open are looked at again next run).
    """
    done: list[Reconciled] = []
    for services in _deployments(runner):
        settings = services.settings
        found = reconcile(
            services.tpu,
            services.store,
            now=services.now,
            watch_s=settings.ambiguous_create_watch_s,
            poll_s=settings.capacity_poll_s,
        )
        followups = Followups(services.store)
        watched = set(followups.operations())
        for item in found:
            if item.final:
                _report(runner, services, item, announce=item.request.operation_id not in watched)
            elif item.action == "not verified":
                log.warning("reconcile: %s", item.detail)
        refresh(services.store, runner.slack, services.now())
        done += found
    return done


def _report(runner: Runner, services: Services, item: Reconciled, *, announce: bool) -> None:
    request = item.request
    what = f"{request.kind} {request.name} ({request.zone}, request {request.request_id})"
    services.store.record(
        AuditEntry(
            at=services.now(),
            user_id=request.user_id or "bot",
            channel_id=request.channel_id,
            action="reconcile",
            command=what,
            outcome=f"{item.action}: {item.detail}"[:200],
        )
    )
    log.info("reconcile %s: %s: %s", what, item.action, item.detail)
    channel = request.channel_id or services.settings.alert_channel
    if announce and channel and item.action in _ICONS:
        text = (
            f"{_ICONS[item.action]} `/tpu {request.kind}` by {mention(request.user_id)}: {item.detail} "
            f"(request `{request.request_id}`)."
        )
        runner.deliver(Reply(text=text, blocks=[section(text)]), Origin(request.user_id, channel))


class Reconciler(threading.Timer):
    """The reconciliation timer (a `threading.Timer` that repeats until `cancel()`): runs now, then every
    `interval_s` seconds, each time on the worker pool and only while this replica holds the `reconcile`
    lease.

    Args:
        runner: the bot's runner (its worker pool, deployments and Slack gateway).
        interval_s: the period, seconds.
    """

    def __init__(self, runner: Runner, *, interval_s: float) -> None:
        super().__init__(interval_s, lambda: None)
        self.daemon = True
        self.runner = runner
        self.holder = f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
        self.name = "reconcile"
        self._running = threading.Lock()  # a run slower than the interval is not joined by the next

    def run(self) -> None:
        self.submit()
        while not self.finished.wait(self.interval):
            self.submit()

    def cancel(self) -> None:
        """Stop the timer (a run already on the worker pool finishes) and give up the lease."""
        super().cancel()
        try:
            self.runner.services.store.release_lease(LEASE, self.holder)
        except Exception:  # the lease expires by itself
            log.exception("could not release the reconcile lease")

    def submit(self) -> None:
        """One run on the worker pool, if this replica holds (or takes) the lease."""
        try:
            self.runner.background(self._leased(lambda: reconcile_now(self.runner)))
        except RuntimeError:  # the bot stopped meanwhile: the next start reconciles
            log.info("reconciliation skipped: the bot is stopping")

    def _leased(self, job: Callable[[], object]) -> Callable[[], None]:
        def run() -> None:
            services = self.runner.services
            ttl_s = max(3 * self.interval, 5.0)
            try:
                held = services.store.acquire_lease(LEASE, self.holder, ttl_s, datetime.now(UTC))
            except Exception:
                log.exception("cannot read the reconcile lease")
                return
            if held and self._running.acquire(blocking=False):
                try:
                    job()
                finally:
                    self._running.release()

        return run


def start(runner: Runner) -> threading.Timer:
    """Start reconciling (see `Reconciler`); `cancel()` the timer returned to stop."""
    timer = Reconciler(runner, interval_s=runner.services.settings.reconcile_interval_s)
    timer.start()
    return timer
