"""The diagnosis as Slack shows it, the same in every command and alert: the known failures (cause, fix for
this deployment, evidence as the engine kept it: whole, or shortened in the middle, never across its deciding
words; runbook), or for a failure no catalogue family explains, `NO_MATCH_LEAD` with the top error templates
(counts, first and last seen), the first error before the engine died, the key lines and the next command
to run for where the log was read; and the line saying that something other than the deployment's
container answers on the vLLM port.

Every wording of the no-match answer is here (the chat's facts use `unmatched_fact`), so each surface says
the same."""

from __future__ import annotations

import math
from datetime import datetime, timedelta

from ops.diagnosis.engine import Diagnosis
from ops.diagnosis.nomatch import Unmatched
from ops.times import utc_text
from ops.vllm.server import ServerIdentity

__all__ = [
    "NO_MATCH_LEAD",
    "STARTUP_UNIT",
    "diagnosis_text",
    "identity_line",
    "next_steps",
    "unmatched_fact",
]

NO_MATCH_LEAD = "Not a known failure: no family of the fault catalogue matches these errors"
"""What a failure no family explains says first, on every surface."""

STARTUP_UNIT = "google-startup-scripts"
"""The journal unit of the VM's startup script, which starts the vLLM container (one of the default
SYSLOG_UNITS; https://cloud.google.com/compute/docs/instances/startup-scripts/linux#viewing-output)."""

_LONGEST_WINDOW = timedelta(days=30)  # Cloud Logging's default retention of _Default
"""https://cloud.google.com/logging/quotas#logs_retention_periods"""


def _wider(span: timedelta | None, *, days: bool) -> str:
    """A look-back twice `span` (at least 2 hours), in whole hours ("6h"), or in days above two days when
    `days` (Cloud Logging; docker's --since takes Go durations, hours at most)."""
    hours = max(2, math.ceil(2 * span.total_seconds() / 3600)) if span else 2
    hours = min(hours, int(_LONGEST_WINDOW.total_seconds() // 3600))
    return f"{math.ceil(hours / 24)}d" if days and hours > 48 else f"{hours}h"


def next_steps(u: Unmatched) -> list[str]:
    """The commands to run next for where the log was read, each a bot command line (without the slash's
    Slack formatting) that the registry parses and that works in the state shown: the vLLM container's log
    over a wider window (`/vllm logs --since`, which docker serves for an exited container too) and Cloud
    Logging's view of the node (`/logs analyze --since`); for Cloud Logging a wider window, and the
    startup script's journal when its lines are among the errors; for a journal, more of it."""
    analyze = f"/logs analyze --since {_wider(u.span, days=True)}"
    if u.source == "container":
        steps = [f"/vllm logs --since {_wider(u.span, days=False)} --tail 2000", analyze]
    elif u.source == "journal":
        steps = [f"/vllm syslog --unit {u.unit or STARTUP_UNIT} --tail 2000", analyze]
    else:
        steps = [analyze]
    if u.startup_script and u.source != "journal":
        steps.append(f"/vllm syslog --unit {STARTUP_UNIT} --tail 2000")
    return steps


_WHY = {
    "container": "the vLLM container's log",
    "cloud-logging": "the Cloud Logging entries of the TPU VMs",
    "journal": "the journal",
}


def _at(moment: datetime | None) -> str:
    """A log line's time as every answer shows a time, to the second (lines a few seconds apart)."""
    return utc_text(moment, seconds=True)


def _template_line(u: Unmatched, index: int) -> str:
    t = u.templates[index]
    times = f" · first {_at(t.first_seen)} · last {_at(t.last_seen)}" if u.timed else ""
    return f"{index + 1}. *{t.count:,}× {t.severity}* `{t.template[:150]}`{times}"


def _first_error_line(u: Unmatched) -> str:
    if not u.first_error:
        return ""
    when = f" at {_at(u.first_error_at)}" if u.first_error_at else ""
    before = f", before the container exited at {_at(u.ended_at)}" if u.ended_at else ""
    return f"*First error*{when}{before}:\n`{u.first_error[:300]}`"


def _unmatched_parts(u: Unmatched, key_lines: tuple[str, ...]) -> list[str]:
    parts = [f"*Top error templates* in {_WHY[u.source]}"]
    parts.append("\n".join(_template_line(u, i) for i in range(len(u.templates))))
    first = _first_error_line(u)
    if first:
        parts.append(first)
    extra = [line for line in key_lines if not u.first_error or u.first_error[:80] not in line]
    if extra:
        parts.append("*Key lines*\n" + "\n".join(f"`{line}`" for line in extra))
    parts.append("*Next step*: " + " or ".join(f"`{step}`" for step in next_steps(u)))
    return parts


def diagnosis_text(result: Diagnosis, *, heading: str = "Known failures in the log") -> str:
    """Markdown: each finding (title, conclusion, fix, evidence line, runbook) under `heading`, then the key
    lines that carry the cause; or for a failure no family explains, `NO_MATCH_LEAD`, then (with
    `result.unmatched`) the top error templates with counts and first/last seen, the first error before the
    engine died, the key lines and the next step, else the key lines alone. "" when there is nothing to show
    (no finding, no error line)."""
    parts: list[str] = []
    if result.findings:
        parts.append(f"*{heading}*")
        for f in result.findings:
            entry = f":rotating_light: *{f.name}*: {f.conclusion}\n    _Fix:_ {f.fix}"
            entry += f"\n    `{f.evidence}`"
            entry += "".join(f"\n    `{line}`" for line in f.related)
            if f.runbook:
                entry += f"\n    _Runbook:_ {f.runbook}"
            parts.append(entry)
        extra = [line for line in result.key_lines if not any(line == f.evidence for f in result.findings)]
        if extra:
            parts.append("*Key lines*\n" + "\n".join(f"`{line}`" for line in extra))
    elif result.unmatched is not None:
        parts.append(f":mag: *{NO_MATCH_LEAD}.*")
        parts += _unmatched_parts(result.unmatched, result.key_lines)
    elif result.key_lines:
        parts.append(f":mag: *{NO_MATCH_LEAD}*; the key lines are:")
        parts.append("\n".join(f"`{line}`" for line in result.key_lines))
    return "\n".join(parts)


def unmatched_fact(u: Unmatched) -> str:
    """The no-match answer as one line of plain text, for the chat's facts: the lead, the top templates
    with counts and first/last seen, the first error, the next step."""
    top = "; ".join(
        f"{t.count}× {t.severity} `{t.template[:100]}`"
        + (f" (first {_at(t.first_seen)}, last {_at(t.last_seen)})" if u.timed else "")
        for t in u.templates
    )
    text = f"{NO_MATCH_LEAD}; top error templates: {top}"
    if u.first_error:
        when = f" at {_at(u.first_error_at)}" if u.first_error_at else ""
        text += f"; first error{when}: `{u.first_error[:200]}`"
    return text + "; next step: " + " or ".join(f"`{step}`" for step in next_steps(u))


def identity_line(identity: ServerIdentity) -> str:
    """The red line of an identity verdict "other" ("" otherwise), the same on every surface."""
    return f":red_circle: *Not the bot's vLLM container*: {identity.line()}" if identity.other else ""
