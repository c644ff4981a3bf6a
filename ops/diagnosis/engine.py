"""Diagnosis of failure text without a model: the fault catalogue's families, with fixes for the live
deployment, and the key lines of the text.

`examine(text, deployment)` returns a `Diagnosis`: the `Finding`s of the catalogue (`ops.diagnosis.families`,
the
built-in `ops/diagnosis/faults.yaml` plus a team's `FAULT_CATALOGUE_FILE`), most severe first, and the few
lines that
carry the cause (root exception, caused-by chain, first error of the burst), which are shown whether or not
a family matched. `diagnose(text)` is its findings alone. The expected conclusion of every real case is in
sim/cases/README.md and tests/fixtures/cases/README.md, and scored by bench/diagnose.py.
"""

from __future__ import annotations

from dataclasses import dataclass, field

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
from ops.diagnosis.nomatch import Unmatched
from ops.linear import linear

__all__ = ["SEVERITIES", "Diagnosis", "Finding", "diagnose", "examine"]

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


def diagnose(
    text: str, deployment: Deployment | None = None, *, faults: Catalogue | None = None
) -> list[Finding]:
    """Recognise the catalogue's failure families in text.

    Args:
        text: any log or error text (docker logs, journalctl, a command's stderr, a FAILED queued
            resource's error, a completion); lines are matched one by one.
        deployment: the live deployment the fixes are written for; None: generic fixes.
        faults: the catalogue; None: `ops.diagnosis.families.catalogue()` (built-in plus the team file).

    Returns:
        Findings, one per family and distinct figures (with `count`), most severe first, then most
        specific, then by first occurrence. Empty when nothing is recognised (e.g. a healthy start-up log).
    """
    lines = text.splitlines()
    matches = (faults or catalogue()).match(text)
    ordered = sorted(
        matches,
        key=lambda m: (SEVERITIES.index(m.family.severity), -m.family.specificity, m.first),
    )
    return [_finding(m, deployment, lines) for m in ordered]


def examine(text: str, deployment: Deployment | None = None, *, faults: Catalogue | None = None) -> Diagnosis:
    """`diagnose` plus the key lines of the text (`ops.diagnosis.families.key_lines`): what to show with or
    without a
    match. Arguments as for `diagnose`."""
    return Diagnosis(tuple(diagnose(text, deployment, faults=faults)), tuple(key_lines(text)))


def _finding(match: Match, deployment: Deployment | None, lines: list[str]) -> Finding:
    family = match.family
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
