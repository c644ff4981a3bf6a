"""SIMULATED Slack: the Web API methods the bot calls, plus `response_url` webhooks, on 127.0.0.1.

It records every message, checks the bot token, enforces Slack's block limits the way Slack does (so a
renderer bug shows as `invalid_blocks` / `msg_too_long` here, not first in production), can answer 429
`ratelimited` with `Retry-After`, and renders messages as text for the console.

It also enforces, on by default, the limits a real workspace puts on a bot (each rule's docstring names
its public source); a test that needs the old leniency relaxes one rule by name (`relax("membership")`):

    membership     posting, uploading and reading a thread need the bot in the channel (`not_in_channel`
                   for a public channel, `channel_not_found` for a private or unknown one and a DM the bot
                   is not part of); a user id opens the app's DM and is always accepted, and so is the
                   DM id `conversations.open` returns (which `files.completeUploadExternal` needs: it
                   refuses a user id as `channel_id`)
    response_url   a `response_url` takes at most 5 posts within 30 minutes (then HTTP 404 `used_url` /
                   `expired_url`)
    trigger_id     a `trigger_id` opens one view within 3 s of the interaction (`expired_trigger_id`,
                   `exchanged_trigger_id`; an id Slack never issued is `invalid_trigger_id`)
    block_limits   cumulative block text (`msg_blocks_too_long`), empty texts, button texts, fields and
                   context elements, view block and title limits
    replies_paging `conversations.replies` honours `limit` and pages with `cursor` / `has_more`

`workspace` (sim/slack_workspace.py) adds archived channels (`is_archived`), the token's scopes
(`missing_scope` with `needed` / `provided`) and a revoked token (`token_revoked`).
"""

from __future__ import annotations

import base64
import binascii
import itertools
import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qsl, urlparse

from sim.http_server import SimHttpServer
from sim.slack_app import SlackApp
from sim.slack_workspace import Workspace

BOT_USER_ID = "U0BOT00001"
TEAM_ID = "T0DEMO0001"

# Limits Slack enforces (docs.slack.dev/reference/block-kit/blocks; slack_sdk/models/blocks/blocks.py).
MAX_BLOCKS = 50
MAX_SECTION_TEXT = 3000
MAX_HEADER_TEXT = 150
MAX_ACTIONS_ELEMENTS = 25
MAX_TEXT = 40000
MAX_FIELDS = 10  # SectionBlock.fields_max_length (slack_sdk/models/blocks/blocks.py)
MAX_FIELD_TEXT = 2000  # each section field (same source)
MAX_CONTEXT_ELEMENTS = 10  # ContextBlock.elements_max_length (same source)
MAX_BUTTON_TEXT = 75  # ButtonElement.text_max_length (slack_sdk/models/blocks/block_elements.py)
# Cumulative block text: Slack answers `msg_blocks_too_long` at about 13,200 characters even when every
# block is within its own limit (slackapi/bolt-js#2509); the simulator refuses above 12,000 (the figure of
# the markdown block, docs.slack.dev/reference/block-kit/blocks/markdown-block) to stay on the safe side.
MAX_BLOCKS_TEXT = 12000
MAX_VIEW_BLOCKS = 100  # views: blocks_max_length (slack_sdk/models/views/__init__.py)
MAX_VIEW_TITLE = 24  # View.title_max_length, also submit/close (same source)

# https://docs.slack.dev/interactivity/handling-user-interaction: "You can use a response_url five times
# within 30 minutes"; a trigger_id "expires in 3 seconds" and can be exchanged for one view only.
RESPONSE_URL_USES = 5
RESPONSE_URL_TTL_S = 30 * 60
TRIGGER_TTL_S = 3.0

# files.completeUploadExternal's `channel_id`: a channel, private channel or DM id, not a user id (the
# pattern in Slack's `invalid_arguments` answer, quoted in slackapi/bolt-js#2115).
UPLOAD_CHANNEL_ID = "^[CGDZ][A-Z0-9]{8,}$"

RULES = ("membership", "response_url", "trigger_id", "block_limits", "replies_paging")


@dataclass
class Message:
    """One message the bot sent: where, how (post, update, ephemeral, response, file), and what."""

    kind: str
    channel: str
    ts: str
    text: str
    blocks: list[dict[str, Any]] = field(default_factory=list)
    thread_ts: str | None = None
    response_id: str | None = None
    filename: str | None = None
    content: bytes = b""
    ephemeral: bool = False
    replaces: bool = False
    view: dict[str, Any] | None = None
    user: str | None = None  # who typed a "user" message (conversations.replies gives it as `user`)

    @property
    def in_progress(self) -> bool:
        """Whether this is an intermediate state (an hourglass, or a running operation's Cancel button)."""
        hourglass = ":hourglass_flowing_sand:"
        texts = [self.text] + [render_block(block).strip() for block in self.blocks]
        return any(text.startswith(hourglass) for text in texts) or any(
            element.get("action_id") == "cancel_operation"
            for block in self.blocks
            if block.get("type") == "actions"
            for element in block.get("elements", [])
        )

    def buttons(self) -> list[tuple[str, dict[str, Any]]]:
        """(block_id, element) of every button in the message."""
        return [
            (str(block.get("block_id", "")), element)
            for block in self.blocks
            if block.get("type") == "actions"
            for element in block.get("elements", [])
            if element.get("type") == "button"
        ]

    def render(self) -> str:
        """The message as console text."""
        dm = "(in your DM with the app) " if self.channel[:1] in ("U", "W", "D") else ""
        if self.kind == "file":
            return f"{dm}[file {self.filename}: {len(self.content):,} bytes]"
        if self.kind == "modal":
            inputs = [b.get("label", {}).get("text", "") for b in self.blocks if b.get("type") == "input"]
            return f"[modal {self.text!r} opened: fields {', '.join(inputs)}; type `submit VALUE`]"
        body = (
            "\n".join(filter(None, (render_block(block) for block in self.blocks)))
            if self.blocks
            else self.text
        )
        body = unescape(body)
        if self.ephemeral:
            return "(only visible to you) " + body
        if self.kind == "post" and dm:
            return dm + body
        if self.kind == "update" or self.replaces:
            return "(updated) " + body
        return body


def unescape(text: str) -> str:
    """Slack's three entities as the characters a Slack client shows (`&lt;` -> `<`)."""
    return text.replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def render_block(block: dict[str, Any]) -> str:
    """One Block Kit block as plain text (header, section, context, divider, actions)."""
    kind = block.get("type")
    if kind == "header":
        return f"== {block['text']['text']} =="
    if kind == "divider":
        return "-" * 40
    if kind == "section":
        parts = [block.get("text", {}).get("text", "")]
        parts += [f.get("text", "") for f in block.get("fields", [])]
        return "\n".join(p for p in parts if p)
    if kind == "context":  # Slack sets the whole block apart (small grey text): every line is indented
        text = " ".join(e.get("text", "") for e in block.get("elements", []))
        return "\n".join("  " + line for line in text.split("\n"))
    if kind == "actions":
        return " ".join(f"[{e.get('text', {}).get('text', '?')}]" for e in block.get("elements", []))
    return f"[{kind} block]"


def block_errors(blocks: list[dict[str, Any]], *, strict: bool = True) -> list[str]:
    """What Slack would reject in these blocks, in its own wording; empty when they are acceptable.

    `strict` adds the limits the simulator once left out (empty texts, button texts, fields and context
    elements); the cumulative text limit is `blocks_too_long`, a different error code.
    """
    errors: list[str] = []
    if len(blocks) > MAX_BLOCKS:
        errors.append(f"no more than {MAX_BLOCKS} items allowed [json-pointer:/blocks]")
    for index, block in enumerate(blocks):
        text = block.get("text", {}).get("text", "") if isinstance(block.get("text"), dict) else ""
        limit = MAX_HEADER_TEXT if block.get("type") == "header" else MAX_SECTION_TEXT
        if len(text) > limit:
            errors.append(
                f"must be less than {limit + 1} characters [json-pointer:/blocks/{index}/text/text]"
            )
        if block.get("type") == "actions" and len(block.get("elements", [])) > MAX_ACTIONS_ELEMENTS:
            errors.append(
                f"no more than {MAX_ACTIONS_ELEMENTS} items allowed [json-pointer:/blocks/{index}/elements]"
            )
        if strict:
            errors += _strict_block_errors(block, index)
    return errors


def _strict_block_errors(block: dict[str, Any], index: int) -> list[str]:
    """Slack's per-element limits (slack_sdk/models/blocks: the *_max_length constants, which mirror the
    Block Kit reference at docs.slack.dev/reference/block-kit)."""
    errors: list[str] = []
    where = f"/blocks/{index}"
    kind = block.get("type")
    text = block.get("text")
    if kind in ("section", "header") and isinstance(text, dict) and not str(text.get("text", "")):
        errors.append(f"must be more than 0 characters [json-pointer:{where}/text/text]")
    if kind == "section":
        if "text" not in block and not block.get("fields"):
            errors.append(f"must provide either text or fields [json-pointer:{where}]")
        fields = block.get("fields") or []
        if len(fields) > MAX_FIELDS:
            errors.append(f"no more than {MAX_FIELDS} items allowed [json-pointer:{where}/fields]")
        for n, item in enumerate(fields):
            if len(str(item.get("text", ""))) > MAX_FIELD_TEXT:
                errors.append(
                    f"must be less than {MAX_FIELD_TEXT + 1} characters "
                    f"[json-pointer:{where}/fields/{n}/text]"
                )
    if kind == "context":
        elements = block.get("elements") or []
        if len(elements) > MAX_CONTEXT_ELEMENTS:
            errors.append(
                f"no more than {MAX_CONTEXT_ELEMENTS} items allowed [json-pointer:{where}/elements]"
            )
        for n, element in enumerate(elements):
            if element.get("type") in ("mrkdwn", "plain_text") and not str(element.get("text", "")):
                errors.append(f"must be more than 0 characters [json-pointer:{where}/elements/{n}/text]")
    if kind == "actions":
        for n, element in enumerate(block.get("elements") or []):
            label = str((element.get("text") or {}).get("text", ""))
            if element.get("type") == "button" and not 0 < len(label) <= MAX_BUTTON_TEXT:
                bound = "more than 0" if not label else f"less than {MAX_BUTTON_TEXT + 1}"
                errors.append(f"must be {bound} characters [json-pointer:{where}/elements/{n}/text/text]")
    return errors


def blocks_text_length(blocks: list[dict[str, Any]]) -> int:
    """The characters of text in all blocks together (what `msg_blocks_too_long` counts)."""
    total = 0
    for block in blocks:
        text = block.get("text")
        if isinstance(text, dict):
            total += len(str(text.get("text", "")))
        for item in (block.get("fields") or []) + (block.get("elements") or []):
            inner = item.get("text") if isinstance(item, dict) else None
            total += len(str(inner.get("text", ""))) if isinstance(inner, dict) else len(str(inner or ""))
    return total


def view_errors(view: dict[str, Any]) -> list[str]:
    """What `views.open` / `views.publish` refuse in a view (slack_sdk/models/views: at most 100 blocks,
    title, submit and close texts at most 24 characters)."""
    errors: list[str] = []
    blocks = view.get("blocks") or []
    if len(blocks) > MAX_VIEW_BLOCKS:
        errors.append(f"no more than {MAX_VIEW_BLOCKS} items allowed [json-pointer:/view/blocks]")
    for key in ("title", "submit", "close"):
        text = str((view.get(key) or {}).get("text", ""))
        if len(text) > MAX_VIEW_TITLE:
            errors.append(
                f"must be less than {MAX_VIEW_TITLE + 1} characters [json-pointer:/view/{key}/text]"
            )
    for index, block in enumerate(blocks):
        if block.get("type") != "input":
            errors += [
                e.replace("[json-pointer:/blocks", "[json-pointer:/view/blocks")
                for e in _strict_block_errors(block, index)
            ]
    return errors


class SlackSimulator:
    """The simulated Slack workspace.

    Args:
        bot_token: the token the bot must present (`Authorization: Bearer ...`).
        host, port: where to listen (port 0 picks a free one).
        channels: the conversations the bot is a member of (`join` adds more).
        relax: names of RULES to leave unenforced (only to test how the product handles their absence).
        clock: monotonic seconds, for response_url and trigger_id lifetimes (`advance` moves it on).
        app_token: the app-level token (xapp-...) `apps.connections.open` takes (`sim.slack_app`).
    """

    def __init__(
        self,
        bot_token: str,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        channels: Iterable[str] = (),
        relax: Iterable[str] = (),
        clock: Callable[[], float] = time.monotonic,
        app_token: str | None = None,
    ) -> None:
        self.bot_token = bot_token
        self.app = SlackApp(app_token)  # the app's settings, as its manifest made them (`app.install`)
        self.joined: set[str] = set(channels)
        self.relaxed: set[str] = set()
        self.relax(*relax)
        self.refused: list[tuple[str, str, str]] = []
        self.workspace = Workspace()  # archived channels, granted scopes, the token (sim/slack_workspace.py)
        self._clock = clock
        self._offset = 0.0
        self._response_urls: dict[str, tuple[float, int]] = {}
        self._triggers: dict[str, tuple[float, bool]] = {}
        self._edits: dict[tuple[str, str], str] = {}
        self.messages: list[Message] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.usergroups: dict[str, list[str]] = {}
        self.home_views: dict[str, dict[str, Any]] = {}
        self._faults: list[dict[str, Any]] = []
        self._uploads: dict[str, dict[str, Any]] = {}
        self.dms: dict[str, str] = {}  # user id -> the id of the app's DM with them (conversations.open)
        self._ts = itertools.count(1)
        self._changed = threading.Condition()
        self._server = SimHttpServer((host, port), self._handler_class())
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def api_url(self) -> str:
        """The Web API base URL to give the bot (`SLACK_API_URL`)."""
        return self.url + "/api/"

    def response_url(self, response_id: str) -> str:
        """A `response_url` for a slash command; what the bot posts there is recorded under that id. Its
        5-uses-in-30-minutes budget starts now."""
        with self._changed:
            self._response_urls.setdefault(response_id, (self.now(), 0))
        return f"{self.url}/response/{response_id}"

    def issue_trigger(self) -> str:
        """A new `trigger_id`, as Slack puts in a slash command, click or submission; valid for one
        `views.open` within TRIGGER_TTL_S seconds."""
        trigger_id = f"{next(self._ts)}.{TEAM_ID}.{uuid.uuid4().hex[:20]}"
        with self._changed:
            self._triggers[trigger_id] = (self.now(), False)
        return trigger_id

    def now(self) -> float:
        """The simulator's monotonic clock, seconds."""
        return self._clock() + self._offset

    def advance(self, seconds: float) -> None:
        """Move the simulator's clock on (expires trigger ids and response_urls without waiting)."""
        self._offset += seconds

    def relax(self, *rules: str) -> None:
        """Stop enforcing the named RULES (a scenario testing the product without that limit).

        Raises:
            ValueError: an unknown rule name.
        """
        unknown = set(rules) - set(RULES)
        if unknown:
            raise ValueError(f"unknown Slack rules {sorted(unknown)}; use {', '.join(RULES)}")
        self.relaxed.update(rules)

    def enforces(self, rule: str) -> bool:
        """Whether the named rule (one of RULES) is enforced now."""
        return rule not in self.relaxed

    def join(self, *channels: str) -> None:
        """Make the bot a member of these conversations (as `/invite @bot` does)."""
        self.joined.update(channels)

    def edit_user_message(self, channel: str, ts: str, text: str) -> None:
        """A user edits their message: `conversations.replies` returns the new text, marked `edited`."""
        with self._changed:
            self._edits[(channel, ts)] = text

    def membership_error(self, channel: str) -> str | None:
        """Why Slack refuses the bot in `channel`, or None.

        A bot token with `chat:write` (and no `chat:write.public`) posts only where the bot is a member:
        a public channel it is not in answers `not_in_channel`; a private channel, a DM it is not part of
        or an unknown id answers `channel_not_found` (docs.slack.dev/reference/methods/chat.postMessage,
        "Errors"; docs.slack.dev/reference/scopes/chat.write.public). A user id (U.../W...) posts into the
        app's DM with that user, which always works.
        """
        if not self.enforces("membership") or channel in self.joined or channel[:1] in ("U", "W"):
            return None
        return "not_in_channel" if channel.startswith("C") else "channel_not_found"

    def start(self) -> SlackSimulator:
        self._thread = threading.Thread(target=self._server.serve_forever, name="sim-slack", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def fail_next(
        self,
        method: str,
        *,
        error: str = "ratelimited",
        status: int = 429,
        retry_after: int = 1,
        count: int = 1,
        after: int = 0,
    ) -> None:
        """Make the next `count` calls of `method` (e.g. "chat.postMessage", "response") fail, once `after`
        calls of it have gone through (Slack refusing a long run of messages part of the way)."""
        with self._changed:
            fault = dict(method=method, error=error, status=status, retry_after=retry_after, count=count)
            self._faults.append({**fault, "after": after})

    def wait_for(self, predicate: Any, timeout: float = 10.0, *, start: int = 0) -> Message | None:
        """The first message recorded at index `start` or later that matches `predicate`, waiting up to
        `timeout` seconds."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                for message in self.messages[start:]:
                    if predicate(message):
                        return message
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    return None
                self._changed.wait(remaining)

    def _record(self, message: Message) -> None:
        with self._changed:
            self.messages.append(message)
            self._changed.notify_all()

    def _next_ts(self) -> str:
        return f"{int(time.time())}.{next(self._ts):06d}"

    def new_ts(self) -> str:
        """A message ts unique in this workspace, as Slack assigns one to every message (a user's too)."""
        return self._next_ts()

    def _take_fault(self, method: str) -> dict[str, Any] | None:
        with self._changed:
            for fault in self._faults:
                if fault["method"] == method and fault["count"] > 0:
                    if fault["after"] > 0:
                        fault["after"] -= 1
                        return None
                    fault["count"] -= 1
                    return fault
        return None

    # ---- Web API methods: each returns the JSON body Slack would ----

    def _api(self, method: str, args: dict[str, Any]) -> dict[str, Any]:
        refusal = self.workspace.refusal(method, args)  # archived, missing scope, revoked token
        if refusal:
            return refusal
        if method == "auth.test":
            return {
                "ok": True,
                "url": "https://demo.slack.com/",
                "team": "Demo (simulated)",
                "user": "gemma-bot",
                "team_id": TEAM_ID,
                "user_id": BOT_USER_ID,
                "bot_id": "B0BOT00001",
                "is_enterprise_install": False,
            }
        if method in ("chat.postMessage", "chat.update", "chat.postEphemeral"):
            return self._chat(method, args)
        if method == "files.getUploadURLExternal":
            file_id = f"F{next(self._ts):09d}"
            self._uploads[file_id] = {"filename": args.get("filename"), "content": b""}
            return {"ok": True, "upload_url": f"{self.url}/upload/{file_id}", "file_id": file_id}
        if method == "files.completeUploadExternal":
            return self._complete_upload(args)
        if method == "conversations.open":
            return self._open_dm(args)
        if method == "chat.delete":  # the bot's own message (docs.slack.dev/reference/methods/chat.delete)
            if not any(m.ts == args.get("ts") and m.channel == args.get("channel") for m in self.messages):
                return {"ok": False, "error": "message_not_found"}
            self._record(Message("delete", str(args["channel"]), str(args["ts"]), "(message deleted)"))
            return {"ok": True, "channel": args["channel"], "ts": args["ts"]}
        if method == "views.open":
            view = args.get("view") or {}
            if isinstance(view, str):
                view = json.loads(view)
            trigger_problem = self._exchange_trigger(str(args.get("trigger_id") or ""))
            if trigger_problem:
                return {"ok": False, "error": trigger_problem}
            problems = view_errors(view) if self.enforces("block_limits") else []
            if problems:
                return {
                    "ok": False,
                    "error": "invalid_arguments",
                    "response_metadata": {"messages": problems},
                }
            view_id = f"V{next(self._ts):09d}"
            title = view.get("title", {}).get("text", "")
            self._record(
                Message(
                    "modal",
                    str(view.get("private_metadata", "")),
                    self._next_ts(),
                    title,
                    view.get("blocks", []),
                    view=dict(view, id=view_id),
                )
            )
            return {"ok": True, "view": dict(view, id=view_id)}
        if method == "views.publish":
            view = args.get("view") or {}
            if isinstance(view, str):
                view = json.loads(view)
            problems = view_errors(view) if self.enforces("block_limits") else []
            if problems:
                return {
                    "ok": False,
                    "error": "invalid_arguments",
                    "response_metadata": {"messages": problems},
                }
            self.home_views[str(args.get("user_id"))] = view
            return {"ok": True, "view": dict(view, id=f"V{next(self._ts):09d}")}
        if method == "conversations.replies":
            return self._replies(args)
        if method == "usergroups.users.list":
            return {"ok": True, "users": self.usergroups.get(str(args.get("usergroup")), [])}
        return {"ok": False, "error": "unknown_method"}

    def _chat(self, method: str, args: dict[str, Any]) -> dict[str, Any]:
        blocks = args.get("blocks") or []
        if isinstance(blocks, str):
            blocks = json.loads(blocks)
        text = str(args.get("text") or "")
        if not args.get("channel"):
            return {"ok": False, "error": "channel_not_found"}
        refusal = self._refuse(method, str(args["channel"]))
        if refusal:
            return refusal
        if not text.strip() and not blocks:
            return {"ok": False, "error": "no_text"}
        if len(text) > MAX_TEXT:
            return {"ok": False, "error": "msg_too_long"}
        errors = block_errors(blocks, strict=self.enforces("block_limits"))
        if errors:
            return {"ok": False, "error": "invalid_blocks", "errors": errors}
        if self.enforces("block_limits") and blocks_text_length(blocks) > MAX_BLOCKS_TEXT:
            return {"ok": False, "error": "msg_blocks_too_long"}
        ts = str(args["ts"]) if method == "chat.update" else self._next_ts()
        kind = {"chat.postMessage": "post", "chat.update": "update", "chat.postEphemeral": "ephemeral"}[
            method
        ]
        channel = str(args["channel"])
        thread_ts = args.get("thread_ts")
        if method == "chat.update":  # an edit stays in the thread of the message it edits
            original = next(
                (m for m in self.messages if m.ts == str(args["ts"]) and m.channel == channel), None
            )
            thread_ts = original.thread_ts if original else None
            with self._changed:
                self._edits[(channel, ts)] = text
        self._record(
            Message(kind, channel, ts, text, blocks, thread_ts=thread_ts, ephemeral=kind == "ephemeral")
        )
        return {"ok": True, "channel": args["channel"], "ts": ts, "message": {"text": text, "blocks": blocks}}

    def record_user_message(
        self, channel: str, ts: str, text: str, thread_ts: str | None = None, *, user: str | None = None
    ) -> None:
        """Record a message a user typed (the console does this for mentions), for `conversations.replies`;
        `user` is who typed it."""
        self._record(Message("user", channel, ts, text, thread_ts=thread_ts, user=user))

    def _refuse(self, method: str, channel: str) -> dict[str, Any] | None:
        """The error body when the bot may not use `channel` (see `membership_error`), recorded."""
        error = self.membership_error(channel)
        if error is None:
            return None
        with self._changed:
            self.refused.append((method, channel, error))
        return {"ok": False, "error": error}

    def _exchange_trigger(self, trigger_id: str) -> str | None:
        """Use up a trigger id; the error code when it cannot open a view (views.open "Errors":
        `invalid_trigger_id`, `expired_trigger_id`, `exchanged_trigger_id`)."""
        if not trigger_id:
            return "invalid_trigger_id"
        if not self.enforces("trigger_id"):
            return None
        with self._changed:
            issued = self._triggers.get(trigger_id)
            if issued is None:
                return "invalid_trigger_id"
            at, used = issued
            if used:
                return "exchanged_trigger_id"
            if self.now() - at > TRIGGER_TTL_S:
                return "expired_trigger_id"
            self._triggers[trigger_id] = (at, True)
        return None

    def _replies(self, args: dict[str, Any]) -> dict[str, Any]:
        """conversations.replies: the thread oldest first, `limit` messages a page (default 1000, the
        documented default and maximum), `cursor` for the next page, `has_more` and
        `response_metadata.next_cursor`; an edited message has its new text and an `edited` field
        (docs.slack.dev/reference/methods/conversations.replies)."""
        channel, ts = str(args.get("channel")), str(args.get("ts"))
        refusal = self._refuse("conversations.replies", channel)
        if refusal:
            return refusal
        thread = [
            m
            for m in self.messages
            if m.channel == channel and m.kind in ("user", "post") and (m.ts == ts or m.thread_ts == ts)
        ]
        if not thread:
            return {"ok": False, "error": "thread_not_found"}
        messages = []
        for m in sorted(thread, key=lambda m: float(m.ts)):
            edited = self._edits.get((channel, m.ts))
            item: dict[str, Any] = {
                "type": "message",
                "ts": m.ts,
                "text": m.text if edited is None else edited,
            }
            if m.kind == "post":
                item["bot_id"] = "B0BOT00001"
            elif m.user:
                item["user"] = m.user
            if edited is not None and edited != m.text:
                item["edited"] = {"user": BOT_USER_ID if m.kind == "post" else "U0EDITOR01", "ts": m.ts}
            messages.append(item)
        if not self.enforces("replies_paging"):
            return {"ok": True, "messages": messages, "has_more": False}
        try:
            limit = min(int(args.get("limit") or 1000), 1000)
            cursor = base64.b64decode(str(args.get("cursor") or ""), validate=True).decode()
            if cursor and not cursor.startswith("next:"):
                raise ValueError(cursor)
            start = int(cursor.removeprefix("next:") or 0)
        except (ValueError, binascii.Error, UnicodeDecodeError):
            return {"ok": False, "error": "invalid_cursor"}
        limit = max(limit, 1)
        page = messages[start : start + limit]
        more = start + limit < len(messages)
        cursor = base64.b64encode(f"next:{start + limit}".encode()).decode() if more else ""
        return {"ok": True, "messages": page, "has_more": more, "response_metadata": {"next_cursor": cursor}}

    def _open_dm(self, args: dict[str, Any]) -> dict[str, Any]:
        """conversations.open with one user id in `users`: the id of the app's DM with that user (the same
        one each time), of which the bot is a member (docs.slack.dev/reference/methods/conversations.open;
        `users_list_not_supplied` without users). Group DMs (several users) are not simulated."""
        users = [u for u in str(args.get("users") or "").split(",") if u]
        if not users:
            return {"ok": False, "error": "users_list_not_supplied"}
        if len(users) > 1 or not re.fullmatch(r"[UW][A-Z0-9]{8,}", users[0]):
            return {"ok": False, "error": "user_not_found"}
        with self._changed:
            dm = self.dms.setdefault(users[0], f"D{next(self._ts):09d}")
            self.joined.add(dm)
        return {"ok": True, "channel": {"id": dm}}

    def _complete_upload(self, args: dict[str, Any]) -> dict[str, Any]:
        files = args.get("files")
        if isinstance(files, str):
            files = json.loads(files)
        channel = str(args.get("channel_id") or "")
        if channel and not re.fullmatch(UPLOAD_CHANNEL_ID, channel):
            # A user id is refused: a file for a user goes to the DM id that conversations.open returns
            # (slackapi/bolt-js#2115, slackapi/python-slack-sdk#1326).
            message = f"input must match regex pattern: {UPLOAD_CHANNEL_ID} [json-pointer:/channel_id]"
            return {"ok": False, "error": "invalid_arguments", "response_metadata": {"messages": [message]}}
        refusal = self._refuse("files.completeUploadExternal", channel) if channel else None
        if refusal:
            return refusal
        done = []
        for item in files or []:
            upload = self._uploads.pop(item["id"], None)
            if upload is None:
                return {"ok": False, "error": "file_not_found"}
            self._record(
                Message(
                    "file",
                    str(args.get("channel_id") or ""),
                    self._next_ts(),
                    item.get("title") or "",
                    thread_ts=args.get("thread_ts"),
                    filename=upload["filename"],
                    content=upload["content"],
                )
            )
            done.append({"id": item["id"], "title": item.get("title"), "name": upload["filename"]})
        return {"ok": True, "files": done}

    def _use_response_url(self, response_id: str) -> str | None:
        """Count one post to a response_url; the body of Slack's 404 when it is spent: `expired_url`
        after 30 minutes, `used_url` after 5 posts (docs.slack.dev/interactivity/handling-user-interaction,
        "Responding to interactions")."""
        if not self.enforces("response_url"):
            return None
        with self._changed:
            issued, uses = self._response_urls.setdefault(response_id, (self.now(), 0))
            if self.now() - issued > RESPONSE_URL_TTL_S:
                return "expired_url"
            if uses >= RESPONSE_URL_USES:
                return "used_url"
            self._response_urls[response_id] = (issued, uses + 1)
        return None

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        sim = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                return

            def _reply(
                self, status: int, body: dict[str, Any] | str, headers: dict[str, str] | None = None
            ) -> None:
                data = (json.dumps(body) if isinstance(body, dict) else body).encode()
                self.send_response(status)
                self.send_header(
                    "Content-Type", "application/json" if isinstance(body, dict) else "text/plain"
                )
                self.send_header("Content-Length", str(len(data)))
                for key, value in (headers or {}).items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def _args(self, body: bytes) -> dict[str, Any]:
                args: dict[str, Any] = dict(parse_qsl(urlparse(self.path).query))
                content_type = self.headers.get("Content-Type", "")
                if body and "json" in content_type:
                    args.update(json.loads(body))
                elif body:
                    args.update(parse_qsl(body.decode()))
                return args

            def do_GET(self) -> None:
                self.do_POST()

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                path = urlparse(self.path).path
                if path.startswith("/upload/"):
                    upload = sim._uploads.get(path.rsplit("/", 1)[1])
                    if upload is None:
                        self._reply(404, "no such upload")
                        return
                    upload["content"] = body
                    self._reply(200, "OK - " + str(len(body)))
                    return
                match = re.fullmatch(r"/response/([\w-]+)", path)
                method = "response" if match else path.removeprefix("/api/")
                fault = sim._take_fault(method)
                if fault:
                    headers = {"Retry-After": str(fault["retry_after"])} if fault["status"] == 429 else {}
                    self._reply(fault["status"], {"ok": False, "error": fault["error"]}, headers)
                    return
                if match:
                    self._response_url(match.group(1), body)
                    return
                if method == "apps.connections.open":
                    sim.calls.append((method, {}))
                    self._reply(
                        200,
                        sim.app.connections_open(
                            self.headers.get("Authorization") or "", sim.bot_token, sim.url
                        ),
                    )
                    return
                if self.headers.get("Authorization") != f"Bearer {sim.bot_token}":
                    self._reply(200, {"ok": False, "error": "invalid_auth"})
                    return
                args = self._args(body)
                sim.calls.append((method, args))
                self._reply(200, sim._api(method, args))

            def _response_url(self, response_id: str, body: bytes) -> None:
                used = sim._use_response_url(response_id)
                if used:
                    self._reply(404, used)
                    return
                payload = json.loads(body or b"{}")
                blocks = payload.get("blocks") or []
                errors = block_errors(blocks, strict=sim.enforces("block_limits"))
                if errors:
                    self._reply(400, "invalid_blocks")
                    return
                sim._record(
                    Message(
                        "response",
                        payload.get("channel", ""),
                        sim._next_ts(),
                        str(payload.get("text") or ""),
                        blocks,
                        response_id=response_id,
                        ephemeral=payload.get("response_type") == "ephemeral",
                        replaces=bool(payload.get("replace_original")),
                    )
                )
                self._reply(200, "ok")

        return Handler
