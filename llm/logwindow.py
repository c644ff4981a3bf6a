"""Read a log window within the quota and mine its templates as the entries stream in, in one call that
a worker process can run (`bot.commands.workers`): the result is small (templates and a read report), the
entries are never kept."""

from __future__ import annotations

import threading
from dataclasses import replace

from llm.logsum import LogSummary, TemplateStream
from ops.gcp.cloudlogs import ReadQuota
from ops.gcp.logplan import ReadReport, read_window

__all__ = ["mine_window"]

_quotas: dict[tuple[str, int], ReadQuota] = {}
_quotas_lock = threading.Lock()


def _quota(project: str, per_minute: int) -> ReadQuota:
    """The process's ReadQuota of a project (all reads of one process share it)."""
    with _quotas_lock:
        return _quotas.setdefault((project, per_minute), ReadQuota(per_minute))


def mine_window(
    project: str,
    filter_: str,
    *,
    reads_per_minute: int = 60,
    max_reads: int = 50,
    deadline_s: float = 120.0,
    api_endpoint: str | None = None,
    quota: ReadQuota | None = None,
) -> tuple[LogSummary, ReadReport]:
    """`ops.gcp.logplan.read_window` into a `llm.logsum.TemplateStream`.

    Args:
        project, filter_, max_reads, deadline_s, api_endpoint: as for `read_window`.
        reads_per_minute: the project's read quota (picks this process's shared `ReadQuota`).
        quota: a specific ReadQuota instead (the benchmark's simulated clock).

    Returns:
        (the templates, without the miner so that it pickles; the read report).

    Raises:
        What `read_window` raises.
    """
    stream = TemplateStream()
    report = read_window(
        project,
        filter_,
        stream.add,
        quota=quota or _quota(project, reads_per_minute),
        max_reads=max_reads,
        deadline_s=deadline_s,
        api_endpoint=api_endpoint,
    )
    return replace(stream.summary(), _miner=None), report
