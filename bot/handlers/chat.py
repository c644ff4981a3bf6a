"""`@gemma-bot <question>`: Gemma answers with the thread as context and read-only tools.

The tools run the bot's own viewer commands (status, list, describe, metrics, logs, cost) and hand their text
to the model. The model never acts: when the question asks for a change, the reply offers the exact command
behind a button, and that command then goes through the usual role check and Confirm step.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable, Mapping
from typing import Any

from bot.commands import Param, Role, registry
from bot.context import Context
from bot.render import Reply, blocks_reply, context, section
from llm.agent import Tool, answer
from llm.tokens import PromptCounter
from ops.errors import OpsError

# name -> (description, JSON schema of the arguments, the viewer command line they become)
_TOOLS: dict[str, tuple[str, dict[str, Any], Callable[[dict[str, Any]], str]]] = {
    "status": (
        "Dashboard: queued resources, nodes, vLLM health, model and metrics",
        {},
        lambda a: "tpu status",
    ),
    "list": ("Queued resources and nodes in the watched zones", {}, lambda a: "tpu list"),
    "describe": (
        "Everything about one queued resource",
        {"name": {"type": "string", "description": "queued resource name"}},
        lambda a: f"tpu describe {shlex.quote(str(a.get('name', '')))}",
    ),
    "metrics": (
        "vLLM metrics summary: load, KV cache, prefix cache, latencies",
        {},
        lambda a: "vllm metrics",
    ),
    "logs": (
        "Recent ERROR log entries of the TPU VMs",
        {"since": {"type": "string", "description": "how far back, e.g. 30m, 2h"}},
        lambda a: f"logs --severity ERROR --since {shlex.quote(str(a.get('since') or '1h'))}",
    ),
    "cost": ("Cost estimate and the live burn of running queued resources", {}, lambda a: "tpu cost"),
}


def read_only_tools(ctx: Context, question: str = "") -> Mapping[str, Tool]:
    """The tools, each running one viewer command (parsed and validated like typed input). A `describe`
    called without a name gets the one queued resource the question names, so its result belongs to the
    resource asked about."""

    def runner(line_of: Callable[[dict[str, Any]], str], needs_name: bool) -> Callable[..., str]:
        def run(**arguments: Any) -> str:
            if needs_name and not str(arguments.get("name") or "").strip():
                arguments = {**arguments, "name": _named_resource(ctx, question)}
            invocation = ctx.registry.parse(line_of(arguments))
            command = invocation.command
            if command.role != Role.VIEWER or command.changes_infra:
                return "error: not a read-only command"
            try:
                reply: Reply = command.func(ctx, **invocation.args)
            except OpsError as exc:
                return f"error: {exc.message}"
            return reply.text

        return run

    return {
        name: Tool(
            name, description, {"type": "object", "properties": props}, runner(line_of, "name" in props)
        )
        for name, (description, props, line_of) in _TOOLS.items()
    }


def _named_resource(ctx: Context, question: str) -> str:
    """The watched queued resource whose name the question contains (the longest, if several), or ""."""
    try:
        listing = ctx.services.tpu.list_queued_resources(ctx.services.settings.tpu_zones)
    except OpsError:
        return ""
    words = set(re.findall(r"[a-z0-9-]+", question.lower()))
    named = sorted((qr.name for qr in listing.resources if qr.name in words), key=len)
    return named[-1] if named else ""


def suggestion_button(command: str) -> dict[str, Any]:
    """A button that runs the suggested command through the normal role check and confirmation."""
    return {
        "type": "actions",
        "block_id": "suggestion",
        "elements": [
            {
                "type": "button",
                "action_id": "run_suggested",
                "text": {"type": "plain_text", "text": f"Review {command}"[:75]},
                "value": command,
            }
        ],
    }


@registry.command(
    "gemma chat",
    "Ask about the deployment; Gemma may look things up with read-only tools (mention the bot in a thread)",
    Param("question", "the question", required=True, rest=True, metavar="QUESTION"),
)
def gemma_chat(ctx: Context, question: str) -> Reply:
    history = ctx.thread_history() if ctx.thread_history else []
    gemma, _ = ctx.services.gemma()
    # The served model's tokenizer (vLLM /tokenize) decides how much of the thread fits its context.
    counter = PromptCounter(gemma.base_url, gemma.model, api_key=gemma.openai.api_key)
    with gemma:
        result = answer(
            question,
            history,
            gemma.openai,
            read_only_tools(ctx, question),
            model=gemma.model,
            counter=counter,
        )
    blocks = [section(result.text.strip()[:2900] or "(no answer)")]
    used = [call.name for call in result.tool_calls_made if call.name != "suggest_command"]
    notes = []
    if used:
        notes.append("looked at: " + ", ".join(dict.fromkeys(used)))
    if not result.used_tools:
        notes.append(
            "answered without tools: the server does not accept tools (start vLLM with "
            "--enable-auto-tool-choice --tool-call-parser gemma4)"
        )
    if result.suggested_command:
        blocks.append(section(f"To do that: `{result.suggested_command}`. I never act by myself:"))
        blocks.append(suggestion_button(result.suggested_command))
    if notes:
        blocks.append(context("; ".join(notes)))
    return blocks_reply(blocks)
