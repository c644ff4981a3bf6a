"""Runs commands on the bot's own worker pool after the ack, and delivers the outcome to Slack.

The Slack listener only parses and acks (well inside the 3 s window); the command itself runs here. Every
outcome reaches the user: the reply, a one-line `OpsError` with its hint, or for an unexpected exception a
short message with a reference id (the traceback stays in the bot's log). Slack 429s are retried after
`Retry-After` by slack_sdk's retry handlers, so a rate-limited reply is delayed, not dropped.
"""

from __future__ import annotations

import logging
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import (
    ConnectionErrorRetryHandler,
    RateLimitErrorRetryHandler,
    ServerErrorRetryHandler,
)
from slack_sdk.http_retry.handler import RetryHandler
from slack_sdk.webhook import WebhookClient

from bot.auth import Authorizer
from bot.commands import Invocation, Registry
from bot.context import Context
from bot.render import Reply, error_reply, fit
from bot.services import Services
from ops.errors import OpsError

log = logging.getLogger(__name__)


def retry_handlers() -> list[RetryHandler]:
    """Retries for every Slack call: connection errors, 429 (honours Retry-After), 5xx."""
    return [
        ConnectionErrorRetryHandler(max_retry_count=2),
        RateLimitErrorRetryHandler(max_retry_count=5),
        ServerErrorRetryHandler(max_retry_count=2),
    ]


@dataclass(frozen=True)
class Origin:
    """Where a command came from and where its answer goes.

    A slash command answers through its `response_url`; a mention answers in the thread `thread_ts`.
    """

    user_id: str
    channel_id: str
    response_url: str | None = None
    thread_ts: str | None = None


class Runner:
    """The worker pool. `submit` returns at once; the command runs and answers in the background."""

    def __init__(self, services: Services, registry: Registry, client: WebClient, authorizer: Authorizer):
        self._services = services
        self._registry = registry
        self._client = client
        self._authorizer = authorizer
        self._pool = ThreadPoolExecutor(
            max_workers=services.settings.worker_threads, thread_name_prefix="command"
        )

    def submit(self, invocation: Invocation, origin: Origin) -> None:
        self._pool.submit(self._run, invocation, origin)

    def shutdown(self) -> None:
        self._pool.shutdown(wait=True, cancel_futures=False)

    def _run(self, invocation: Invocation, origin: Origin) -> None:
        started = time.monotonic()
        name = invocation.command.name
        try:
            self._authorizer.check(origin.user_id, invocation.command)
            ctx = Context(self._services, self._registry, origin.user_id, origin.channel_id)
            reply = invocation.command.func(ctx, **invocation.args)
            outcome = "ok"
        except OpsError as exc:
            reply = error_reply(f"`{name}`: {exc.message}", exc.hint)
            outcome = f"error: {type(exc).__name__}"
        except Exception:
            ref = uuid.uuid4().hex[:8]
            log.exception("command %r failed (ref %s)", name, ref)
            reply = error_reply(f"`{name}` failed unexpectedly (ref {ref})", "the bot's log has the details")
            outcome = "crash"
        log.info(
            "command=%r user=%s channel=%s outcome=%s duration_s=%.3f",
            name,
            origin.user_id,
            origin.channel_id,
            outcome,
            time.monotonic() - started,
        )
        self.deliver(fit(reply, filename=name.replace(" ", "-") + ".txt"), origin)

    def deliver(self, reply: Reply, origin: Origin) -> None:
        """Post a reply where the command came from; if Slack rejects the blocks, post the text alone."""
        try:
            self._post(reply, origin, with_blocks=True)
        except SlackApiError as exc:
            log.warning("Slack rejected the reply (%s); sending text only", exc.response.get("error"))
            try:
                self._post(reply, origin, with_blocks=False)
            except SlackApiError as again:
                log.error("could not deliver reply: %s", again.response.get("error"))
        for attachment in reply.files:
            try:
                self._client.files_upload_v2(
                    channel=origin.channel_id,
                    thread_ts=origin.thread_ts,
                    content=attachment.content,
                    filename=attachment.filename,
                    title=attachment.title,
                )
            except SlackApiError as exc:
                log.error("could not upload %s: %s", attachment.filename, exc.response.get("error"))

    def _post(self, reply: Reply, origin: Origin, *, with_blocks: bool) -> None:
        blocks = reply.blocks if with_blocks else None
        if origin.response_url:
            response = WebhookClient(origin.response_url, retry_handlers=retry_handlers()).send(
                text=reply.text, blocks=blocks, response_type="in_channel"
            )
            if response.status_code != 200:
                raise SlackApiError(f"response_url answered {response.status_code}", {"error": response.body})
            return
        self._client.chat_postMessage(
            channel=origin.channel_id, thread_ts=origin.thread_ts, text=reply.text, blocks=blocks
        )
