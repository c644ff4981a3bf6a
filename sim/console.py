"""The demo console: type what you would type in Slack, read the bot's answers as text.

Each line becomes a real Slack request, shaped and signed as Slack sends them, POSTed to the bot's
`/slack/events`: `/tpu status` is a slash command whose `response_url` points at the Slack simulator;
`@gemma-bot vllm metrics` is an `app_mention` event. The bot answers through the Slack simulator, which
renders what it received.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import urlencode

import httpx
from slack_sdk.signature import SignatureVerifier

from sim.slack import BOT_USER_ID, TEAM_ID, Message, SlackSimulator

DEMO_USER = "U0DEMOUSR1"
DEMO_CHANNEL = "C0DEMOCHN1"
MENTION_PREFIXES = ("@gemma-bot", "@bot")
# How long the console waits, when it exits, for the operations it cancelled to show their final state.
CANCEL_WAIT_S = 30.0


class SlackUser:
    """A simulated Slack client: sends signed slash commands and mentions to the bot as one user."""

    def __init__(
        self,
        bot_url: str,
        signing_secret: str,
        slack: SlackSimulator,
        *,
        user_id: str = DEMO_USER,
        channel_id: str = DEMO_CHANNEL,
    ) -> None:
        self._events_url = bot_url.rstrip("/") + "/slack/events"
        self._verifier = SignatureVerifier(signing_secret)
        self._slack = slack
        self._http = httpx.Client(timeout=10.0)
        self._ids = itertools.count(1)
        self._prefix = uuid.uuid4().hex[:6]  # response ids unique across consoles sharing one Slack simulator
        self.user_id = user_id
        self.channel_id = channel_id
        self.thread_ts: str | None = None
        self.last_mention_ts: str | None = None
        self._printed = len(slack.messages)
        # Response ids this console issued (slash commands, clicks) -> the channel it typed in then: their
        # answers belong to that conversation, wherever Slack's response_url puts them.
        self._issued: dict[str, str] = {}
        # Response id of a click -> key of the message clicked: a response that replaces the original
        # replaces that message (its buttons are then gone).
        self._clicked: dict[str, tuple[str, str]] = {}
        # The button the last `click` clicked (message, block id, element), for `click again`.
        self._last_click: tuple[Message, str, dict[str, Any]] | None = None
        # Held while a console line runs (its answer is printed by `run`); the watcher prints otherwise.
        self._running = threading.Lock()

    def arrived(self) -> list[str]:
        """Messages that arrived since the last ones shown (alerts, results after a Confirm), rendered (those
        posted outside the current conversation labelled with their channel: `show`); marks them shown.
        Empty while a console line is running (`run` shows those itself)."""
        if not self._running.acquire(blocking=False):
            return []
        try:
            return self._unshown(len(self._slack.messages))
        finally:
            self._running.release()

    def _unshown(self, since: int) -> list[str]:
        """Render the messages from index `since` (or from the first not yet shown, if earlier) and mark
        every message shown."""
        end = len(self._slack.messages)
        new = [
            self.show(m) for m in self._slack.messages[min(since, self._printed) : end] if m.kind != "user"
        ]
        self._printed = end
        return new

    def in_conversation(self, message: Message) -> bool:
        """Whether `message` belongs to the conversation the console types in: its channel, the user's DM
        with the app, a form opened for the user, or the answer to a response_url this console issued
        while typing in this channel."""
        if message.kind == "response":
            return self._issued.get(message.response_id or "") == self.channel_id
        return (
            message.kind == "modal"
            or message.channel == self.channel_id
            or message.channel == self.user_id
            or message.channel[:1] == "D"
        )

    def show(self, message: Message) -> str:
        """`message` as console text; one posted outside the current conversation (an alert in the alert
        channel, a message in another deployment's channel) starts with its channel: `[#C0ALERTS01] ...`."""
        if self.in_conversation(message):
            return message.render()
        where = f"#{message.channel}" if message.channel else "another conversation"
        return f"[{where}] {message.render()}"

    def _new_response_id(self, kind: str) -> str:
        """A response id of this console (`r...` a slash command, `a...` a click) in the current channel."""
        response_id = f"{kind}{self._prefix}-{next(self._ids)}"
        self._issued[response_id] = self.channel_id
        return response_id

    def watch(self, show: Callable[[list[str]], None], stop: threading.Event, poll_s: float = 0.3) -> None:
        """Until `stop` is set: call `show` with each batch of messages that arrive between console lines, as
        they arrive (not at the next keystroke)."""
        while not stop.is_set():
            self._slack.wait_for(lambda m: m.kind != "user", poll_s, start=self._printed)
            lines = self.arrived()
            if lines:
                show(lines)
            stop.wait(poll_s)

    def close(self) -> None:
        self._http.close()

    def post_signed(
        self,
        body: str,
        content_type: str,
        *,
        timestamp: int | None = None,
        extra_headers: dict[str, str] | None = None,
    ) -> httpx.Response:
        """POST a body to the bot with Slack's signature headers (v0 HMAC-SHA256 of `v0:ts:body`)."""
        ts = str(timestamp if timestamp is not None else int(time.time()))
        headers = {
            "Content-Type": content_type,
            "X-Slack-Request-Timestamp": ts,
            "X-Slack-Signature": self._verifier.generate_signature(timestamp=ts, body=body) or "",
            **(extra_headers or {}),
        }
        return self._http.post(self._events_url, content=body.encode(), headers=headers)

    def slash_body(self, command: str, text: str, response_id: str) -> str:
        """A slash-command form body with the fields Slack sends (tests/fixtures/slack/slash_command.form)."""
        return urlencode(
            {
                "token": "simulated-verification-token",
                "team_id": TEAM_ID,
                "team_domain": "demo",
                "channel_id": self.channel_id,
                "channel_name": "tpu-ops",
                "user_id": self.user_id,
                "user_name": "demo-user",
                "command": command,
                "text": text,
                "api_app_id": "A0DEMOAPP1",
                "is_enterprise_install": "false",
                "response_url": self._slack.response_url(response_id),
                "trigger_id": self._slack.issue_trigger(),
            }
        )

    def mention_body(self, text: str, ts: str, thread_ts: str | None = None) -> str:
        """An Events API `event_callback` with an `app_mention` (tests/fixtures/slack/app_mention.json)."""
        event = {
            "type": "app_mention",
            "user": self.user_id,
            "text": f"<@{BOT_USER_ID}> {text}",
            "ts": ts,
            "channel": self.channel_id,
            "event_ts": ts,
        }
        if thread_ts:
            event["thread_ts"] = thread_ts
        return json.dumps(
            {
                "token": "simulated-verification-token",
                "team_id": TEAM_ID,
                "api_app_id": "A0DEMOAPP1",
                "event": event,
                "type": "event_callback",
                "authorizations": [
                    {
                        "team_id": TEAM_ID,
                        "user_id": BOT_USER_ID,
                        "is_bot": True,
                        "is_enterprise_install": False,
                    }
                ],
                "event_id": f"Ev{uuid.uuid4().hex[:16].upper()}",
                "event_time": int(time.time()),
            }
        )

    def run(self, line: str, *, timeout: float = 30.0) -> tuple[list[str], bool]:
        """Send one console line and wait for the bot's final answer.

        Lines: `/tpu status` (slash command), `@gemma-bot ...` (mention), `click LABEL [as USER]` (click the
        newest button still shown whose label starts with LABEL, the conversation's first, e.g. `click
        Confirm as U0OTHER001`; `click again [LABEL]` clicks the last clicked message's button LABEL, default
        the same one, once more, as a double click or a stale client would), `submit VALUE` (fill and submit
        the open form), `thread` (later mentions go to the thread of the last one), `unthread`,
        `channel C0STAGING1` (later lines come from that channel, where the bot may not be a member;
        `channel` alone shows the current one).

        Returns:
            (lines to print, whether a final answer arrived within `timeout` seconds).
        """
        with self._running:
            return self._run(line.strip(), timeout)

    def _run(self, line: str, timeout: float) -> tuple[list[str], bool]:
        start = len(self._slack.messages)
        if line == "thread":
            self.thread_ts = self.last_mention_ts
            return [
                f"(mentions now go to the thread of {self.thread_ts})"
                if self.thread_ts
                else "(mention first)"
            ], True
        if line == "unthread":
            self.thread_ts = None
            return ["(mentions go to the channel again)"], True
        if line == "channel" or line.startswith("channel "):
            return self._switch_channel(line.removeprefix("channel").strip())
        if line.startswith("click "):
            return self._click(line.removeprefix("click ").strip(), start, timeout)
        if line.startswith("submit "):
            return self._submit(line.removeprefix("submit ").strip(), start, timeout)
        if line.startswith("/"):
            command, _, text = line.partition(" ")
            response_id = self._new_response_id("r")
            body = self.slash_body(command, text, response_id)
            response = self.post_signed(body, "application/x-www-form-urlencoded")
            if response.status_code == 404:
                return [f"[HTTP 404] the bot does not handle {command} (try /tpu help)"], False
            out = [f"[HTTP {response.status_code}] {_ack_text(response)}".rstrip()]
            if response.status_code != 200 or not _is_working(response):
                return out, response.status_code == 200
            # The answer comes through the response_url, or as a progress message in the channel.
            lines, answered = self._await(
                start,
                lambda m: (
                    m.response_id == response_id
                    or (m.kind in ("post", "update") and m.channel == self.channel_id)
                ),
                timeout,
            )
            return out + lines, answered
        ts = self._slack.new_ts()
        text = _strip_mention(line)
        self._slack.record_user_message(
            self.channel_id, ts, text, thread_ts=self.thread_ts, user=self.user_id
        )
        response = self.post_signed(self.mention_body(text, ts, self.thread_ts), "application/json")
        out = [f"[HTTP {response.status_code}]"]
        if response.status_code != 200:
            return out, False
        self.last_mention_ts = ts
        thread = self.thread_ts or ts
        # The answer comes in the thread (a help answer only to the user), or (the bot not being in the
        # channel) in the app's DM with the user.
        lines, answered = self._await(
            start,
            lambda m: (
                (m.thread_ts == thread and m.kind in ("post", "ephemeral"))
                or (m.kind == "post" and m.channel == self.user_id)
            ),
            timeout,
        )
        return out + lines, answered

    def _switch_channel(self, channel_id: str) -> tuple[list[str], bool]:
        """`channel C0STAGING1`: later lines come from that channel (the bot may not be a member);
        `channel` alone shows the current one."""
        if not channel_id:
            return [f"(typing in channel {self.channel_id})"], True
        if not re.fullmatch(r"[CGD][A-Z0-9]{8,}", channel_id):
            return [
                f"(not a channel id: {channel_id!r}; e.g. channel C0STAGING1; still in {self.channel_id})"
            ], False
        self.channel_id, self.thread_ts, self.last_mention_ts = channel_id, None, None
        member = "" if channel_id in self._slack.joined else " (the bot is not a member of it)"
        return [f"(now typing in channel {channel_id}{member})"], True

    def _click(self, spec: str, start: int, timeout: float) -> tuple[list[str], bool]:
        label, _, as_user = spec.partition(" as ")
        label = label.strip()
        if label == "again" or label.startswith("again "):
            # A second click on the last clicked message (its button LABEL, default the same), even though
            # the answer to the first replaced it: what a double click or a stale client sends.
            found = self._click_again(label.removeprefix("again").strip())
            if found is None:
                return [f"(no earlier click with a button {label.removeprefix('again').strip()!r})"], False
        else:
            found = self._find_button(label.strip())
            if found is None:
                return [f"(no button labelled {label.strip()!r} in the conversation)"], False
        self._last_click = found
        message, block_id, element = found
        response_id = self._new_response_id("a")
        self._clicked[response_id] = _key(message)
        body = self.click_body(
            message, block_id, element, response_id, user_id=as_user.strip() or self.user_id
        )
        response = self.post_signed(body, "application/x-www-form-urlencoded")
        out = [f"[HTTP {response.status_code}] clicked {element['text']['text']!r}"]
        if response.status_code != 200:
            return out, False
        lines, answered = self._await(start, lambda m: m.response_id == response_id, timeout)
        return out + lines, answered

    def _submit(self, value: str, start: int, timeout: float) -> tuple[list[str], bool]:
        modal = next((m for m in reversed(self._slack.messages) if m.kind == "modal"), None)
        if modal is None or modal.view is None:
            return ["(no form is open)"], False
        response = self.post_signed(
            self.submission_body(modal.view, value), "application/x-www-form-urlencoded"
        )
        ack = _ack_text(response) or (response.text if response.content else "")
        out = [f"[HTTP {response.status_code}] submitted {modal.text!r} {ack}".rstrip()]
        if response.status_code != 200 or "errors" in response.text:
            return out, response.status_code == 200
        lines, answered = self._await(start, lambda m: m.kind in ("post", "ephemeral"), timeout)
        return out + lines, answered

    def submission_body(self, view: dict[str, Any], value: str) -> str:
        """A form-encoded `view_submission` giving `value` to every input of the modal."""
        values = {
            block["block_id"]: {
                block["element"]["action_id"]: {"type": block["element"]["type"], "value": value}
            }
            for block in view.get("blocks", [])
            if block.get("type") == "input"
        }
        payload = {
            "type": "view_submission",
            "team": {"id": TEAM_ID, "domain": "demo"},
            "user": {"id": self.user_id, "username": "demo-user", "name": "demo-user", "team_id": TEAM_ID},
            "api_app_id": "A0DEMOAPP1",
            "token": "simulated-verification-token",
            "trigger_id": self._slack.issue_trigger(),
            "view": {**view, "state": {"values": values}},
        }
        return urlencode({"payload": json.dumps(payload)})

    def running(self) -> list[Message]:
        """The bot's messages whose newest state shows a running operation (a capacity search, a benchmark:
        its Cancel button), oldest first."""
        newest: dict[tuple[str, str], Message] = {}
        for message in list(self._slack.messages):
            if message.kind in ("post", "update"):
                newest[(message.channel, message.ts)] = message
        return [m for m in newest.values() if _cancel_button(m) is not None]

    def cancel_running(self, timeout: float = CANCEL_WAIT_S) -> tuple[list[str], list[Message]]:
        """Stop every running operation as its user would: click its Cancel button (a signed `block_actions`
        request; the bot cancels the operation, a search deletes the requests it made by their labels, and
        the progress message ends in a final state), then wait up to `timeout` seconds for each one.

        Returns:
            (lines to print, the messages still showing a running operation after `timeout`).
        """
        with self._running:
            start = len(self._slack.messages)
            out: list[str] = []
            clicked = self.running()
            for message in clicked:
                found = _cancel_button(message)
                assert found is not None
                block_id, element = found
                response_id = self._new_response_id("a")
                self._clicked[response_id] = _key(message)
                body = self.click_body(message, block_id, element, response_id, user_id=self.user_id)
                response = self.post_signed(body, "application/x-www-form-urlencoded")
                out.append(f"[HTTP {response.status_code}] clicked 'Cancel' on {_first_line(message)!r}")
            keys = {(m.channel, m.ts) for m in clicked}
            deadline = time.monotonic() + timeout
            left = clicked
            while left and time.monotonic() < deadline:
                newer = len(self._slack.messages)
                self._slack.wait_for(lambda m: (m.channel, m.ts) in keys, 0.5, start=newer)
                left = [m for m in self.running() if (m.channel, m.ts) in keys]
            out += self._unshown(start)
            return out, left

    def current(self) -> list[Message]:
        """The newest state of each message the bot sent (an update, or a response that replaces the
        original, stands for the message it changed; a deleted one is gone), least recently changed
        first."""
        states: dict[tuple[str, str], Message] = {}
        latest_response: dict[str, tuple[str, str]] = {}  # response id -> key of its newest message
        for message in list(self._slack.messages):
            key = _key(message)
            if message.kind == "delete":
                states.pop(key, None)
                continue
            if message.kind == "response" and message.replaces:
                rid = message.response_id or ""
                replaced = latest_response.get(rid) or self._clicked.get(rid)
                if replaced is not None:
                    states.pop(replaced, None)
                    key = replaced
            if message.kind == "response":
                latest_response[message.response_id or ""] = key
            states.pop(key, None)  # re-inserted last: the most recently changed
            states[key] = message
        return list(states.values())

    def _click_again(self, label: str) -> tuple[Message, str, dict[str, Any]] | None:
        """The button labelled `label` (empty: the one clicked) of the message the last click clicked."""
        if self._last_click is None:
            return None
        message = self._last_click[0]
        if not label:
            return self._last_click
        return next(
            (
                (message, block_id, element)
                for block_id, element in message.buttons()
                if element.get("text", {}).get("text", "").lower().startswith(label.lower())
            ),
            None,
        )

    def _find_button(self, label: str) -> tuple[Message, str, dict[str, Any]] | None:
        """The newest button still shown (not replaced by the answer to its click, as a used Confirm is)
        whose label starts with `label`, with its message and block id: one of the conversation's, else
        one of a message posted elsewhere (an alert's button)."""
        shown = self.current()
        ordered = [m for m in shown if not self.in_conversation(m)] + [
            m for m in shown if self.in_conversation(m)
        ]
        for message in reversed(ordered):
            for block_id, element in message.buttons():
                if element.get("text", {}).get("text", "").lower().startswith(label.lower()):
                    return message, block_id, element
        return None

    def click_body(
        self, message: Message, block_id: str, element: dict[str, Any], response_id: str, *, user_id: str
    ) -> str:
        """A form-encoded `block_actions` click (tests/fixtures/slack/block_actions.json)."""
        payload: dict[str, Any] = {
            "type": "block_actions",
            "user": {"id": user_id, "username": user_id.lower(), "name": user_id.lower(), "team_id": TEAM_ID},
            "api_app_id": "A0DEMOAPP1",
            "token": "simulated-verification-token",
            "container": {
                "type": "message",
                "message_ts": message.ts,
                "channel_id": message.channel or self.channel_id,
                "is_ephemeral": message.ephemeral,
                "thread_ts": message.thread_ts,
            },
            "trigger_id": self._slack.issue_trigger(),
            "team": {"id": TEAM_ID, "domain": "demo"},
            "enterprise": None,
            "is_enterprise_install": False,
            "channel": {"id": message.channel or self.channel_id, "name": "tpu-ops"},
            "message": {"type": "message", "user": BOT_USER_ID, "ts": message.ts, "text": message.text},
            "state": {"values": {}},
            "response_url": self._slack.response_url(response_id),
            "actions": [{**element, "block_id": block_id, "action_ts": f"{time.time():.6f}"}],
        }
        return urlencode({"payload": json.dumps(payload)})

    def _await(self, start: int, done: Callable[[Message], bool], timeout: float) -> tuple[list[str], bool]:
        """Wait for the first message matching `done`, then until the conversation settles (no new message
        of the conversation for a moment and its newest one is not an intermediate state); messages posted
        elsewhere meanwhile (alerts) neither end nor extend the wait. Return what arrived, those posted
        elsewhere labelled with their channel."""
        deadline = time.monotonic() + timeout

        def own() -> list[Message]:
            return [m for m in self._slack.messages[start:] if m.kind != "user" and self.in_conversation(m)]

        answered = self._slack.wait_for(done, timeout, start=start) is not None
        while answered and time.monotonic() < deadline:
            count = len(own())
            time.sleep(0.3)
            mine = own()
            if len(mine) == count and not (mine and mine[-1].in_progress):
                break
        else:
            mine = own()
            answered = answered and not (mine and mine[-1].in_progress)
        # Also what arrived while the console was idle (alerts), since the last printed message.
        out = self._unshown(start)
        if not answered:
            out.append(f"(no final answer within {timeout:.0f} s)")
        return out, answered


def _ack_text(response: httpx.Response) -> str:
    if not response.content:
        return ""
    try:
        return str(response.json().get("text", ""))
    except ValueError:
        return response.text


def _is_working(response: httpx.Response) -> bool:
    return _ack_text(response).startswith(":hourglass_flowing_sand:")


def _cancel_button(message: Message) -> tuple[str, dict[str, Any]] | None:
    """(block_id, element) of a running operation's Cancel button in `message`, if it has one."""
    return next(
        ((block_id, e) for block_id, e in message.buttons() if e.get("action_id") == "cancel_operation"), None
    )


def _key(message: Message) -> tuple[str, str]:
    """What identifies a message across its updates: its channel and ts (a response's ts is its own)."""
    return message.channel, message.ts


def _first_line(message: Message) -> str:
    return message.render().removeprefix("(updated) ").split("\n", 1)[0][:80]


def _strip_mention(line: str) -> str:
    for prefix in MENTION_PREFIXES:
        if line.startswith(prefix):
            return line[len(prefix) :].strip()
    return line


def run_script(user: SlackUser, lines: Iterable[str], echo: bool = True) -> list[str]:
    """Run console lines (blank lines and `#` comments skipped) up to `quit` or `exit`, as typed at the
    console, printing a transcript.

    Returns:
        The script lines that got no final answer in time, each as `line N: TEXT` (empty: all answered).
    """
    missing = []
    for number, raw in enumerate(lines, 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line in ("quit", "exit"):  # leaves, as at the console: not a question for the bot
            break
        _print_arrived(user)
        if echo:
            print(f"\nyou> {line}")
        out, answered = user.run(line)
        if not answered:
            missing.append(f"line {number}: {line}")
        print("\n".join(out))
    _print_arrived(user)
    return missing


def _print_arrived(user: SlackUser) -> None:
    """Print what arrived since the last line's answer (alerts; each message is printed once), as the
    interactive console's watcher does between lines."""
    arrived = user.arrived()
    if arrived:
        print("\n" + "\n".join(arrived))


def stop_running(user: SlackUser, timeout: float = CANCEL_WAIT_S) -> list[str]:
    """Before the console exits: cancel every operation still running (`SlackUser.cancel_running`), print
    what happened, and return the first line of each one that did not stop within `timeout` seconds."""
    out, left = user.cancel_running(timeout)
    if out:
        print("\n(leaving: cancelling what is still running)\n" + "\n".join(out))
    return [_first_line(m) for m in left]


def interactive(user: SlackUser) -> None:
    """Read lines from the terminal until `quit` or end of input."""
    with contextlib.suppress(ImportError):
        import readline  # noqa: F401  (line editing and history for input())
    print("Type /tpu status, /tpu list, /vllm metrics, @gemma-bot help, click Confirm ... ('quit' to leave)")
    stop = threading.Event()

    def show(lines: list[str]) -> None:  # printed over the prompt, which is then shown again
        print("\n" + "\n".join(lines) + "\n\nyou> ", end="", flush=True)

    threading.Thread(target=user.watch, args=(show, stop), name="console-watch", daemon=True).start()
    try:
        _read_lines(user)
    finally:
        stop.set()


def _read_lines(user: SlackUser) -> None:
    while True:
        try:
            line = input("\nyou> ")
        except (EOFError, KeyboardInterrupt):
            print()
            return
        if line.strip() in ("quit", "exit"):
            return
        if line.strip():
            try:
                print("\n".join(user.run(line)[0]))
            except KeyboardInterrupt:
                print("\n(stopped waiting; the bot may still answer)")
