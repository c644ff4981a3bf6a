"""The SIMULATED model behind the vLLM simulator: canned answers, Gemma 4's tool-call markup, keyword-driven
tool calls, scripted turns, and vLLM's request errors. No model runs."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

# vLLM's refusal of tool_choice "auto" without the flags (serving_chat.py; docs/vllm.md §1.6).
AUTO_TOOL_CHOICE_MESSAGE = (
    '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
)

# Keyword rules of the simulated tool-calling model: the first tool (in this order) that the request offers
# and whose keywords appear in the last user message is called.
TOOL_KEYWORDS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "suggest_command",
        ("delete", "remove", "destroy", "stop", "start", "restart", "reset", "create", "recreate", "kill"),
    ),
    ("logs", ("log", "logs", "error", "errors", "crash", "crashed", "fail", "failed", "failing", "oom")),
    ("metrics", ("metric", "metrics", "throughput", "latency", "ttft", "tpot", "kv", "cache", "load")),
    ("cost", ("cost", "costs", "price", "spend", "spent", "bill", "burn")),
    ("describe", ("describe", "detail", "details")),
    ("list", ("list", "queued", "resources", "which", "nodes")),
    ("status", ("status", "down", "up", "health", "healthy", "running", "ready", "alive", "state")),
)
_CHANGE_VERBS = TOOL_KEYWORDS[0][1]

# vLLM's EngineDeadError text, returned with HTTP 500 by completions while the engine is dead.
ENGINE_DEAD_MESSAGE = "EngineCore encountered an issue. See stack trace (above) for the root cause."

# How every text answer of the simulated model starts (canned, or built from a tool result), so that no one
# takes it for a model's judgement.
SIMULATED_ANSWER = "This is a simulated answer from the local vLLM simulator. No model ran."
CANNED_TEXT = (
    SIMULATED_ANSWER + " The words are canned, "
    "but the protocol, the token accounting and the metrics behave like a real vLLM server serving Gemma 4."
)
CANNED = CANNED_TEXT.split()

# A fact sentence longer than this is cut at its first clause; code spans longer than _LONG_CODE (a log
# filter, a command line) are named, not quoted.
_FACT_CHARS = 200
_LONG_CODE = 40
_HEADER = re.compile(r"^\[(.+)\]$")
_CODE_SPAN = re.compile(r"`([^`\n]*)`")
_EMOJI = re.compile(r":[a-z0-9_+-]+:")
_FOOTNOTE = re.compile(r"\s*\[\d+\]")


def tool_result_answer(result: str) -> str:
    """What the simulated model says after a tool answered: one short sentence built from the first fact
    line of the tool result (its `[what of whom]` header names the source; a title line, Slack markup,
    emoji codes and footnote marks are left out; a long code span is called "the query"), marked as
    simulated (`SIMULATED_ANSWER`). Never a raw dump and never a line cut in the middle of a word.

    Args:
        result: the tool message's content, as the bot sends it (`[status of deployment ...]` then lines).

    Returns:
        The answer text, e.g. "This is a simulated answer ... No model ran. Read from the status of
        deployment `production`: gemma4-qr (primary) · `us-east5-a` · ACTIVE (by USER)."
    """
    lines = [line.strip() for line in result.splitlines()]
    source = "the tool result"
    if lines and (header := _HEADER.match(lines[0])):
        source = "the " + header.group(1).split(":", 1)[0].strip()  # "logs of node `n`: what ... about"
        lines = lines[1:]
    while lines and not lines[0]:
        lines = lines[1:]
    if len(lines) > 1 and not lines[1] and _is_title(lines[0]):
        lines = lines[1:]
    fact = next((f for f in map(_fact, lines) if f), "")
    if not fact:
        return f"{SIMULATED_ANSWER} Nothing in {source} fits in a sentence."
    return f"{SIMULATED_ANSWER} Read from {source}: {fact}"


def _is_title(line: str) -> bool:
    """A heading line of a tool result ("TPU / vLLM status", "Queued resource gemma4-old"): short, no
    markup, no figures of its own."""
    return len(line) <= 40 and not any(c in line for c in "*_`:$")


def _fact(line: str) -> str:
    """`line` as one plain sentence ending with a period, or "" if it holds no fact (blank, a code fence,
    no letters) or its first clause is still longer than _FACT_CHARS."""
    if not line or line.startswith("```") or not re.search(r"[A-Za-z]", line):
        return ""
    text = _CODE_SPAN.sub(lambda m: f"`{m.group(1)}`" if len(m.group(1)) <= _LONG_CODE else "the query", line)
    text = _FOOTNOTE.sub("", _EMOJI.sub("", text)).replace("*", "").strip(" _•-")
    text = re.sub(r"\s{2,}", " ", text)
    if len(text) > _FACT_CHARS:
        clause = re.split(r"(?<=[.;])\s|\s\(", text, maxsplit=1)[0].rstrip(".;")
        if len(clause) > _FACT_CHARS:
            return ""
        text = clause
    return text.rstrip(".;:, ") + "."


def gemma_markup(function: dict[str, Any]) -> str:
    """A tool call as Gemma 4 writes it before a tool parser reads it: `<|tool_call>call:NAME{key:<|"|>
    text<|"|>,n:3}<tool_call|>` (Gemma 4 prompt format: strings between `<|"|>` delimiters)."""
    arguments = json.loads(function.get("arguments") or "{}")
    inner = ",".join(
        f'{key}:<|"|>{value}<|"|>' if isinstance(value, str) else f"{key}:{json.dumps(value)}"
        for key, value in arguments.items()
    )
    return f"<|tool_call>call:{function['name']}{{{inner}}}<tool_call|>"


class HTTPError(Exception):
    def __init__(self, status: int, message: str, kind: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.kind = kind


def plan_tools(body: dict[str, Any], messages: list[Any], *, tool_calling: bool) -> dict[str, Any] | None:
    """The tool call to answer with (OpenAI `tool_calls[0]` shape), or None for a text answer.

    Raises:
        HTTPError: 400 for malformed `tools`, an unknown named tool, or `tool_choice: "auto"` while the
            scenario's `tool_calling` is false (vLLM's exact message).
    """
    tools = body.get("tools")
    if not tools:
        return None
    if not isinstance(tools, list) or not all(
        isinstance(t, dict) and isinstance(t.get("function"), dict) and t["function"].get("name")
        for t in tools
    ):
        raise HTTPError(
            400, "tools must be a list of {type: function, function: {name, ...}}", "BadRequestError"
        )
    choice = body.get("tool_choice", "auto")
    if choice == "auto" and not tool_calling:
        raise HTTPError(400, AUTO_TOOL_CHOICE_MESSAGE, "BadRequestError")
    if choice == "none":
        return None
    offered = {str(t["function"]["name"]): t["function"] for t in tools}
    last = messages[-1] if messages and isinstance(messages[-1], dict) else {}
    question = next(
        (
            str(m.get("content") or "")
            for m in reversed(messages)
            if isinstance(m, dict) and m.get("role") == "user"
        ),
        "",
    )
    if isinstance(choice, dict):
        name = str((choice.get("function") or {}).get("name", ""))
        if name not in offered:
            raise HTTPError(400, f"Tool '{name}' has not been passed in `tools`.", "BadRequestError")
    else:
        if choice == "auto" and last.get("role") == "tool":
            return None  # the tool answered: now the final text answer
        words = {w.strip("?!.,:;'\"()").lower() for w in question.split()}
        name = next((n for n, keys in TOOL_KEYWORDS if n in offered and words & set(keys)), "")
        if not name:
            if choice != "required":
                return None
            name = next(iter(offered))
    return {
        "id": f"chatcmpl-tool-{uuid.uuid4().hex}",
        "type": "function",
        "function": {"name": name, "arguments": json.dumps(tool_arguments(offered[name], question))},
    }


_TOOL_RESULT = re.compile(r"\{tool_result(?::(\d+):(\d+))?\}")


def scripted_turn(
    turn: dict[str, Any], body: dict[str, Any], messages: list[Any]
) -> tuple[dict[str, Any] | None, str]:
    """A scripted turn of the simulated model (`VllmSimulator.script_chat`): (the tool call, "") for
    `{"tool": NAME, "arguments": {...}}`, (None, the text) for `{"text": TEXT}`, where `{tool_result}` in
    TEXT is the last tool message's content and `{tool_result:A:B}` its lines A to B (a Python slice).

    Raises:
        HTTPError: 400 for a scripted tool the request does not offer (vLLM's message for a named tool).
    """
    if "tool" in turn:
        name = str(turn["tool"])
        offered = {
            str((t.get("function") or {}).get("name")) for t in body.get("tools") or [] if isinstance(t, dict)
        }
        if name not in offered:
            raise HTTPError(400, f"Tool '{name}' has not been passed in `tools`.", "BadRequestError")
        call = {"name": name, "arguments": json.dumps(turn.get("arguments") or {})}
        return {"id": f"chatcmpl-tool-{uuid.uuid4().hex}", "type": "function", "function": call}, ""
    last = next(
        (
            str(m.get("content") or "")
            for m in reversed(messages)
            if isinstance(m, dict) and m.get("role") == "tool"
        ),
        "",
    )

    def result(match: re.Match[str]) -> str:
        if match.group(1) is None:
            return last
        return "\n".join(last.splitlines()[int(match.group(1)) : int(match.group(2))])

    return None, _TOOL_RESULT.sub(result, str(turn.get("text", "")))


def tool_arguments(function: dict[str, Any], question: str) -> dict[str, Any]:
    """Arguments for a simulated tool call: each required string parameter gets a value from the question
    (a command for `command`, else the first resource-like word with a hyphen, else "")."""
    params = function.get("parameters") or {}
    properties = params.get("properties") or {}
    words = [w.strip("?!.,:;'\"()`") for w in question.split()]
    lowered = [w.lower() for w in words]
    resource = next((w for w in words if re.match(r"^[a-z][a-z0-9]*(-[a-z0-9]+)+$", w)), "")
    args: dict[str, Any] = {}
    for name in params.get("required") or []:
        if (properties.get(name) or {}).get("type", "string") != "string":
            continue
        if name == "command":
            verb = next((w for w in lowered if w in _CHANGE_VERBS), "status")
            args[name] = f"/tpu {verb} {resource}".strip() if resource else f"/vllm {verb}"
        else:
            args[name] = resource
    return args
