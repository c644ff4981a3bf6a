"""What a command handler receives besides its arguments: its `Context` (who asked, where, the backends),
and the `Progress` message a long command updates in place. The runner builds both for each command."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from bot.commands.registry import Invocation, Registry, Role
from bot.services import DEFAULT, Fleet, Services
from bot.slack.gateway import Destination, SlackDeliveryError, SlackGateway
from bot.slack.membership import NOT_MEMBER_ERRORS
from bot.slack.render import Reply, text_reply
from ops.store.state import AuditEntry

log = logging.getLogger(__name__)

# The final state of a progress message whose answer is private (`Reply.ephemeral`): the channel saw the
# progress, the answer itself goes to the person who asked only.
SHOWN_PRIVATELY = ":white_check_mark: Finished; the answer is shown only to the person who asked."


@dataclass(frozen=True)
class Context:
    """Who asked, where, and the backends to use.

    `progress` (when the transport provides one) shows intermediate states in one message updated in
    place; `cancelled` is set when someone with the command's role clicks its Cancel button, whose
    action value is `operation_id`. `confirmed_plan` is the plan fingerprint the confirmation showed
    (empty when the command needed no confirmation). `open_modal` opens a Slack modal; it is set only
    when the request carries a trigger id (slash commands and button clicks). `thread_history` returns the
    earlier messages of the thread a mention came from, oldest first, as chat messages. `fleet` holds
    every deployment (for `/fleet`); `deployment` names the one `services` belongs to. `run_command` runs
    another read-only command for the same user through the runner (role checked, an error as a one-line
    reply), as the chat's tools do; it is set when the runner runs the command. `recent_commands` returns the
    audit lines of the conversation the request came from (its thread, else its channel) of the last hours,
    oldest first (`bot.commands.runner.Runner`). `caller_role` returns the caller's role in this deployment
    (None: no
    role). `for_model` is set when the reply is a chat tool's result, material for the model rather than a
    message to a person typing commands: a handler then leaves out the hints about its own options (e.g.
    `/logs`' "`--query` shows the exact Cloud Logging query") and the runner the deployment footer (the
    chat tool's header names the deployment).
    """

    services: Services
    registry: Registry
    user_id: str
    channel_id: str
    progress: Progress | None = None
    operation_id: str = ""
    cancelled: threading.Event = field(default_factory=threading.Event)
    confirmed_plan: str = ""
    open_modal: Callable[[dict[str, Any]], None] | None = None
    thread_history: Callable[[], list[dict[str, str]]] | None = None
    fleet: Fleet | None = None
    deployment: str = DEFAULT
    run_command: Callable[[Invocation], Reply] | None = None
    recent_commands: Callable[[], list[AuditEntry]] | None = None
    caller_role: Callable[[], Role | None] | None = None
    for_model: bool = False


class Progress:
    """One Slack message updated in place while a long command runs (capacity search, create, benchmarks).

    The first update posts the message (`chat.postMessage`); later ones edit it (`chat.update`), at most one
    edit per `min_interval_s` so a fast loop cannot cause a rate-limit storm (chat.postMessage allows about
    one message per second per channel: docs.slack.dev/apis/web-api/rate-limits). Skipped intermediate
    states are dropped; `finish` always writes the last one, through the gateway's fallbacks (a short message
    and a file when the edit is too long, a new message when the edit is refused), so the message never stays
    on "pending".

    Args:
        slack: the bot's SlackGateway.
        channel_id, thread_ts: where to post (thread_ts None: the channel itself).
        min_interval_s: the smallest time between two edits, seconds.
    """

    def __init__(
        self,
        slack: SlackGateway,
        channel_id: str,
        thread_ts: str | None,
        *,
        min_interval_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._slack = slack
        self._channel = channel_id
        self._thread_ts = thread_ts
        self._min_interval_s = min_interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._last_edit = float("-inf")
        self.ts: str | None = None
        self.refused: str | None = None  # Slack's error when the bot is not in the channel (no more edits)
        self._finished: list[Callable[[str | None], None]] = []

    @property
    def channel_id(self) -> str:
        return self._channel

    @property
    def thread_ts(self) -> str | None:
        return self._thread_ts

    def when_finished(self, callback: Callable[[str | None], None]) -> None:
        """Call `callback(ts)` once `finish` has written the final reply: the ts of the message showing it,
        or None when it went another way (an ephemeral or direct message, not editable). Its exceptions are
        logged."""
        self._finished.append(callback)

    def due(self) -> bool:
        """Whether `update` would write now (no edit within `min_interval_s`, the channel not refusing):
        a caller can skip building a reply that would be dropped."""
        if self.refused:
            return False
        return self.ts is None or self._clock() - self._last_edit >= self._min_interval_s

    def update(self, reply: Reply) -> None:
        """Show `reply` now, or drop it if the last edit was under `min_interval_s` ago."""
        with self._lock:
            if self.refused or (
                self.ts is not None and self._clock() - self._last_edit < self._min_interval_s
            ):
                return
            try:
                self._write(reply)
            except SlackDeliveryError as exc:
                self.refused = exc.reason if exc.reason in NOT_MEMBER_ERRORS else None
                log.warning("progress message not updated: %s", exc.reason)

    def finish(
        self,
        reply: Reply,
        *,
        user_id: str = "",
        filename: str = "answer.txt",
        narrower: Callable[[float], str | None] | None = None,
    ) -> None:
        """Show the final `reply` (always written, with its files, each uploaded once): an edit of the
        progress message, or a new message (the progress message then closed, never left pending), or (for
        `user_id`) an ephemeral or direct message when the channel refuses both (`SlackGateway.finish`).
        `narrower` asks for part of the answer (`Destination.narrower`).

        A private reply (`reply.ephemeral`: for `user_id` only) never replaces the message the channel sees:
        that one is closed with a line saying so, and the reply goes to `user_id` ephemerally (its files to
        their DM with the bot, `bot.slack.gateway`)."""
        with self._lock:
            to = Destination(self._channel, user_id, self._thread_ts, narrower=narrower)
            private = reply.ephemeral
            if private:
                self._slack.deliver(reply, replace(to, ephemeral=True), filename=filename)
                reply = text_reply(SHOWN_PRIVATELY)
            shown = self._slack.finish(self.ts, reply, to, filename=filename)
            self.ts = shown or self.ts
            self._last_edit = self._clock()
            shown = None if private else shown
        for callback in self._finished:
            try:
                callback(shown)
            except Exception:  # what runs after the answer must not take the answer back
                log.exception("progress: a finish callback failed")

    def _write(self, reply: Reply) -> None:
        """Show an intermediate state: no files (the final reply has them)."""
        if self.ts is None:
            self.ts = self._slack.post(self._channel, reply, self._thread_ts, with_files=False)
        else:
            self.ts = self._slack.update(
                self._channel, self.ts, reply, thread_ts=self._thread_ts, with_files=False
            )
        self._last_edit = self._clock()
