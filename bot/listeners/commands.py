"""Slash commands: `/tpu ...`, `/vllm ...`, one per registry group.

The listener parses, acks, and hands the work to the runner. Bad input is answered in the ack itself (an
ephemeral usage line); nothing else happens for it.
"""

from __future__ import annotations

import re
from typing import Any

from slack_bolt import Ack, App

from bot.commands import Registry, UsageError, echo
from bot.runner import Origin, Runner


def register(app: App, registry: Registry, runner: Runner) -> None:
    # Case-insensitive, like the words after it: `/TPU LIST` is `/tpu list`, not Bolt's "unhandled" hint.
    for group in registry.groups():
        app.command(re.compile(f"^/{re.escape(group)}$", re.IGNORECASE))(_listener(group, registry, runner))


def _listener(group: str, registry: Registry, runner: Runner) -> Any:
    def on_command(ack: Ack, command: dict[str, Any]) -> None:
        raw = command.get("text")
        typed = raw if isinstance(raw, str) else ""
        try:
            invocation = registry.parse(f"{group} {typed}")
        except UsageError as exc:
            ack(text=str(exc))
            return
        ack(text=f":hourglass_flowing_sand: `{echo(f'/{group} {typed.strip()}'.strip())}` …")
        origin = Origin(
            user_id=command.get("user_id", ""),
            channel_id=command.get("channel_id", ""),
            response_url=command.get("response_url"),
            trigger_id=command.get("trigger_id"),
        )
        if invocation.command.opens_form:  # views.open must beat the trigger_id's 3 s, not queue for a worker
            runner.run_now(invocation, origin)
            return
        runner.submit(invocation, origin)

    on_command.__name__ = f"on_{group}_command"
    return on_command
