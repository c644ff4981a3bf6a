"""@mentions: the same words as the slash commands, and usable inside threads (slash commands are not)."""

from __future__ import annotations

from typing import Any

from slack_bolt import App

from bot.commands import Registry, UsageError
from bot.render import text_reply
from bot.runner import Origin, Runner


def register(app: App, registry: Registry, runner: Runner) -> None:
    def on_mention(event: dict[str, Any]) -> None:
        origin = Origin(
            user_id=event.get("user", ""),
            channel_id=event.get("channel", ""),
            thread_ts=event.get("thread_ts") or event.get("ts"),
        )
        try:
            invocation = registry.parse(event.get("text", ""))
        except UsageError as exc:
            runner.deliver(text_reply(str(exc)), origin)
            return
        runner.submit(invocation, origin)

    app.event("app_mention")(on_mention)
