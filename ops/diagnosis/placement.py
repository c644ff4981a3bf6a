"""Whether a log analysis's errors describe the present: place each error template and finding against the
running vLLM container (its start and restart count), the node that serves, and the served configuration.

Cloud Logging keeps every container the node ever ran: a start-up failure of an earlier container, or of a
second container fighting for the TPU, reads like the present state unless it is placed. `place` labels,
without I/O:

- an error last seen before the running container started (docker's `State.StartedAt`, which a restart
  moves): "before the current container started at HH:MM";
- a fatal error (severity critical: the process cannot start or died) logged after that start while the
  container still runs: not from the running container, which would have exited on it (the restart count
  says whether it did);
- an error only from nodes other than the serving one: "from NODE, not the serving node";
- a figure of an old error that the served configuration contradicts (its `max_model_len` against the
  `max_model_len` of /v1/models): said so.

What could not be read (the container over SSH, the served model) is named in `ServingNow.missing`, and
nothing is placed against it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import TypeVar

from ops.diagnosis.engine import Finding
from ops.diagnosis.families import catalogue
from ops.diagnosis.nomatch import Template

T = TypeVar("T", bound=Template)

__all__ = ["Placed", "ServingNow", "is_fatal", "place", "present", "template_note", "template_of"]


@dataclass(frozen=True)
class ServingNow:
    """What serves now, as read at the analysis.

    Attributes:
        started_at: the running vLLM container's `State.StartedAt` (UTC), None when not running or unread.
        restart_count: docker's `RestartCount` of that container (0: never restarted since it was created).
        node: the TPU node the vLLM endpoint is on, None when unknown (e.g. a VLLM_BASE_URL setting).
        max_model_len: `max_model_len` of the served model in /v1/models, tokens; None when unread.
        missing: what could not be read, one phrase each (e.g. "the container's start: SSH refused").
        stopped_at: when the vLLM container exited (docker's `State.FinishedAt`, UTC) when it is not
            running; None when it runs or is unread.
    """

    started_at: datetime | None = None
    restart_count: int = 0
    node: str | None = None
    max_model_len: int | None = None
    missing: tuple[str, ...] = ()
    stopped_at: datetime | None = None


@dataclass(frozen=True)
class Placed:
    """Findings of a log analysis split by whether they describe the present.

    Attributes:
        current: findings that may describe the running container (conclusions noting a configuration
            figure the server contradicts).
        earlier: findings only seen before the running container started (each conclusion says when).
        other: findings from another process or node than the one serving (each conclusion says why).
    """

    current: tuple[Finding, ...]
    earlier: tuple[Finding, ...]
    other: tuple[Finding, ...]


def _hhmm(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%H:%M UTC")


def template_note(t: Template, now: ServingNow, *, fatal: bool = False) -> str:
    """Why a template does not describe the present, or "" when it may.

    Args:
        t: an error template.
        now: what serves now.
        fatal: the template carries a fatal failure (a critical finding): one logged after the running
            container started cannot come from it while it still runs.

    Returns:
        E.g. "before the current container started at 02:15 UTC", "from gemma4-b-node, not the serving node
        gemma4-qr-node", "not from the running container (up since 02:15 UTC, 0 restarts): another process
        or an earlier run".
    """
    if now.started_at is not None and t.last_seen < now.started_at:
        return f"before the current container started at {_hhmm(now.started_at)}"
    nodes = [n for n in t.nodes if n]
    if now.node and nodes and now.node not in nodes:
        return f"from {', '.join(nodes)}, not the serving node {now.node}"
    if fatal and now.started_at is not None:
        restarts = f"{now.restart_count} restart{'s' if now.restart_count != 1 else ''}"
        return (
            f"not from the running container (up since {_hhmm(now.started_at)}, {restarts}): it would have "
            "exited on this; another process or container on the node"
        )
    return ""


def is_fatal(t: Template) -> bool:
    """Whether a template's exemplars carry a critical family of the fault catalogue (the process cannot
    start or died: `ops.diagnosis.families.SEVERITIES`)."""
    faults = catalogue()
    for exemplar in t.exemplars:
        for line in exemplar.split("\\n"):
            hit = faults.best(line)
            if hit is not None and hit[0].severity == "critical":
                return True
    return False


def present(templates: tuple[T, ...], now: ServingNow) -> tuple[T, ...]:
    """The templates that may describe the running container (no `template_note`), in their order."""
    return tuple(t for t in templates if not template_note(t, now, fatal=is_fatal(t)))


def template_of(finding: Finding, templates: tuple[T, ...]) -> T | None:
    """The template whose exemplar holds the finding's evidence line (its times and nodes say when and where
    the finding was logged), or None. A long evidence line is shortened in the middle
    (`ops.diagnosis.families.shorten`):
    each of its kept pieces must be in the exemplar."""
    pieces = [piece.strip() for piece in finding.evidence.split("…") if piece.strip()]
    for t in templates:
        for exemplar in t.exemplars:
            text = exemplar.replace("\\n", "\n")
            if pieces and all(piece in text for piece in pieces):
                return t
    return None


def _configuration_note(finding: Finding, now: ServingNow) -> str:
    logged = finding.values.get("max_model_len")
    if now.max_model_len is None or not logged or not logged.isdigit() or int(logged) == now.max_model_len:
        return ""
    return (
        f"; this error is for max_model_len {logged}, but the server now serves max_model_len "
        f"{now.max_model_len} (/v1/models): another configuration"
    )


def place(findings: tuple[Finding, ...], templates: tuple[Template, ...], now: ServingNow) -> Placed:
    """Split findings by whether they describe the present (see the module docstring).

    Args:
        findings: the analysis's findings (`llm.logsum.Analysis.findings`).
        templates: the analysis's templates (their times and nodes place each finding's evidence).
        now: what serves now.

    Returns:
        Placed; a finding whose evidence template is not found stays current.
    """
    current: list[Finding] = []
    earlier: list[Finding] = []
    other: list[Finding] = []
    for finding in findings:
        finding = replace(finding, conclusion=finding.conclusion + _configuration_note(finding, now))
        t = template_of(finding, templates)
        note = template_note(t, now, fatal=finding.severity == "critical") if t is not None else ""
        if t is None or not note:
            current.append(finding)
            continue
        placed = replace(finding, conclusion=f"{finding.conclusion} (last seen {_hhmm(t.last_seen)}, {note})")
        (earlier if note.startswith("before") else other).append(placed)
    return Placed(tuple(current), tuple(earlier), tuple(other))
