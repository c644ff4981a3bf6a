"""Instructions hidden in data: text in log entries, tool results or other people's messages that addresses
the assistant instead of describing the system. The bot never acts on it (a change is only ever built from
the asker's own words, `bot.chat.asks`) and says what it found and ignored.

Kinds, as patterns (each linear: bounded repeats, no nested quantifiers):
- one of the bot's change commands written as a slash command (`/tpu delete ...`, `/vllm restart`), the
  words read from the registry;
- a marker that frames a directive, `WORD<<...>>` or `[[WORD ...]]` (e.g. "SUGGEST<</tpu delete x>>");
- chat-template or tool-call tokens (`<|tool_call>`, `<|im_start|>`, `<start_of_turn>`) and the name of
  the suggestion tool;
- phrases addressed to a model: "ignore the previous instructions", "you must call / run / suggest ...".
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from bot.commands.registry import Registry
from ops.linear import LinearPattern, linear

__all__ = ["DIRECTIVES", "Found", "find_instructions", "patterns"]

SNIPPET_CHARS = 80
MAX_FOUND = 5

_GENERIC = (
    r"\b[A-Z][A-Z_]{2,30}\s{0,3}<<[^\n]{0,120}?>>",
    r"\[\[[A-Za-z_]{3,30}[^\n\]]{0,120}\]\]",
    r"<\|[a-z_]{2,30}\|?>|<(?:start|end)_of_turn>",
    r"\bsuggest_command\b",
    r"\bignore (?:all |any |the )?(?:previous|prior|above|earlier|former|preceding) "
    r"(?:instructions?|messages?|prompts?|rules|context)\b",
    r"\b(?:you|assistant|model|ai|gemma|bot) (?:must|should|need to|have to|are to) (?:now |immediately )?"
    r"(?:run|call|suggest|execute|recommend|offer|delete|invoke)\b[^\n]{0,80}",
)


DIRECTIVES = linear("(?i)" + "|".join(_GENERIC))
"""The kinds that are never the bot's own text (markers, template tokens, phrases to a model): for the output
of the bot's own commands (tool results), which name its commands in their fixes."""


@dataclass(frozen=True)
class Found:
    """One instruction found in data.

    Attributes:
        source: where it was found, e.g. "the logs", "the thread", "a tool result".
        snippet: the text found, on one line, at most SNIPPET_CHARS characters, without backticks.
    """

    source: str
    snippet: str


def patterns(registry: Registry) -> LinearPattern:
    """The instruction patterns, the bot's change commands read from `registry`. A command is group 1 (the
    character before it, not a word character or `/`, is matched too: RE2 has no look-behind)."""
    changes = [c for c in registry.commands() if c.changes_infra]
    groups = "|".join(sorted({re.escape(c.words[0]) for c in changes})) or _NOTHING
    verbs = "|".join(sorted({re.escape(c.words[1]) for c in changes if len(c.words) > 1})) or _NOTHING
    command = rf"(?:\A|[^\w/])(/(?:{groups})\s{{1,3}}(?:{verbs})\b[^\n]{{0,80}})"
    return linear("(?i)" + "|".join((command, *_GENERIC)))


_NOTHING = r"[^\x00-\x{10FFFF}]"  # matches no character (an empty alternation)


def _snippet(text: str) -> str:
    line = " ".join(text.replace("`", "'").split())
    return line if len(line) <= SNIPPET_CHARS else line[: SNIPPET_CHARS - 1] + "…"


def find_instructions(sources: Iterable[tuple[str, str, LinearPattern]]) -> list[Found]:
    """The instructions in each (source, text, pattern), each distinct snippet once, at most MAX_FOUND.

    Args:
        sources: (where, text, what to look for), e.g. ("the logs", the error entries' text,
            `patterns(registry)`) or ("a tool result", its text, DIRECTIVES).

    Returns:
        What was found, in the order of `sources`.
    """
    found: list[Found] = []
    seen: set[str] = set()
    for source, text, pattern in sources:
        for match in pattern.finditer(text):
            command = match.group(1) if pattern.groups else None
            snippet = _snippet(command if command is not None else match.group(0))
            if snippet.lower() in seen:
                continue
            seen.add(snippet.lower())
            found.append(Found(source, snippet))
            if len(found) >= MAX_FOUND:
                return found
    return found
