"""The engine's one entry, `diagnose(signals, deployment)`: every signal (log lines of any container or
system source, a create error, a queued resource's state, a /metrics sample, a completion, a Slack or SSH
refusal: `ops.diagnosis.signals`) matched at once against the fault catalogue (`ops.diagnosis.families`,
the built-in `ops/diagnosis/faults.yaml` plus a team's `FAULT_CATALOGUE_FILE`), ranked by its one ranker
(`rank`), each finding's fix filled for the live deployment and its evidence kept with its source and time;
with the few lines that carry the cause (root exception, caused-by chain, first error of the burst), shown
whether or not a family matched. The expected conclusion of every real case is in sim/cases/README.md and
tests/fixtures/cases/README.md, and scored by bench/diagnose.py.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from ops.diagnosis.families import (
    SEVERITIES,
    Catalogue,
    Deployment,
    Family,
    Match,
    catalogue,
    figures,
    fill,
    key_lines,
    shorten,
)
from ops.diagnosis.signals import Signal, TimedLine, as_signals
from ops.linear import linear

if (
    TYPE_CHECKING
):  # ops.diagnosis.nomatch reads ops.gcp.cloudlogs, which reads ops.gcp.google, which asks this module
    from ops.diagnosis.nomatch import Unmatched

__all__ = ["CONFIDENCES", "SEVERITIES", "Diagnosis", "Finding", "diagnose", "rank"]

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
        fix: what to do, written for the deployment when one was given.
        severity: one of SEVERITIES.
        evidence: the first line that matched (stripped, at most 400 characters).
        count: how many lines matched this family with the same figures.
        values: figures extracted from the text, e.g. {"estimated_max_model_len": "5632"}.
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
    deployment: Deployment | None = None,
    *,
    faults: Catalogue | None = None,
) -> Diagnosis:
    """Diagnose signals: the engine's one entry, for every surface.

    Args:
        signals: one signal, several (`ops.diagnosis.signals`), or a plain text (one signal of source
            "text"); lines are matched one by one, all signals together (a family may suppress another
            found in any of them).
        deployment: the live deployment the fixes are written for; None: generic fixes.
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
        _finding(m, deployment, lines, timed, keys) for m in rank((faults or catalogue()).match(text))
    )
    return Diagnosis(findings, keys)


def _finding(
    match: Match,
    deployment: Deployment | None,
    lines: list[str],
    timed: list[tuple[str, TimedLine]],
    keys: tuple[str, ...],
) -> Finding:
    family = match.family
    source, (at, _) = timed[match.first] if match.first < len(timed) else ("text", (None, ""))
    values = figures(match.values, deployment)
    related = _engine_core_context(lines, match.last, family) if family.context == "engine-core" else ()
    return Finding(
        name=family.name,
        conclusion=fill(family.conclusion, values),
        fix=fill(family.fix_for(deployment.state if deployment else None), values),
        severity=family.severity,
        evidence=match.evidence,
        count=match.count,
        values=dict(match.values),
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
