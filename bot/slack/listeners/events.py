"""@mentions: the same words as the slash commands, usable inside threads (slash commands are not). A mention
is a command only when it parses as one, or is a typo of one ("tpu lst", "--zon"); anything else, words
that merely start with a command word included ("vllm has been starting for 45 minutes, is it stuck?"), is a
question for Gemma (`gemma chat`)."""

from __future__ import annotations

import logging
import shlex
import threading
from collections import OrderedDict
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from slack_bolt import App

from bot.commands.registry import NotACommand, Registry, UsageError, normalize
from bot.commands.runner import Origin, Runner
from bot.slack.render import text_reply
from ops.store.state import Store

log = logging.getLogger(__name__)


class SeenEvents:
    """Event ids already handled, so a retried delivery (Slack retries when it did not get our 200 in
    time, with the same `event_id` and an `X-Slack-Retry-Num` header) or a duplicate is not answered twice.

    Without a store: in memory, bounded (the oldest ids are forgotten); right for a single process. With a
    store: in its processed-events table (`Store.first_time_event`), so replicas sharing the database
    dedupe each other's events; ids older than `keep` are pruned every `prune_every` new events. If the
    database fails, the in-memory set decides (better a rare duplicate than a dropped request).
    """

    def __init__(
        self,
        limit: int = 10_000,
        *,
        store: Store | None = None,
        now: Callable[[], datetime] | None = None,
        keep: timedelta = timedelta(days=1),
        prune_every: int = 1000,
    ) -> None:
        self._ids: OrderedDict[str, None] = OrderedDict()
        self._limit = limit
        self._lock = threading.Lock()
        self._store = store
        self._now = now or (lambda: datetime.now(UTC))
        self._keep = keep
        self._prune_every = prune_every
        self._added = 0

    def first_time(self, event_id: str) -> bool:
        if self._store is not None and event_id:
            try:
                return self._first_time_in_store(self._store, event_id)
            except Exception:
                log.exception("could not check event %s in the state store; deciding in memory", event_id)
        with self._lock:
            if event_id in self._ids:
                return False
            self._ids[event_id] = None
            if len(self._ids) > self._limit:
                self._ids.popitem(last=False)
            return True

    def _first_time_in_store(self, store: Store, event_id: str) -> bool:
        now = self._now()
        first = store.first_time_event(event_id, now)
        if first:
            with self._lock:
                self._added += 1
                prune = self._added % self._prune_every == 0
            if prune:
                store.forget_events(now - self._keep)
        return first


def register(app: App, registry: Registry, runner: Runner) -> None:
    services = runner.services
    seen = SeenEvents(store=services.store, now=services.now)

    def on_mention(body: dict[str, Any], event: dict[str, Any]) -> None:
        if not seen.first_time(str(body.get("event_id") or "")):
            return
        origin = Origin(
            user_id=event.get("user", ""),
            channel_id=event.get("channel", ""),
            thread_ts=event.get("thread_ts") or event.get("ts"),
            message_ts=event.get("ts"),
        )
        text = event.get("text")
        typed = text if isinstance(text, str) else ""
        try:
            invocation = registry.parse(typed)
        except UsageError as exc:
            question = normalize(typed)
            if not question or not _is_question(question, exc, registry):
                runner.deliver(text_reply(str(exc)), origin)
                return
            # Not a command: a question for Gemma, answered with the thread as context.
            try:
                invocation = registry.parse(f"gemma chat {shlex.quote(question)}")
            except UsageError as again:  # e.g. too long for a question as well
                runner.deliver(text_reply(str(again)), origin)
                return
        runner.submit(invocation, origin)

    app.event("app_mention")(on_mention)


def _is_question(text: str, error: UsageError, registry: Registry) -> bool:
    """Whether a mention that did not parse is a question rather than a mistyped command: it does not read
    as a command line at all (`NotACommand`), it asks ("?"), or it does not split like one and does not
    start with a command word ("what's the bill" has an odd quote)."""
    first = text.split()[0].lstrip("/").lower()
    return isinstance(error, NotACommand) or "?" in text or first not in {*registry.groups(), "help"}
