"""The no-match view of raw container or journal lines: the lines become log entries, Drain groups them into
templates (`llm.logsum.summarize`), and `ops.diagnosis.nomatch.from_templates` picks the top error templates
and the first error. Pure logic, no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from llm.logsum import summarize
from ops.diagnosis.nomatch import Unmatched, from_templates, line_severity
from ops.gcp.cloudlogs import LogEntry

__all__ = ["from_lines"]


def from_lines(
    lines: Iterable[tuple[datetime | None, str]],
    *,
    source: str,
    ended_at: datetime | None = None,
    now: datetime | None = None,
    unit: str = "",
) -> Unmatched | None:
    """The unmatched view of container or journal lines (`ops.vllm.container.timed_lines`), or None when none
    is an error.

    Each line becomes a log entry with the severity its logger gave it (`line_severity`) and its time; a
    line without one takes the time of the line before. When no line has a time, the lines are ordered by
    position only and no time is shown (`Unmatched.timed` False).

    Args: as for `from_templates`; `lines`: (time or None, text) in log order; `now`: when they were read
    (aware UTC), so that `span` runs from the earliest line to it (None: no span).
    """
    pairs = [(when, text) for when, text in lines if text.strip()]
    timed = any(when is not None for when, _ in pairs)
    base = next((when for when, _ in pairs if when is not None), datetime(1970, 1, 1, tzinfo=UTC))
    entries: list[LogEntry] = []
    last = base
    for position, (when, text) in enumerate(pairs):
        # untimed: one microsecond per line keeps the log order for "first" (times are not shown)
        at = (when or last) if timed else base + timedelta(microseconds=position)
        last = at
        entries.append(LogEntry(timestamp=at, severity=line_severity(text), message=text))
    summary = summarize(entries)
    span = now - summary.first_seen if timed and now is not None and summary.first_seen else None
    return from_templates(
        summary.templates, source=source, ended_at=ended_at, span=span, timed=timed, unit=unit
    )
