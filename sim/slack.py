"""SIMULATED Slack: the Web API methods the bot calls, plus `response_url` webhooks, on 127.0.0.1.

It records every message, checks the bot token, enforces Slack's block limits the way Slack does (so a
renderer bug shows as `invalid_blocks` / `msg_too_long` here, not first in production), can answer 429
`ratelimited` with `Retry-After`, and renders messages as text for the console.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlparse

BOT_USER_ID = "U0BOT00001"
TEAM_ID = "T0DEMO0001"

# Limits Slack enforces (docs.slack.dev/reference/block-kit/blocks; slack_sdk/models/blocks/blocks.py).
MAX_BLOCKS = 50
MAX_SECTION_TEXT = 3000
MAX_HEADER_TEXT = 150
MAX_ACTIONS_ELEMENTS = 25
MAX_TEXT = 40000
# Block text of one message, all blocks together: Slack answers msg_blocks_too_long past about 13,200
# characters (bolt-js#2509; not documented).
MAX_BLOCKS_TEXT = 13200


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
        if self.kind == "file":
            size = len(self.content)
            return f"[file {self.filename}: {size:,} bytes]"
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
    if kind == "context":
        return "  " + " ".join(e.get("text", "") for e in block.get("elements", []))
    if kind == "actions":
        return " ".join(f"[{e.get('text', {}).get('text', '?')}]" for e in block.get("elements", []))
    return f"[{kind} block]"


def block_errors(blocks: list[dict[str, Any]]) -> list[str]:
    """What Slack would reject in these blocks, in its own wording; empty when they are acceptable."""
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
    return errors


class SlackSimulator:
    """The simulated Slack workspace.

    Args:
        bot_token: the token the bot must present (`Authorization: Bearer ...`).
        host, port: where to listen (port 0 picks a free one).
    """

    def __init__(self, bot_token: str, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self.bot_token = bot_token
        self.messages: list[Message] = []
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.usergroups: dict[str, list[str]] = {}
        self.home_views: dict[str, dict[str, Any]] = {}
        self._faults: list[dict[str, Any]] = []
        self._uploads: dict[str, dict[str, Any]] = {}
        self._ts = itertools.count(1)
        self._changed = threading.Condition()
        self._server = ThreadingHTTPServer((host, port), self._handler_class())
        self._server.daemon_threads = True
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
        """A `response_url` for a slash command; what the bot posts there is recorded under that id."""
        return f"{self.url}/response/{response_id}"

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
    ) -> None:
        """Make the next `count` calls of `method` (e.g. "chat.postMessage", "response") fail."""
        with self._changed:
            self._faults.append(
                {
                    "method": method,
                    "error": error,
                    "status": status,
                    "retry_after": retry_after,
                    "count": count,
                }
            )

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

    def _take_fault(self, method: str) -> dict[str, Any] | None:
        with self._changed:
            for fault in self._faults:
                if fault["method"] == method and fault["count"] > 0:
                    fault["count"] -= 1
                    return fault
        return None

    # ---- Web API methods: each returns the JSON body Slack would ----

    def _api(self, method: str, args: dict[str, Any]) -> dict[str, Any]:
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
        if method == "views.open":
            view = args.get("view") or {}
            if isinstance(view, str):
                view = json.loads(view)
            if not args.get("trigger_id"):
                return {"ok": False, "error": "invalid_trigger_id"}
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
            self.home_views[str(args.get("user_id"))] = view
            return {"ok": True, "view": dict(view, id=f"V{next(self._ts):09d}")}
        if method == "conversations.replies":
            return self._replies(str(args.get("channel")), str(args.get("ts")))
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
        if not text and not blocks:
            return {"ok": False, "error": "no_text"}
        if len(text) > MAX_TEXT:
            return {"ok": False, "error": "msg_too_long"}
        errors = block_errors(blocks)
        if errors:
            return {"ok": False, "error": "invalid_blocks", "errors": errors}
        if sum(len(render_block(block)) for block in blocks) > MAX_BLOCKS_TEXT:
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
        self._record(
            Message(kind, channel, ts, text, blocks, thread_ts=thread_ts, ephemeral=kind == "ephemeral")
        )
        return {"ok": True, "channel": args["channel"], "ts": ts, "message": {"text": text, "blocks": blocks}}

    def record_user_message(self, channel: str, ts: str, text: str, thread_ts: str | None = None) -> None:
        """Record a message a user typed (the console does this for mentions), for `conversations.replies`."""
        self._record(Message("user", channel, ts, text, thread_ts=thread_ts))

    def _replies(self, channel: str, ts: str) -> dict[str, Any]:
        thread = [
            m
            for m in self.messages
            if m.channel == channel and m.kind in ("user", "post") and (m.ts == ts or m.thread_ts == ts)
        ]
        messages = [
            {
                "type": "message",
                "ts": m.ts,
                "text": m.text,
                **({"bot_id": "B0BOT00001"} if m.kind == "post" else {}),
            }
            for m in sorted(thread, key=lambda m: float(m.ts))
        ]
        return {"ok": True, "messages": messages, "has_more": False}

    def _complete_upload(self, args: dict[str, Any]) -> dict[str, Any]:
        files = args.get("files")
        if isinstance(files, str):
            files = json.loads(files)
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
                if self.headers.get("Authorization") != f"Bearer {sim.bot_token}":
                    self._reply(200, {"ok": False, "error": "invalid_auth"})
                    return
                args = self._args(body)
                sim.calls.append((method, args))
                self._reply(200, sim._api(method, args))

            def _response_url(self, response_id: str, body: bytes) -> None:
                payload = json.loads(body or b"{}")
                blocks = payload.get("blocks") or []
                errors = block_errors(blocks)
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
