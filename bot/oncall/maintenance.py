"""Planned work opens a maintenance window (see `ops.alerts.planned`): commands that (re)start vLLM wrap their
work in `planned_work`, so the alert scheduler holds health alerts until vLLM serves and then answers in
the command's thread.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import timedelta

from bot.commands.context import Context
from bot.slack.render import blocks_reply, section
from ops.alerts.planned import MaintenanceWindows


@contextmanager
def planned_work(
    ctx: Context, reason: str, thread: tuple[str, str | None] | None = None, *, target: str | None = None
) -> Iterator[None]:
    """Open the maintenance window of the command's deployment (`ctx.deployment`) for the `with` body.

    The window's thread is `thread` (channel, ts) when given (an alert's thread), else the command's own
    progress message, posted here so that its ts is known (the final reply then replaces it). If the body
    raises, the window is closed at once ("failed") so a failed command never hides an outage; when it
    returns, the window's work is marked done, and only then may the scheduler say "serving after".

    Args:
        ctx: the command's context; reason: what is planned, e.g. "vllm restart".
        thread: where "serving after N min" goes, or None for the command's message.
        target: the queued resource the work brings up, whose node's vLLM must answer (None: the
            deployment's endpoint, e.g. for a container restart).

    Raises:
        Whatever the body raises.
    """
    services = ctx.services
    if thread is None and ctx.progress is not None:
        ctx.progress.update(blocks_reply([section(f":hourglass_flowing_sand: `{reason}` …")]))
        thread = (ctx.channel_id, ctx.progress.ts)
    windows = MaintenanceWindows(services.store)
    timeout = timedelta(minutes=services.settings.maintenance_timeout_min)
    channel, ts = thread if thread is not None else (None, None)
    # Each deployment has its own window: a staging restart does not hold production's alerts.
    windows.open(
        reason,
        by=ctx.user_id,
        now=services.now(),
        timeout=timeout,
        channel=channel,
        thread_ts=ts,
        deployment=ctx.deployment,
        target=target,
    )
    try:
        yield
    except BaseException:
        windows.close("failed", now=services.now(), deployment=ctx.deployment)
        raise
    windows.work_done(now=services.now(), deployment=ctx.deployment)
