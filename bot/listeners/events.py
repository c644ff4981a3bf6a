"""@mentions: the same words as the slash commands, and usable inside threads (slash commands are not)."""

from __future__ import annotations

import threading
from collections import OrderedDict
from typing import Any

from slack_bolt import App

from bot.commands import Registry, UsageError
from bot.render import text_reply
from bot.runner import Origin, Runner


class SeenEvents:
    """Event ids already handled, so a retried delivery (Slack retries when it did not get our 200 in
    time, with the same `event_id`) is not answered twice. Bounded: the oldest ids are forgotten."""

    def __init__(self, limit: int = 10_000) -> None:
        self._ids: OrderedDict[str, None] = OrderedDict()
        self._limit = limit
        self._lock = threading.Lock()

    def first_time(self, event_id: str) -> bool:
        with self._lock:
            if event_id in self._ids:
                return False
            self._ids[event_id] = None
            if len(self._ids) > self._limit:
                self._ids.popitem(last=False)
            return True


def register(app: App, registry: Registry, runner: Runner) -> None:
    seen = SeenEvents()

    def on_mention(body: dict[str, Any], event: dict[str, Any]) -> None:
        if not seen.first_time(str(body.get("event_id") or "")):
            return
        origin = Origin(
            user_id=event.get("user", ""),
            channel_id=event.get("channel", ""),
            thread_ts=event.get("thread_ts") or event.get("ts"),
        )
        text = event.get("text")
        try:
            invocation = registry.parse(text if isinstance(text, str) else "")
        except UsageError as exc:
            runner.deliver(text_reply(str(exc)), origin)
            return
        runner.submit(invocation, origin)

    app.event("app_mention")(on_mention)
