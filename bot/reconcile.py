"""Start-up reconciliation: settle the creates of requests whose bot died (see `ops.ownership.reconcile`),
with an audit entry and a channel message for each resource deleted, adopted or left alone.

It runs once at start and once more after the operation lease TTL, when the leases of the previous process
(it stopped renewing them) have surely expired.
"""

from __future__ import annotations

import logging
import threading

from bot.render import Reply, mention, section
from bot.runner import Origin, Runner
from ops.ownership import Reconciled, reconcile
from ops.store import AuditEntry

log = logging.getLogger(__name__)

_ICONS = {"deleted": ":wastebasket:", "adopted": ":inbox_tray:", "not ours": ":shield:"}


def reconcile_now(runner: Runner) -> list[Reconciled]:
    """Reconcile once; audit and announce what was done (in the request's channel, else the alert channel).

    Returns:
        What reconciliation did (records still unreadable are retried at the next run).
    """
    services = runner.services
    done = reconcile(services.tpu, services.store, now=services.now, poll_s=services.settings.capacity_poll_s)
    for item in done:
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
        if channel and item.action in _ICONS:
            text = (
                f"{_ICONS[item.action]} After a restart: `{request.name}` in `{request.zone}` "
                f"(`/tpu {request.kind}` by {mention(request.user_id)}) was *{item.action}*: {item.detail}."
            )
            runner.deliver(Reply(text=text, blocks=[section(text)]), Origin(request.user_id, channel))
    return done


def start(runner: Runner) -> threading.Timer:
    """Reconcile now on the worker pool, and again once the previous process's leases have expired."""

    def submit() -> None:
        try:
            runner.background(lambda: reconcile_now(runner))
        except RuntimeError:  # the bot stopped meanwhile: the next start reconciles
            log.info("reconciliation skipped: the bot is stopping")

    submit()
    later = threading.Timer(runner.services.settings.operation_lease_ttl_s + 1, submit)
    later.daemon = True
    later.start()
    return later
