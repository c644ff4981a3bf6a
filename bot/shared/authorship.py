"""Who wrote what: the line under every model-written text, and the "rules only" note when no model answered.

The rule-based part of an answer (templates, known failures, fetched facts) needs no model and is always
shown; these helpers label the part a model added, or say that none could be asked and why.
"""

from __future__ import annotations

from collections.abc import Sequence

from bot.config import Settings
from llm.client import ChosenModel

RULES_ONLY = "Gemma unavailable: rules only"


def written_by(chosen: ChosenModel) -> str:
    """E.g. "written by `google/gemma-4-31B-it` (primary endpoint)"; a fallback's server is named too."""
    where = f" at `{chosen.client.base_url}`" if chosen.role != "primary endpoint" else ""
    return f"written by {chosen.label()}{where}"


def rules_only(failures: Sequence[str], settings: Settings) -> str:
    """The note shown instead of a model's text: RULES_ONLY, then why each server could not be used.

    Args:
        failures: one line per server tried (from `Services.models`) or per failed request.
        settings: to say when no fallback server is configured.

    Returns:
        Markdown, one paragraph.
    """
    reasons = list(failures)
    if not settings.llm_fallback_base_url:
        reasons.append("no fallback server (set LLM_FALLBACK_BASE_URL to any OpenAI-compatible server)")
    return f":warning: *{RULES_ONLY}*" + (": " + "; ".join(reasons) if reasons else "")
