"""The diagnosis as Slack shows it, the same in every command and alert: the known failures (cause, fix for
this deployment, evidence as the engine kept it: whole, or shortened in the middle, never across its deciding
words; runbook) or "not a known failure; the key lines are:", and the key lines; and the line saying that
something other than the deployment's container answers on the vLLM port."""

from __future__ import annotations

from llm.diagnose import UNKNOWN_LEAD, Diagnosis
from ops.vllm import ServerIdentity


def diagnosis_text(result: Diagnosis, *, heading: str = "Known failures in the log") -> str:
    """Markdown: each finding (title, conclusion, fix, evidence line, runbook) under `heading`, or for a
    failure no family explains, "not a known failure; the key lines are:" and those lines; then the key
    lines that carry the cause. "" when there is nothing to show (no finding, no error line)."""
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
    elif result.key_lines:
        parts.append(f":mag: {UNKNOWN_LEAD}")
        parts.append("\n".join(f"`{line}`" for line in result.key_lines))
    return "\n".join(parts)


def identity_line(identity: ServerIdentity) -> str:
    """The red line of an identity verdict "other" ("" otherwise), the same on every surface."""
    return f":red_circle: *Not the bot's vLLM container*: {identity.line()}" if identity.other else ""
