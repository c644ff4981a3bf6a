"""OpenAI-SDK client for the hosted Gemma model on vLLM's OpenAI-compatible API (`/v1/chat/completions`),
and how many tokens a chat prompt to it takes.

vLLM answers the OpenAI chat-completions protocol (https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html);
see docs/vllm.md §1.4 to §1.7 for the fields it adds and its error bodies.
SDK errors are translated to `ops.errors` by `translate_errors`, which streamed calls can reuse.

A prompt is counted by the served model's own tokenizer when it can be (`PromptCounter`). vLLM serves
`POST /tokenize` (vllm/entrypoints/openai/protocol.py: TokenizeChatRequest with `messages`, `tools` and
`add_generation_prompt`; the answer is TokenizeResponse `{count, max_model_len, tokens}`): it applies the
model's chat template, so the count includes the template's markers and the tools' schemas, exactly as the
server will count the request. Other OpenAI-compatible servers (llama.cpp, a proxy) may not have it; then
`estimate_chat_tokens` counts conservatively: every digit and punctuation mark a token (Gemma's
SentencePiece splits digits), at most four letters per token, a fixed overhead per message for the template,
and the tools' JSON. The estimate is meant to be high, never low: a prompt it accepts fits.
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, TypeVar

import httpx
import openai

from llm.redact import redact
from ops.errors import (
    BackendTimeout,
    BackendUnavailable,
    BadInput,
    NotFound,
    OpsError,
    PermissionDenied,
    QuotaExceeded,
)
from ops.vllm.server import AUTH_HINT, NOT_LISTENING_HINT, SERVER_ERROR_HINT, TIMEOUT_HINT, error_message

__all__ = [
    "DEFAULT_CONTEXT_TOKENS",
    "MESSAGE_OVERHEAD_TOKENS",
    "TEMPLATE_OVERHEAD_TOKENS",
    "ChosenModel",
    "ContextSize",
    "GemmaClient",
    "ModelTarget",
    "ProbeResult",
    "PromptCounter",
    "ServedModel",
    "StreamResult",
    "TokenCount",
    "choose_models",
    "context_size",
    "estimate_chat_tokens",
    "estimate_text_tokens",
    "first_answer",
    "translate_errors",
]

log = logging.getLogger(__name__)

DEFAULT_CONTEXT_TOKENS = 2048
"""Context size assumed when the server reports none and LLM_CONTEXT_TOKENS is unset: the default `n_ctx`
of llama-cpp-python's OpenAI-compatible server (`llama_cpp/server/settings.py`, ModelSettings.n_ctx), the
smallest context a served chat model is commonly run with; a prompt fitted to it fits any larger one."""

NO_USAGE_NOTE = (
    "the server sent no usage chunk (stream_options.include_usage unsupported?): token counts, TPOT and "
    "tokens/s are unknown"
)
# The most answer text one stream collects (about 25,000 tokens, above any max_tokens the bot asks for);
# past it the server is ignoring max_tokens, and the stream is closed.
MAX_ANSWER_CHARS = 100_000
CUT_MARK = "\n… [cut: the server kept sending past max_tokens]"
CUT_NOTE = f"the answer was cut at {MAX_ANSWER_CHARS:,} characters (the server ignored max_tokens)"


@dataclass(frozen=True)
class ProbeResult:
    """Result of `GemmaClient.probe`.

    Attributes:
        model: the model that answered (the `model` field of the response).
        latency_s: wall time of the one-token completion, seconds.
        prompt_tokens: prompt tokens as counted by the server (chat template included), or None.
        completion_tokens: generated tokens (1 normally), or None.
    """

    model: str
    latency_s: float
    prompt_tokens: int | None
    completion_tokens: int | None


@dataclass(frozen=True)
class StreamResult:
    """Result of `GemmaClient.stream`: the text and exact timing statistics of one streamed completion.

    Attributes:
        text: the generated content (reasoning text excluded).
        ttft_s: time to first token, seconds: from sending the request to the first delta carrying generated
            text (content, or reasoning when a reasoning parser runs); None if nothing was generated.
        tpot_s: time per output token after the first, seconds: (total_s - ttft_s) / (completion_tokens - 1);
            None without usage or with fewer than 2 tokens.
        output_tokens_per_s: completion_tokens / total_s (end to end, TTFT included); None without usage.
        prompt_tokens, completion_tokens: from the streamed `usage` chunk (the server's tokenizer, chat
            template included); None if the server sent no usage chunk.
        total_s: wall time from sending the request to the end of the stream, seconds.
        finish_reason: "stop", "length", "tool_calls", ... or None if the stream ended without one.
        note: "" normally; says why figures are missing (e.g. no usage chunk) or that the answer was cut.
        cut: the server sent more than MAX_ANSWER_CHARS (it ignored max_tokens): the stream was closed there
            and `text` ends with CUT_MARK.
    """

    text: str
    ttft_s: float | None
    tpot_s: float | None
    output_tokens_per_s: float | None
    prompt_tokens: int | None
    completion_tokens: int | None
    total_s: float
    finish_reason: str | None
    note: str = ""
    cut: bool = False


@dataclass(frozen=True)
class ServedModel:
    """One entry of `/v1/models`.

    Attributes:
        id: the model name to send in requests (vLLM: `--served-model-name`; llama.cpp: its alias).
        max_model_len: the context window in tokens when the server reports it (a vLLM extension of the
            OpenAI ModelCard: https://docs.vllm.ai/en/latest/serving/openai_compatible_server.html), or
            None.
    """

    id: str
    max_model_len: int | None


@dataclass(frozen=True)
class ContextSize:
    """The context window used to budget prompts, and where the figure came from.

    Attributes:
        tokens: context window, tokens.
        source: "max_model_len from /v1/models", "LLM_CONTEXT_TOKENS" or "default: the server reports none".
    """

    tokens: int
    source: str

    def describe(self) -> str:
        """E.g. "context 16384 tokens (max_model_len from /v1/models)"."""
        return f"context {self.tokens} tokens ({self.source})"


def context_size(served: ServedModel | None, setting: int | None) -> ContextSize:
    """The context window for prompts: the server's figure, else the setting, else DEFAULT_CONTEXT_TOKENS.

    Args:
        served: the model's `/v1/models` entry (None when the server listed none).
        setting: LLM_CONTEXT_TOKENS, tokens, or None.

    Returns:
        ContextSize; never fails (an OpenAI-compatible server need not report a context size).
    """
    if served is not None and served.max_model_len:
        return ContextSize(served.max_model_len, "max_model_len from /v1/models")
    if setting:
        return ContextSize(setting, "LLM_CONTEXT_TOKENS")
    return ContextSize(DEFAULT_CONTEXT_TOKENS, "default: the server reports none")


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


def _server_message(exc: openai.APIStatusError) -> str:
    """The server's own message (the SDK has already unwrapped a nested `{"error": {...}}` body)."""
    body = exc.body
    message = error_message(body)
    if message is None and isinstance(body, str) and body.strip():
        message = body
    text = " ".join((message or "").split())
    return text[:500] if text else f"HTTP {exc.status_code}"


@contextmanager
def translate_errors(what: str, base_url: str) -> Iterator[None]:
    """Run a block of openai SDK calls, turning SDK errors into `ops.errors`.

    Args:
        what: the operation, for messages, e.g. "chat completion".
        base_url: the server root, for messages (never a key).

    Raises:
        BackendTimeout: `APITimeoutError`.
        BackendUnavailable: `APIConnectionError` (refused: booting or down), `InternalServerError` (5xx),
            or a response the SDK could not parse.
        BadInput: `BadRequestError` (400; e.g. prompt + max_tokens exceed max_model_len), with the server's
            message.
        PermissionDenied: `AuthenticationError` (401) or `PermissionDeniedError` (403).
        NotFound: `NotFoundError` (404, e.g. an unknown model name).
        QuotaExceeded: `RateLimitError` (429).
        OpsError: any other HTTP error status.
    """
    try:
        yield
    except openai.APITimeoutError as exc:  # subclass of APIConnectionError: test it first
        raise BackendTimeout(f"vLLM {what} at {base_url} timed out", TIMEOUT_HINT, backend="vllm") from exc
    except openai.APIConnectionError as exc:
        raise BackendUnavailable(
            f"cannot connect to vLLM at {base_url}", NOT_LISTENING_HINT, backend="vllm"
        ) from exc
    except openai.APIResponseValidationError as exc:
        raise BackendUnavailable(
            f"vLLM returned a malformed {what} body ({base_url})", SERVER_ERROR_HINT, backend="vllm"
        ) from exc
    except openai.APIStatusError as exc:
        message = f"vLLM {what} failed (HTTP {exc.status_code}): {_server_message(exc)}"
        if isinstance(exc, openai.InternalServerError):
            raise BackendUnavailable(message, SERVER_ERROR_HINT, backend="vllm") from exc
        if isinstance(exc, openai.BadRequestError):
            raise BadInput(message, "shorten the prompt or lower max_tokens", backend="vllm") from exc
        if isinstance(exc, openai.AuthenticationError | openai.PermissionDeniedError):
            raise PermissionDenied(message, AUTH_HINT, backend="vllm") from exc
        if isinstance(exc, openai.NotFoundError):
            raise NotFound(message, "check VLLM_MODEL against /vllm models", backend="vllm") from exc
        if isinstance(exc, openai.RateLimitError):
            raise QuotaExceeded(message, "retry in a moment", backend="vllm") from exc
        raise OpsError(message, "", backend="vllm") from exc


class GemmaClient:
    """Chat-completions client for the Gemma model served by vLLM.

    One `openai.OpenAI` client per instance (thread-safe, reuses connections), without SDK retries so that
    errors surface at once. `probe` times a one-token completion; `stream` streams a completion with exact
    statistics (token counts from the streamed `usage` chunk).

    Args:
        base_url: the server root without `/v1`, e.g. "http://10.0.0.5:8000".
        model: the served model name (the `id` in `/v1/models`), e.g. "google/gemma-4-31B-it".
        api_key: the server's `--api-key`, or None; vLLM ignores the bearer token when it has no key, so
            "EMPTY" is sent then (the SDK requires one).
        timeout_s: timeout of each request, seconds.
    """

    def __init__(
        self, base_url: str, *, model: str, api_key: str | None = None, timeout_s: float = 30.0
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout_s = timeout_s
        self._openai = openai.OpenAI(
            base_url=self.base_url + "/v1",
            api_key=api_key or "EMPTY",
            max_retries=0,
            timeout=timeout_s,
        )

    def __repr__(self) -> str:
        return f"GemmaClient({self.base_url!r}, model={self.model!r})"

    @property
    def openai(self) -> openai.OpenAI:
        """The underlying OpenAI SDK client (for tool-calling loops such as `llm.agent.answer`)."""
        return self._openai

    def close(self) -> None:
        """Close the underlying HTTP connection pool."""
        self._openai.close()

    def __enter__(self) -> GemmaClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def _create(self, what: str, **kwargs: Any) -> Any:
        """`chat.completions.create(model=self.model, **kwargs)` with errors translated."""
        with translate_errors(what, self.base_url):
            return self._openai.chat.completions.create(model=self.model, **kwargs)

    def served_models(self, timeout_s: float | None = None) -> list[ServedModel]:
        """`GET /v1/models` through the SDK: the served model names with their context size when reported.

        Args:
            timeout_s: timeout of this request, seconds; None: the client's.

        Returns:
            ServedModel per listed model, in the server's order (may be empty).

        Raises:
            The errors listed in `translate_errors`.
        """
        with translate_errors("models list", self.base_url):
            sdk = self._openai if timeout_s is None else self._openai.with_options(timeout=timeout_s)
            listed = sdk.models.list()
        served = []
        for card in getattr(listed, "data", None) or []:
            length = getattr(card, "max_model_len", None)
            valid = isinstance(length, int) and not isinstance(length, bool) and length > 0
            served.append(ServedModel(str(card.id), length if valid else None))
        return served

    def probe(self) -> ProbeResult:
        """Ask for a one-token completion of "ping" and time it: proves the model actually generates.

        Returns:
            ProbeResult with the wall time in seconds and the token counts from `usage`.

        Raises:
            The errors listed in `translate_errors`; BackendUnavailable if the response has no model name.
        """
        start = time.monotonic()
        response = self._create(
            "probe", messages=[{"role": "user", "content": "ping"}], max_tokens=1, temperature=0.0
        )
        latency = time.monotonic() - start
        model = getattr(response, "model", None)
        if not isinstance(model, str):
            raise BackendUnavailable(
                f"vLLM returned a malformed chat completion body ({self.base_url})",
                SERVER_ERROR_HINT,
                backend="vllm",
            )
        usage = getattr(response, "usage", None)
        return ProbeResult(
            model=model,
            latency_s=latency,
            prompt_tokens=getattr(usage, "prompt_tokens", None) if usage is not None else None,
            completion_tokens=getattr(usage, "completion_tokens", None) if usage is not None else None,
        )

    def stream(
        self,
        messages: Sequence[dict[str, Any]],
        *,
        max_tokens: int,
        on_delta: Callable[[str], None] | None = None,
        temperature: float | None = None,
    ) -> StreamResult:
        """Stream a chat completion and measure it.

        Sends `stream=True, stream_options={"include_usage": True}` (docs/vllm.md §1.5: vLLM then sends one
        extra chunk with `choices: []` and `usage` after the content). Token counts come from that chunk,
        never from counting chunks (one chunk can carry several tokens). Fragments are collected in a list
        and joined once. A server that ignores `max_tokens` cannot hold the answer back: at
        MAX_ANSWER_CHARS the stream is closed and the text ends with CUT_MARK (the note says so).

        Args:
            messages: OpenAI chat messages, e.g. [{"role": "user", "content": "hi"}]; every string content is
                passed through `llm.redact.redact` before it is sent (secrets never reach the model).
            max_tokens: the most tokens to generate (>= 1).
            on_delta: called with each content fragment as it arrives (from this thread); exceptions it raises
                abort the stream and propagate.
            temperature: sampling temperature, or None for the server default.

        Returns:
            StreamResult; see its attributes for the exact definitions of TTFT, TPOT and tokens/s.

        Raises:
            The errors listed in `translate_errors` (also for failures in the middle of the stream);
            BackendUnavailable when the connection breaks mid-stream or the server sends an error event.
        """
        kwargs: dict[str, Any] = {
            "messages": [
                {**m, "content": redact(m["content"])} if isinstance(m.get("content"), str) else m
                for m in messages
            ],
            "max_tokens": max_tokens,
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if temperature is not None:
            kwargs["temperature"] = temperature
        parts: list[str] = []
        collected = 0
        cut = False
        ttft: float | None = None
        finish: str | None = None
        usage: Any = None
        start = time.monotonic()
        with translate_errors("chat stream", self.base_url):
            try:
                chunks = self._openai.chat.completions.create(model=self.model, **kwargs)
                try:
                    for chunk in chunks:
                        if getattr(chunk, "usage", None) is not None:
                            usage = chunk.usage
                        for choice in getattr(chunk, "choices", None) or []:
                            delta = choice.delta
                            content = getattr(delta, "content", None) if delta is not None else None
                            extra = getattr(delta, "model_extra", None) or {}
                            reasoning = extra.get("reasoning_content") or extra.get("reasoning")
                            if ttft is None and (content or reasoning):
                                ttft = time.monotonic() - start
                            if content:
                                content = content[: MAX_ANSWER_CHARS - collected]
                                parts.append(content)
                                collected += len(content)
                                if on_delta is not None:
                                    on_delta(content)
                                cut = collected >= MAX_ANSWER_CHARS
                            if choice.finish_reason is not None:
                                finish = choice.finish_reason
                        if cut:
                            break
                finally:
                    chunks.close()
            except httpx.HTTPError as exc:  # the connection broke mid-stream
                raise BackendUnavailable(
                    f"vLLM chat stream from {self.base_url} broke off: {type(exc).__name__}",
                    SERVER_ERROR_HINT,
                    backend="vllm",
                ) from exc
            except openai.APIError as exc:
                if isinstance(exc, openai.APIStatusError | openai.APIConnectionError):
                    raise
                # an error event inside the stream (`data: {"error": ...}`)
                raise BackendUnavailable(
                    f"vLLM chat stream failed: {' '.join(str(exc.message).split())[:300]}",
                    SERVER_ERROR_HINT,
                    backend="vllm",
                ) from exc
        total = time.monotonic() - start
        prompt_tokens = _opt_count(getattr(usage, "prompt_tokens", None))
        completion_tokens = _opt_count(getattr(usage, "completion_tokens", None))
        tpot = per_s = None
        if completion_tokens is not None:
            per_s = completion_tokens / total if total > 0 else None
            if ttft is not None and completion_tokens > 1:
                tpot = (total - ttft) / (completion_tokens - 1)
        notes = [CUT_NOTE] if cut else []
        if usage is None:
            notes.append(NO_USAGE_NOTE)
        return StreamResult(
            text="".join(parts) + (CUT_MARK if cut else ""),
            ttft_s=ttft,
            tpot_s=tpot,
            output_tokens_per_s=per_s,
            prompt_tokens=prompt_tokens,
            completion_tokens=completion_tokens,
            total_s=total,
            finish_reason=finish,
            note="; ".join(notes),
            cut=cut,
        )


def _opt_count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


@dataclass(frozen=True)
class ModelTarget:
    """An OpenAI-compatible server that may answer, in the order they are tried.

    Attributes:
        role: "primary endpoint" or "fallback", shown beside every model-written text.
        base_url: the server root without `/v1`.
        model: the model name to request; None takes the first id of `/v1/models`.
        api_key: bearer token, or None (never shown).
    """

    role: str
    base_url: str
    model: str | None
    api_key: str | None = None


@dataclass
class ChosenModel:
    """A server that answered `/v1/models`: its client (close it), role, model name and context size."""

    client: GemmaClient
    role: str
    context: ContextSize

    @property
    def model(self) -> str:
        """The model name sent in requests."""
        return self.client.model

    def label(self) -> str:
        """Who wrote a text, e.g. "`google/gemma-4-31B-it` (primary endpoint)"."""
        return f"`{self.model}` ({self.role})"

    def counter(self) -> PromptCounter:
        """Counts prompts with THIS server's tokenizer (vLLM's `/tokenize`), else the conservative estimate
        (`estimate_chat_tokens`): a fallback server is never measured with the primary's."""
        return PromptCounter(self.client.base_url, self.model, api_key=self.client.openai.api_key)


_Answer = TypeVar("_Answer")


def first_answer(
    models: Iterable[ChosenModel],
    ask: Callable[[ChosenModel], _Answer],
    failures: list[str],
    *,
    unusable: Callable[[_Answer], str | None] = lambda _: None,
) -> tuple[_Answer, ChosenModel] | None:
    """The answer of the first model that gives one: each of `models` in turn is asked, and a model whose
    request fails, or whose answer is unusable, hands over to the next.

    Args:
        models: the servers in order (`choose_models`, `bot.services.Services.models`); iteration stops at
            the first answer, so the servers after it are never contacted.
        ask: asks one model; an OpsError it raises is that model's failure.
        failures: receives one line per model that did not answer, "<role> `<model>`: <why>" (no keys).
        unusable: why an answer is no answer (e.g. "it wrote nothing"), None to take it.

    Returns:
        (the answer, the model that gave it), or None when no model answered (`failures` says why).
    """
    for chosen in models:
        try:
            answer = ask(chosen)
        except OpsError as exc:
            failures.append(f"{chosen.role} `{chosen.model}`: {exc.message}")
            continue
        why = unusable(answer)
        if why is None:
            return answer, chosen
        failures.append(f"{chosen.role} `{chosen.model}`: {why}")
    return None


def choose_models(
    targets: Sequence[ModelTarget],
    *,
    context_setting: int | None,
    timeout_s: float,
    list_timeout_s: float,
    failures: list[str],
) -> Iterator[ChosenModel]:
    """Yield, in order, each target that answers `/v1/models` (a cheap reachability check), as a ChosenModel.

    The caller uses the first and moves on to the next when a request to it fails; each yielded client is
    closed when the caller asks for the next or stops iterating.

    Args:
        targets: the servers, primary first.
        context_setting: LLM_CONTEXT_TOKENS (used when a server reports no context size), or None.
        timeout_s: timeout of each model request (a whole chat completion), seconds.
        list_timeout_s: timeout of the `/v1/models` check, seconds (short: a hung server is skipped soon).
        failures: receives one line per target that did not answer, e.g. "primary endpoint at http://h:8000:
            cannot connect to vLLM at http://h:8000" (no keys).

    Yields:
        ChosenModel per reachable target. A configured model name absent from the listing is still used
        (the request then says what is wrong); no name takes the first listed id.
    """
    for target in targets:
        client = GemmaClient(
            target.base_url, model=target.model or "", api_key=target.api_key, timeout_s=timeout_s
        )
        try:
            served = client.served_models(list_timeout_s)
            if not target.model and not served:
                raise NotFound(f"{target.base_url} lists no model", "set the model name", backend="vllm")
        except OpsError as exc:
            client.close()
            failures.append(f"{target.role} at {target.base_url}: {exc.message}")
            continue
        name = target.model or served[0].id
        client.model = name
        card = next((m for m in served if m.id == name), served[0] if len(served) == 1 else None)
        try:
            yield ChosenModel(client, target.role, context_size(card, context_setting))
        finally:
            client.close()
