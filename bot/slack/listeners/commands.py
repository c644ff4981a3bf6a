"""Slash commands: `/tpu ...`, `/vllm ...`, one per registry group.

The listener parses, acks, and hands the work to the runner. Bad input is answered in the ack itself (an
ephemeral usage line); nothing else happens for it.

A slash command runs once: Slack gives each invocation its own `trigger_id`, and a signed request is valid
for five minutes, so a request replayed in that time (same body, same signature) is recognised by its
trigger id and only acked. The ack checks the ids this process has seen (memory only: a write to the state
database on the ack path made every ack of a burst queue for the database's write lock); the worker then
claims the id in the state store (`bot.slack.listeners.events.SeenEvents`, like event ids) before running
the command, so of replicas sharing the database only the first runs it.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from slack_bolt import Ack, App

from bot.commands.registry import Registry, UsageError, echo
from bot.commands.runner import Origin, Runner
from bot.slack.listeners.events import SeenEvents

REPLAYED = "This command was already received (same trigger_id): it runs once."


def register(app: App, registry: Registry, runner: Runner) -> None:
    seen_here = SeenEvents()
    claimed = SeenEvents(store=runner.services.store, now=runner.services.now)
    # Case-insensitive, like the words after it: `/TPU LIST` is `/tpu list`, not Bolt's "unhandled" hint.
    # (Bolt matches a command name with a Python `re.Pattern` only; the name is one short word.)
    for group in registry.groups():
        listener = _listener(group, registry, runner, seen_here, claimed)
        app.command(re.compile(f"^/{re.escape(group)}$", re.IGNORECASE))(listener)


def _listener(
    group: str, registry: Registry, runner: Runner, seen_here: SeenEvents, claimed: SeenEvents
) -> Any:
    def on_command(ack: Ack, command: dict[str, Any]) -> None:
        trigger_id = command.get("trigger_id")
        key = _seen_key(trigger_id) if isinstance(trigger_id, str) and trigger_id else None
        if key is not None and not seen_here.first_time(key):
            ack(text=REPLAYED)
            return
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
            if key is None or claimed.first_time(key):
                runner.run_now(invocation, origin)
            return
        runner.submit(invocation, origin, first=None if key is None else lambda: claimed.first_time(key))

    on_command.__name__ = f"on_{group}_command"
    return on_command


def _seen_key(trigger_id: str) -> str:
    """The processed-events key of a slash command: its trigger id (a digest when longer than the column)."""
    if len(trigger_id) > 100:
        trigger_id = hashlib.sha256(trigger_id.encode()).hexdigest()
    return f"slash:{trigger_id}"
