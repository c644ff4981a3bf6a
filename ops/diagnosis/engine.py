"""The engine's one entry, `diagnose(signals, facts)`: every signal (log lines of any container or system
source, a create error, a queued resource's state, a /metrics sample, a completion, a Slack or SSH refusal:
the `Signal` types below) matched at once against the fault catalogue (`ops.diagnosis.families`, the
built-in `ops/diagnosis/faults.yaml` plus a team's `FAULT_CATALOGUE_FILE`), ranked by its one ranker
(`rank`), each finding's fix filled with the live facts (`FixFacts`) and its evidence kept with its source
and time; with the few lines that carry the cause (root exception, caused-by chain, first error of the
burst), shown whether or not a family matched. The expected conclusion of every real case is in
sim/cases/README.md and tests/fixtures/cases/README.md, and scored by bench/diagnose.py.

The signals are typed by where they come from. Each is a sequence of lines with their source and, when
known, their time, so a finding's evidence says which signal and which moment decided it. They are pure data,
no I/O: the callers read them (docker over SSH, Cloud Logging, the TPU API, vLLM's /metrics, a completion,
Slack's or the SSH server's answer) and hand them over.

Where a log analysis's findings stand (`place`): each error template and finding is placed against the
running vLLM container (its start and restart count), the node that serves, and the served configuration
(`ServingNow`). Cloud Logging keeps every container the node ever ran: a start-up failure of an earlier
container, or of a second container fighting for the TPU, reads like the present state unless it is placed.
`place` labels, without I/O:

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

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, TypeVar

from ops.diagnosis.evidence import checked
from ops.diagnosis.families import (
    SEVERITIES,
    Catalogue,
    Family,
    FixFacts,
    Match,
    catalogue,
    figures,
    fill,
    key_lines,
    shorten,
)
from ops.linear import linear
from ops.tpu.model import QueuedResourceInfo

if (
    TYPE_CHECKING
):  # ops.diagnosis.nomatch reads ops.gcp.cloudlogs, which reads ops.gcp.google, which asks this module
    from ops.diagnosis.nomatch import Template, Unmatched

__all__ = [
    "CONFIDENCES",
    "SEVERITIES",
    "Completion",
    "CreateError",
    "Diagnosis",
    "Finding",
    "LogLines",
    "MetricsSample",
    "Placed",
    "RemoteError",
    "ResourceState",
    "ServingNow",
    "Signal",
    "TimedLine",
    "as_signals",
    "diagnose",
    "is_fatal",
    "place",
    "present",
    "rank",
    "resource_state_text",
    "template_note",
    "template_of",
]

# -- the signals ------------------------------------------------------------------------------------------

TimedLine = tuple[datetime | None, str]
"""(time or None, text) of one line: docker's `--timestamps` time, a log entry's `timestamp`."""


@dataclass(frozen=True)
class LogLines:
    """Log lines from one container or system source on the VM, in log order.

    Attributes:
        source: where they were read, e.g. "container" (the vLLM container's `docker logs`),
            "cloud-logging", "journal" (a systemd unit: docker, the startup script), "system" (the VM's
            host events), or "text" for a text of unknown origin.
        lines: (time or None, text) each.
    """

    source: str
    lines: tuple[TimedLine, ...]

    @classmethod
    def of_text(cls, text: str, source: str = "text", at: datetime | None = None) -> LogLines:
        """Lines of a plain text, each with the time `at` (None: unknown)."""
        return cls(source, tuple((at, line) for line in text.splitlines()))

    def timed_lines(self) -> Sequence[TimedLine]:
        """The lines, as given."""
        return self.lines


@dataclass(frozen=True)
class _Text:
    text: str
    at: datetime | None = None

    def timed_lines(self) -> Sequence[TimedLine]:
        """The text's lines, each with the signal's time."""
        return [(self.at, line) for line in self.text.splitlines()]


@dataclass(frozen=True)
class CreateError(_Text):
    """A create (or delete, reset, start) refused by the TPU API: its status and message as one text, e.g.
    "HTTP 429: Quota 'TPUV6EPreemptiblePodPerProjectPerZoneForTPUAPI' exceeded. Limit: 0.0 ..."."""

    source = "tpu-api"


@dataclass(frozen=True)
class MetricsSample(_Text):
    """A sample of vLLM's Prometheus `/metrics` text (https://docs.vllm.ai/en/latest/usage/metrics.html)."""

    source = "metrics"


@dataclass(frozen=True)
class Completion(_Text):
    """The text of a chat completion the served model returned (e.g. tool-call markup left unparsed)."""

    source = "completion"


@dataclass(frozen=True)
class RemoteError:
    """A refusal from Slack (its Web API answer as text, e.g. "... 'error': 'channel_not_found' ...") or
    from SSH (the client's or the remote command's error text).

    Attributes:
        service: "slack" or "ssh" (the evidence's source).
        text: the refusal.
        at: when it was returned, None when unknown.
    """

    service: str
    text: str
    at: datetime | None = None

    @property
    def source(self) -> str:
        """The service, as the evidence's source."""
        return self.service

    def timed_lines(self) -> Sequence[TimedLine]:
        """The refusal's lines, each with its time."""
        return [(self.at, line) for line in self.text.splitlines()]


@dataclass(frozen=True)
class ResourceState:
    """A queued resource's state as the TPU API returns it: its state, a FAILED one's error, each node
    and its state, and the node ids of its spec (one missing under an ACTIVE resource is gone).

    Attributes:
        name, state: the queued resource and its `QueuedResourceState` name.
        error: a FAILED one's `failedData.error.message` ("" for none).
        nodes: (node id, node state) of each node that exists.
        node_ids: the node ids of its spec.
        at: when the state was read, None when unknown.
    """

    name: str
    state: str
    error: str = ""
    nodes: tuple[tuple[str, str], ...] = ()
    node_ids: tuple[str, ...] = ()
    at: datetime | None = None

    source = "tpu-api"

    @classmethod
    def of(cls, qr: QueuedResourceInfo, at: datetime | None = None) -> ResourceState:
        """The signal of one listed queued resource (`ops.tpu.model.QueuedResourceInfo`)."""
        return cls(
            qr.name,
            qr.state,
            qr.error or "",
            tuple((node.name, node.state) for node in qr.nodes),
            tuple(qr.node_ids),
            at,
        )

    def timed_lines(self) -> Sequence[TimedLine]:
        """The state as the catalogue's families read it (`resource_state_text`), each line timed `at`."""
        return [(self.at, line) for line in resource_state_text(self).splitlines()]


def resource_state_text(state: ResourceState) -> str:
    """What the catalogue reads about a queued resource: "queued resource NAME state: STATE", a FAILED
    one's error, "node ID STATE" for each node, and "node ID is gone" for a node of the spec that no longer
    exists while the resource is ACTIVE."""
    lines = [f"queued resource {state.name} state: {state.state}"]
    if state.error:
        lines.append(state.error)
    existing = {name for name, _ in state.nodes}
    lines += [f"node {name} {node_state}" for name, node_state in state.nodes]
    if state.state == "ACTIVE":
        lines += [f"node {node_id} is gone" for node_id in state.node_ids if node_id not in existing]
    return "\n".join(lines)


Signal = LogLines | CreateError | MetricsSample | Completion | RemoteError | ResourceState
"""Any input of the engine."""


def as_signals(signals: str | Signal | Iterable[Signal]) -> list[Signal]:
    """A list of signals from one signal, several, or a plain text (one `LogLines` of source "text")."""
    if isinstance(signals, str):
        return [LogLines.of_text(signals)]
    if isinstance(signals, LogLines | CreateError | MetricsSample | Completion | RemoteError | ResourceState):
        return [signals]
    return list(signals)


# -- the findings -----------------------------------------------------------------------------------------

CONFIDENCES = ("high", "medium")
"""A finding's confidence: "high" when its deciding line is one of the lines that carry the cause (an
exception or error line, `key_lines`), "medium" when the family matched another line (a warning, a state)."""

# The engine's processes: "(EngineCore_DP0 pid=281)", its workers "(VllmWorker rank=0 pid=412)", "(Worker_TP1
# pid=9)" (vLLM's multiproc executor names them so in its log prefix).
_ENGINE_CORE = linear(r"\((?:EngineCore|VllmWorker|Worker)[^)]*\)")
_EXCEPTION = linear(r"\b[A-Z]\w*(?:Error|Exception)\b:")


@dataclass(frozen=True)
class Finding:
    """One diagnosed problem.

    Attributes:
        name: the catalogue family, e.g. "kv-cache-insufficient".
        conclusion: what is wrong, one sentence with the figures extracted from the text.
        fix: what to do, written with the live facts when they were given.
        severity: one of SEVERITIES.
        evidence: the first line that matched (stripped, at most 400 characters).
        count: how many lines matched this family with the same figures.
        values: figures extracted from the text, e.g. {"estimated_max_model_len": "5632"}; a value that
            names a thing (a repository, an image, a zone, ...) only when valid for its kind
            (`ops.diagnosis.evidence`).
        related: for a start-up failure, the last EngineCore lines before it (the root cause).
        title: the family's title.
        runbook: the team's runbook text for the family ("" for none).
        origin: "built-in" or the team file the family came from.
        source: the signal the evidence came from ("container", "cloud-logging", "tpu-api", "slack", ...).
        at: the evidence line's time (aware UTC), None when the signal carried none.
        confidence: one of CONFIDENCES.
    """

    name: str
    conclusion: str
    fix: str
    severity: str
    evidence: str
    count: int = 1
    values: dict[str, str] = field(default_factory=dict)
    related: tuple[str, ...] = ()
    title: str = ""
    runbook: str = ""
    origin: str = "built-in"
    source: str = "text"
    at: datetime | None = None
    confidence: str = "high"


@dataclass(frozen=True)
class Diagnosis:
    """Findings and evidence for one text.

    Attributes:
        findings: most severe first (see `diagnose`).
        key_lines: the lines that carry the cause, in text order (empty for a text without errors).
        unmatched: for a failure no family explains, its top error templates, first error and source
            (`ops.diagnosis.nomatch`); None when there are findings or it was not built.
    """

    findings: tuple[Finding, ...]
    key_lines: tuple[str, ...]
    unmatched: Unmatched | None = None

    @property
    def unknown(self) -> bool:
        """True for a failure no family explains: error lines but no finding."""
        return not self.findings and (bool(self.key_lines) or self.unmatched is not None)

    def runbooks(self) -> list[tuple[str, str]]:
        """(family, runbook text) of the findings that have a runbook, in finding order, once each."""
        seen: dict[str, str] = {}
        for f in self.findings:
            if f.runbook and f.name not in seen:
                seen[f.name] = f.runbook
        return list(seen.items())

    @property
    def top(self) -> Finding | None:
        """The first finding (what an on-call reader acts on), None when there is none."""
        return self.findings[0] if self.findings else None


def rank(matches: Iterable[Match]) -> list[Match]:
    """The one ranker: most severe first (`SEVERITIES`), then most specific, then first occurrence."""
    return sorted(
        matches, key=lambda m: (SEVERITIES.index(m.family.severity), -m.family.specificity, m.first)
    )


def diagnose(
    signals: str | Signal | Iterable[Signal],
    facts: FixFacts | None = None,
    *,
    faults: Catalogue | None = None,
) -> Diagnosis:
    """Diagnose signals: the engine's one entry, for every surface.

    Args:
        signals: one signal, several (the `Signal` types), or a plain text (one signal of source
            "text"); lines are matched one by one, all signals together (a family may suppress another
            found in any of them).
        facts: the live facts the fixes are written with (what the deployment concerned serves and where);
            None: generic fixes.
        faults: the catalogue; None: `ops.diagnosis.families.catalogue()` (built-in plus the team file).

    Returns:
        A Diagnosis: findings, one per family and distinct figures (with `count`), ranked by `rank`, each
        with its evidence's source and time and a confidence; and the key lines of the text. No findings
        when nothing is recognised (e.g. a healthy start-up log).
    """
    timed: list[tuple[str, TimedLine]] = [
        (signal.source, line) for signal in as_signals(signals) for line in signal.timed_lines()
    ]
    lines = [text for _, (_, text) in timed]
    text = "\n".join(lines)
    keys = tuple(key_lines(text))
    findings = tuple(
        _finding(m, facts, lines, timed, keys) for m in rank((faults or catalogue()).match(text))
    )
    return Diagnosis(findings, keys)


def _finding(
    match: Match,
    facts: FixFacts | None,
    lines: list[str],
    timed: list[tuple[str, TimedLine]],
    keys: tuple[str, ...],
) -> Finding:
    family = match.family
    source, (at, _) = timed[match.first] if match.first < len(timed) else ("text", (None, ""))
    facts = facts.about(match.values) if facts is not None else None  # the evidence's node's resource
    values = figures(match.values, facts)
    related = _engine_core_context(lines, match.last, family) if family.context == "engine-core" else ()
    return Finding(
        name=family.name,
        conclusion=fill(family.conclusion, values),
        fix=fill(family.fix_for(facts.state if facts else None), values),
        severity=family.severity,
        evidence=match.evidence,
        count=match.count,
        values=checked(match.values),
        related=related,
        title=family.title,
        runbook=family.runbook,
        origin=family.origin,
        source=source,
        at=at,
        confidence="high" if match.evidence in keys else "medium",
    )


def _engine_core_context(lines: list[str], index: int, family: Family, keep: int = 3) -> tuple[str, ...]:
    """The root-cause candidates for an EngineCore start-up failure: the last `keep` `(EngineCore...)` lines
    before line `index` (the last failure line), preferring exception lines (`...Error:`), then ERROR lines,
    never lines of the failure family itself."""
    earlier = [
        line
        for line in lines[:index]
        if _ENGINE_CORE.search(line) and not any(p.search(line) for p in family.patterns)
    ]
    exceptions = [line for line in earlier if _EXCEPTION.search(line)]
    errors = [line for line in earlier if "ERROR" in line]
    chosen = (exceptions or errors or earlier)[-keep:]
    return tuple(shorten(line) for line in chosen)


# -- where the findings stand against what serves now -----------------------------------------------------

AnyTemplate = TypeVar("AnyTemplate", bound="Template")
"""A template of any type that has the `Template` fields (`llm.logsum.TemplateSummary`), returned as given."""


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
    known = catalogue()
    for exemplar in t.exemplars:
        for line in exemplar.split("\\n"):
            hit = known.best(line)
            if hit is not None and hit[0].severity == "critical":
                return True
    return False


def present(templates: tuple[AnyTemplate, ...], now: ServingNow) -> tuple[AnyTemplate, ...]:
    """The templates that may describe the running container (no `template_note`), in their order."""
    return tuple(t for t in templates if not template_note(t, now, fatal=is_fatal(t)))


def template_of(finding: Finding, templates: tuple[AnyTemplate, ...]) -> AnyTemplate | None:
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
