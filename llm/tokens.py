"""How many tokens a chat prompt takes, counted by the served model's own tokenizer when it can be.

vLLM serves `POST /tokenize` (vllm/entrypoints/openai/protocol.py: TokenizeChatRequest with `messages`,
`tools` and `add_generation_prompt`; the answer is TokenizeResponse `{count, max_model_len, tokens}`): it
applies the model's chat template, so the count includes the template's markers and the tools' schemas,
exactly as the server will count the request. Other OpenAI-compatible servers (llama.cpp, a proxy) may not
have it; then `estimate_chat_tokens` counts conservatively: every digit and punctuation mark a token (Gemma's
SentencePiece splits digits), at most four letters per token, a fixed overhead per message for the template,
and the tools' JSON. The estimate is meant to be high, never low: a prompt it accepts fits.
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx

log = logging.getLogger(__name__)

_PIECE = re.compile(r"\d|[^\W\d_]{1,4}|[^\w\s]|_|\n")
MESSAGE_OVERHEAD_TOKENS = 8
"""Template tokens per message in the estimate (Gemma's turn markers take 5; kept higher to be safe)."""
TEMPLATE_OVERHEAD_TOKENS = 16
"""Tokens for the template's fixed parts in the estimate (BOS, the generation prompt, a margin)."""


def estimate_text_tokens(text: str) -> int:
    """A conservative token count of `text` (see the module docstring): the larger of the piece count and
    ceil(characters / 3)."""
    return max(len(_PIECE.findall(text)), math.ceil(len(text) / 3))


def _content(message: Any) -> str:
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, list):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return str(content or "")


def estimate_chat_tokens(messages: Sequence[Any], tools: Sequence[Any] | None = None) -> int:
    """A conservative token count of a chat request: contents, tool calls, the tools' JSON and the chat
    template's overhead (MESSAGE_OVERHEAD_TOKENS per message, TEMPLATE_OVERHEAD_TOKENS once)."""
    total = TEMPLATE_OVERHEAD_TOKENS
    if tools:
        total += MESSAGE_OVERHEAD_TOKENS + estimate_text_tokens(json.dumps(list(tools)))
    for message in messages:
        total += MESSAGE_OVERHEAD_TOKENS + estimate_text_tokens(_content(message))
        calls = message.get("tool_calls") if isinstance(message, dict) else None
        if calls:
            total += estimate_text_tokens(json.dumps(calls, default=str))
    return total


@dataclass(frozen=True)
class TokenCount:
    """A prompt's size: `tokens`; `exact` when the served model's tokenizer counted it; the server's
    `max_model_len` when it said (None otherwise)."""

    tokens: int
    exact: bool
    max_model_len: int | None = None


class PromptCounter:
    """Counts chat prompts with the server's `/tokenize`, falling back to `estimate_chat_tokens`.

    A server without `/tokenize` (HTTP 404/405/501, or no `count` in the answer) is remembered, so the
    estimate is used from then on without asking again. Other failures (a 400 for this prompt, a network
    error) fall back for that call only.

    Args:
        base_url: the server root without `/v1`, e.g. "http://10.0.0.5:8000".
        model: the served model name.
        api_key: the server's `--api-key`, or None.
        timeout_s: timeout of one `/tokenize` call, seconds.
    """

    def __init__(self, base_url: str, model: str, *, api_key: str | None = None, timeout_s: float = 5.0):
        self.base_url = base_url.rstrip("/")
        self.model = model
        self._headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._timeout_s = timeout_s
        self._unsupported = False
        self._lock = threading.Lock()

    def count(self, messages: Sequence[Any], tools: Sequence[Any] | None = None) -> TokenCount:
        """The prompt tokens of `messages` (+ `tools`) with the generation prompt, as the server counts.

        Never raises: a failing or missing `/tokenize` gives the conservative estimate (`exact` False).
        """
        with self._lock:
            unsupported = self._unsupported
        if not unsupported:
            body: dict[str, Any] = {
                "model": self.model,
                "messages": list(messages),
                "add_generation_prompt": True,
            }
            if tools:
                body["tools"] = list(tools)
            try:
                response = httpx.post(
                    self.base_url + "/tokenize", json=body, headers=self._headers, timeout=self._timeout_s
                )
                if response.status_code in (404, 405, 501):
                    raise LookupError(f"HTTP {response.status_code}")
                response.raise_for_status()
                answer = response.json()
                if isinstance(answer, dict) and isinstance(answer.get("count"), int):
                    length = answer.get("max_model_len")
                    return TokenCount(answer["count"], True, length if isinstance(length, int) else None)
                raise LookupError("no count in the answer")
            except LookupError as exc:
                log.info("%s has no usable /tokenize (%s): estimating prompt tokens", self.base_url, exc)
                with self._lock:
                    self._unsupported = True
            except (httpx.HTTPError, ValueError) as exc:
                log.info("/tokenize failed (%s): estimating prompt tokens this time", type(exc).__name__)
        return TokenCount(estimate_chat_tokens(messages, tools), False)
