"""Token counts the way a real tokenizer and chat template give them, without a tokenizer (SIMULATED): every
digit and punctuation mark is a token (Gemma's SentencePiece splits digits), a word is a token per 6
letters, each message adds its template markers, and the tools' JSON schemas are part of the prompt."""

from __future__ import annotations

import json
import re
from typing import Any

# A stand-in for Gemma's SentencePiece: split digits, punctuation alone, up to 6 letters per piece.
_PIECE = re.compile(r"\d|[^\W\d_]{1,6}|[^\w\s]|_|\n")
# Gemma's chat template: <bos>, then per message "<start_of_turn>{role}\n{content}<end_of_turn>\n", then
# "<start_of_turn>model\n" as the generation prompt (the chat_template in the model's tokenizer_config.json).
BOS_TOKENS = 1
TURN_TOKENS = 5
GENERATION_PROMPT_TOKENS = 3


def count_text_tokens(text: str) -> int:
    """Tokens of `text` by the simulator's stand-in tokenizer (see the module docstring)."""
    return len(_PIECE.findall(text))


def content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(p["text"] for p in content if isinstance(p, dict) and isinstance(p.get("text"), str))
    return ""


def count_chat_tokens(messages: list[Any], tools: Any = None, *, add_generation_prompt: bool = True) -> int:
    """Prompt tokens of a chat request: the template's markers, every message's content and tool calls,
    and the tools' JSON (a chat template renders the tool schemas into the prompt)."""
    total = BOS_TOKENS + (GENERATION_PROMPT_TOKENS if add_generation_prompt else 0)
    if tools:
        total += TURN_TOKENS + count_text_tokens(json.dumps(tools))
    for message in messages:
        if not isinstance(message, dict):
            continue
        total += TURN_TOKENS + count_text_tokens(content_text(message.get("content")))
        if message.get("tool_calls"):
            total += count_text_tokens(json.dumps(message["tool_calls"]))
    return total
