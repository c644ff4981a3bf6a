"""One Slack message updated in place while a long command runs (capacity search, create, benchmarks).

The first update posts the message (`chat.postMessage`); later ones edit it (`chat.update`), at most one edit
per `min_interval_s` so a fast loop cannot cause a rate-limit storm (chat.postMessage allows about one message
per second per channel: docs.slack.dev/apis/web-api/rate-limits). Skipped intermediate states are dropped;
`finish` always writes the last one.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from bot.membership import not_member
from bot.render import Reply, fit, scrub

log = logging.getLogger(__name__)


class Progress:
    """A message that shows a command's progress.

    Args:
        client: the bot's WebClient.
        channel_id, thread_ts: where to post (thread_ts None: the channel itself).
        min_interval_s: the smallest time between two edits, seconds.
    """

    def __init__(
        self,
        client: WebClient,
        channel_id: str,
        thread_ts: str | None,
        *,
        min_interval_s: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._client = client
        self._channel = channel_id
        self._thread_ts = thread_ts
        self._min_interval_s = min_interval_s
        self._clock = clock
        self._lock = threading.Lock()
        self._last_edit = float("-inf")
        self.ts: str | None = None
        self.refused: str | None = None  # Slack's error when the bot may not post in the channel

    def update(self, reply: Reply) -> None:
        """Show `reply` now, or drop it if the last edit was under `min_interval_s` ago."""
        with self._lock:
            if self.ts is not None and self._clock() - self._last_edit < self._min_interval_s:
                return
            self._write(reply)

    def finish(self, reply: Reply) -> None:
        """Show the final `reply` (always written)."""
        with self._lock:
            self._write(reply)

    def _write(self, reply: Reply) -> None:
        if self.refused:  # not in the channel: the runner reports it once, instead of retrying each edit
            return
        reply = scrub(fit(reply))
        try:
            if self.ts is None:
                response = self._client.chat_postMessage(
                    channel=self._channel, thread_ts=self._thread_ts, text=reply.text, blocks=reply.blocks
                )
                self.ts = str(response["ts"])
            else:
                self._client.chat_update(
                    channel=self._channel, ts=self.ts, text=reply.text, blocks=reply.blocks
                )
        except SlackApiError as exc:
            self.refused = not_member(exc)
            log.warning("progress message not updated: %s", exc.response.get("error"))
        self._last_edit = self._clock()
