"""Model output hygiene: what a chat completion really contains before anything reaches Slack.

Gemma 4 writes a tool call as markup, `<|tool_call>call:NAME{key:<|"|>text<|"|>,n:3}<tool_call|>`; vLLM's
`gemma4` tool parser (`--enable-auto-tool-choice --tool-call-parser gemma4`) turns it into `tool_calls`.
Without the parser, or on a vLLM version without it, the markup stays in `content`. `inspect_message`
finds such calls (so the agent can run the read-only ones), strips the markup from the text, and explains
an empty completion (neither text nor tool calls). Formats: the Gemma 4 model card's function-calling
section (https://ai.google.dev/gemma/docs/core/prompt-formatting-gemma4) and vLLM's tool calling docs
(https://docs.vllm.ai/en/latest/features/tool_calling.html).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from ops.linear import linear

__all__ = [
    "MarkupCall",
    "MessageCheck",
    "as_tool_calls",
    "empty_explanation",
    "inspect_message",
    "parser_missing_note",
]

_CALL = linear(r"(?s)<\|tool_call>\s*call:(?P<name>[\w.-]+)\s*(?P<args>\{.*?)?\s*(?:<tool_call\|>|$)")
_ANY_MARKUP = linear(r"(?s)<\|tool_call>.*?(?:<tool_call\|>|$)|<\|tool_response>.*?(?:<tool_response\|>|$)")
_STRING_DELIMITER = '<|"|>'
_BARE_KEY = linear(r"([{,]\s*)([A-Za-z_][\w-]*)\s*:")


@dataclass(frozen=True)
class MarkupCall:
    """A tool call found as Gemma 4 markup in a message's content.

    Attributes:
        name: the tool named, e.g. "metrics".
        arguments: the arguments read from the markup ({} when there are none or they cannot be read).
        readable: False when arguments were present but could not be read.
    """

    name: str
    arguments: dict[str, Any]
    readable: bool = True


@dataclass(frozen=True)
class MessageCheck:
    """What one assistant message holds.

    Attributes:
        text: the content with any tool-call markup removed, stripped ("" when nothing is left).
        markup_calls: tool calls left as markup in the content, in order.
        empty: True when the message has no text, no tool calls and no markup calls.
    """

    text: str
    markup_calls: tuple[MarkupCall, ...]
    empty: bool


def _arguments(raw: str | None) -> tuple[dict[str, Any], bool]:
    if not raw or raw.strip() in ("{}", ""):
        return {}, True
    quoted = _BARE_KEY.sub(r'\1"\2":', raw.replace(_STRING_DELIMITER, '"'))
    try:
        value = json.loads(quoted)
    except ValueError:
        return {}, False
    return (value, True) if isinstance(value, dict) else ({}, False)


def inspect_message(content: str | None, tool_calls: Any = None) -> MessageCheck:
    """Read an assistant message's content and tool calls.

    Args:
        content: `message.content` (None allowed).
        tool_calls: `message.tool_calls` (None or a list); only its emptiness matters here.

    Returns:
        A MessageCheck; `text` never contains tool-call markup.
    """
    text = content or ""
    calls = []
    for match in _CALL.finditer(text):
        arguments, readable = _arguments(match.group("args"))
        calls.append(MarkupCall(match.group("name"), arguments, readable))
    clean = _ANY_MARKUP.sub("", text).strip()
    empty = not clean and not calls and not list(tool_calls or [])
    return MessageCheck(clean, tuple(calls), empty)


def empty_explanation(
    model: str, finish_reason: str | None = None, completion_tokens: int | None = None
) -> str:
    """What to tell the user when the model returned nothing (never a bare "(no answer)").

    Args:
        model: the model that answered.
        finish_reason: the choice's finish_reason, if any ("length" means max_tokens ran out).
        completion_tokens: `usage.completion_tokens`, if the server reported it.
    """
    spent = f" after {completion_tokens} tokens" if completion_tokens else ""
    if finish_reason == "length":
        return (
            f"`{model}` returned no answer{spent}: it ran out of max_tokens before writing one. Ask again "
            "with a narrower question."
        )
    return (
        f"`{model}` returned an empty completion{spent}: no text and no tool call. The server's parsers "
        "likely swallowed it: check that vLLM runs with `--tool-call-parser gemma4 --enable-auto-tool-choice`"
        " (and `--reasoning-parser gemma4`) on a version that has them. Ask again meanwhile."
    )


def parser_missing_note(names: list[str]) -> str:
    """The note for tool calls left as markup that the bot did not run (unknown or not read-only tools)."""
    listed = ", ".join(f"`{n}`" for n in names) or "a tool"
    return (
        f"The model asked for {listed} but the call came back as Gemma 4 markup: the vLLM server's tool "
        "parser is not set. Start it with `--enable-auto-tool-choice --tool-call-parser gemma4` "
        "(/vllm restart does)."
    )


@dataclass(frozen=True)
class _Function:
    name: str
    arguments: str


@dataclass(frozen=True)
class _ToolCall:
    id: str
    function: _Function
    type: str = "function"


def as_tool_calls(
    check: MessageCheck, allowed: set[str], *, first_id: int = 0
) -> tuple[list[Any], list[str]]:
    """Markup calls the agent may run, shaped like the OpenAI SDK's `message.tool_calls` items (`id`,
    `function.name`, `function.arguments` as JSON), and the names it must not run (unknown tools, tools not
    in `allowed`, arguments that cannot be read).

    Args:
        check: from `inspect_message`.
        allowed: names of the read-only tools (and the command-suggestion tool, which runs nothing).
        first_id: a number for the first call's id ("markup-<n>"), unique within the conversation.
    """
    runnable: list[Any] = []
    refused: list[str] = []
    for offset, call in enumerate(check.markup_calls):
        if call.name in allowed and call.readable:
            arguments = json.dumps(call.arguments)
            runnable.append(_ToolCall(f"markup-{first_id + offset}", _Function(call.name, arguments)))
        else:
            refused.append(call.name)
    return runnable, refused
