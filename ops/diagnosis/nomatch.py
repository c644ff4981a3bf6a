"""When no family of the fault catalogue matches: which errors there were, which came first, and where the
log was read (which picks the next command to run, `bot.views.findings.next_steps`).

A failure the catalogue does not know still gets an answer that helps: the top `TOP_TEMPLATES` distinct
error templates of what was read (Drain templates: `llm.logsum.summarize`, or `llm.nomatch.from_lines` for
raw lines) with their counts and first and
last times, and the first error before the engine died: the earliest ERROR or exception line logged no
later than the moment the container exited (docker's `State.FinishedAt`), or in the whole window when it
did not exit (a server that stopped answering while its container runs). Pure logic, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Protocol

from ops.diagnosis.families import is_exception_line, is_traceback_line
from ops.gcp.cloudlogs import severity_rank
from ops.linear import linear

__all__ = ["SOURCES", "TOP_TEMPLATES", "Template", "Unmatched", "from_templates", "line_severity"]

TOP_TEMPLATES = 3
SOURCES = ("container", "cloud-logging", "journal")
"""Where a log was read: the vLLM container's `docker logs` (`/vllm status`, `/vllm logs`, the vLLM alert),
Cloud Logging (`/logs analyze`, the chat's facts), a systemd unit's journal (`/vllm syslog`)."""

# The level a line was logged at: vLLM's logger ("(EngineCore_DP0 pid=281) ERROR 04-15 07:21:09
# [core.py:708]"), uvicorn's ("ERROR:    Exception in ASGI application"), glog's first letter
# ("E0118 22:42:45.737331 ...").
_LEVEL = linear(
    r"^(?:\(\w+(?: \w+=\d+)*\)\s+)?(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)\b"
    r"|^(?P<glog>[IWEF])\d{4} \d\d:\d\d:\d\d"
)
_GLOG = {"I": "INFO", "W": "WARNING", "E": "ERROR", "F": "CRITICAL"}
# The startup script's lines in the serial console and Cloud Logging ("google_metadata_script_runner[712]:
# startup-script: ..."), https://cloud.google.com/compute/docs/instances/startup-scripts/linux#viewing-output
_STARTUP_SCRIPT = linear(r"google_metadata_script_runner|\bstartup-script\b|google-startup-scripts")


class Template(Protocol):
    """One error template of what was read, as `llm.logsum.TemplateSummary` carries it: the Drain template
    text, its entry count, most severe LogSeverity name, first and last times (aware UTC), up to two real
    messages (multi-line ones with "\\n" escaped), the nodes they came from, and whether it is the group of
    traceback lines no exception line was found for."""

    @property
    def template(self) -> str: ...
    @property
    def count(self) -> int: ...
    @property
    def severity(self) -> str: ...
    @property
    def first_seen(self) -> datetime: ...
    @property
    def last_seen(self) -> datetime: ...
    @property
    def exemplars(self) -> tuple[str, ...]: ...
    @property
    def nodes(self) -> tuple[str, ...]: ...
    @property
    def orphan(self) -> bool: ...


_ERROR_RANK = severity_rank("ERROR")


@dataclass(frozen=True)
class Unmatched:
    """What a failure no catalogue family explains looked like.

    Attributes:
        source: one of SOURCES.
        templates: the top error templates (at most TOP_TEMPLATES, distinct, most severe then most frequent
            first), each with its count and first/last time.
        first_error: the earliest ERROR or exception line no later than `ended_at` ("" when none).
        first_error_at: its time (aware UTC), None when unknown.
        ended_at: when the container exited (docker's `State.FinishedAt`), None when it did not or unknown.
        span: from the earliest line read to the moment of reading (None when unknown), so the next step
            can ask for a wider window.
        timed: whether the lines carried times (without, `templates`' times are meaningless and not shown).
        unit: for the journal: the systemd unit read ("" otherwise).
        startup_script: an error line came from the VM's startup script.
    """

    source: str
    templates: tuple[Template, ...]
    first_error: str
    first_error_at: datetime | None
    ended_at: datetime | None = None
    span: timedelta | None = None
    timed: bool = True
    unit: str = ""
    startup_script: bool = False


def line_severity(line: str) -> str:
    """The LogSeverity name of one container or journal line: its logger's level (vLLM's, uvicorn's,
    glog's letter), ERROR for an exception line or a traceback line, else INFO."""
    found = _LEVEL.match(line.strip())
    if found is not None:
        if found.group("glog"):
            return _GLOG[found.group("glog")]
        level = found.group("level")
        return {"WARN": "WARNING", "FATAL": "CRITICAL"}.get(level, level)
    if is_exception_line(line) or is_traceback_line(line):
        return "ERROR"
    return "INFO"


def from_templates(
    templates: Sequence[Template],
    *,
    source: str,
    ended_at: datetime | None = None,
    span: timedelta | None = None,
    timed: bool = True,
    unit: str = "",
) -> Unmatched | None:
    """The unmatched view of ranked templates' errors, or None when none is at ERROR or worse.

    Args:
        templates: ranked templates (`llm.logsum.LogSummary.templates`, `Analysis.templates`).
        source: one of SOURCES.
        ended_at: when the container exited (aware UTC), None when it runs or is unknown.
        span: how far back what was read goes (a log analysis's window), None when unknown.
        timed: whether the entries carried their real times.
        unit: the journal's unit for source "journal".

    Raises:
        ValueError: an unknown source.
    """
    if source not in SOURCES:
        raise ValueError(f"source {source!r} is not one of {', '.join(SOURCES)}")
    errors = [t for t in templates if not t.orphan and severity_rank(t.severity) >= _ERROR_RANK]
    if not errors:
        return None
    before = [t for t in errors if ended_at is None or not timed or t.first_seen <= ended_at]
    first = min(before, key=lambda t: t.first_seen) if before else None
    text = first.exemplars[0].split("\\n")[0] if first is not None and first.exemplars else ""
    return Unmatched(
        source=source,
        templates=tuple(errors[:TOP_TEMPLATES]),
        first_error=text,
        first_error_at=first.first_seen if first is not None and timed else None,
        ended_at=ended_at,
        span=span,
        timed=timed,
        unit=unit,
        startup_script=any(
            _STARTUP_SCRIPT.search(piece) for t in errors for piece in (t.template, *t.exemplars)
        ),
    )
