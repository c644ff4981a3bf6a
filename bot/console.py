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
import time
from collections.abc import Iterable
from urllib.parse import urlencode

import httpx
from slack_sdk.signature import SignatureVerifier

from sim.slack import BOT_USER_ID, TEAM_ID, Message, SlackSimulator

DEMO_USER = "U0DEMOUSR1"
DEMO_CHANNEL = "C0DEMOCHN1"
MENTION_PREFIXES = ("@gemma-bot", "@bot")


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
        self.user_id = user_id
        self.channel_id = channel_id

    def close(self) -> None:
        self._http.close()

    def post_signed(self, body: str, content_type: str, *, timestamp: int | None = None) -> httpx.Response:
        """POST a body to the bot with Slack's signature headers (v0 HMAC-SHA256 of `v0:ts:body`)."""
        ts = str(timestamp if timestamp is not None else int(time.time()))
        headers = {
            "Content-Type": content_type,
            "X-Slack-Request-Timestamp": ts,
            "X-Slack-Signature": self._verifier.generate_signature(timestamp=ts, body=body) or "",
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
                "trigger_id": f"{next(self._ids)}.{TEAM_ID}.simulated",
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
                "event_id": f"Ev{int(time.time())}{next(self._ids):05d}",
                "event_time": int(time.time()),
            }
        )

    def run(self, line: str, *, timeout: float = 30.0) -> tuple[list[str], bool]:
        """Send one console line and wait for the bot's answer.

        Returns:
            (lines to print, whether a final answer arrived within `timeout` seconds).
        """
        line = line.strip()
        start = len(self._slack.messages)
        if line.startswith("/"):
            command, _, text = line.partition(" ")
            response_id = f"r{next(self._ids)}"
            response = self.post_signed(
                self.slash_body(command, text, response_id), "application/x-www-form-urlencoded"
            )
            out = [f"[HTTP {response.status_code}] {_ack_text(response)}".rstrip()]
            if response.status_code != 200 or not _is_working(response):
                return out, response.status_code == 200

            def done(m: Message) -> bool:
                return m.response_id == response_id
        else:
            text = _strip_mention(line)
            ts = f"{int(time.time())}.{next(self._ids):06d}"
            response = self.post_signed(self.mention_body(text, ts), "application/json")
            out = [f"[HTTP {response.status_code}]"]
            if response.status_code != 200:
                return out, False

            def done(m: Message) -> bool:
                return m.thread_ts == ts and m.kind == "post"

        answered = self._slack.wait_for(done, timeout) is not None
        _wait_quiet(self._slack)
        out += [m.render() for m in self._slack.messages[start:]]
        if not answered:
            out.append(f"(no answer within {timeout:.0f} s)")
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


def _strip_mention(line: str) -> str:
    for prefix in MENTION_PREFIXES:
        if line.startswith(prefix):
            return line[len(prefix) :].strip()
    return line


def _wait_quiet(slack: SlackSimulator, quiet_s: float = 0.3, limit_s: float = 3.0) -> None:
    """Wait until no new message has arrived for `quiet_s` (files follow their message)."""
    deadline = time.monotonic() + limit_s
    count = len(slack.messages)
    while time.monotonic() < deadline:
        time.sleep(quiet_s)
        if len(slack.messages) == count:
            return
        count = len(slack.messages)


def run_script(user: SlackUser, lines: Iterable[str], echo: bool = True) -> int:
    """Run console lines (blank lines and `#` comments skipped), printing a transcript.

    Returns:
        The number of commands that got no answer in time (0 means all answered).
    """
    missing = 0
    for raw in lines:
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if echo:
            print(f"\nyou> {line}")
        out, answered = user.run(line)
        missing += 0 if answered else 1
        print("\n".join(out))
    return missing


def interactive(user: SlackUser) -> None:
    """Read lines from the terminal until `quit` or end of input."""
    with contextlib.suppress(ImportError):
        import readline  # noqa: F401  (line editing and history for input())
    print("Type /tpu status, /tpu list, /vllm metrics, @gemma-bot help ... ('quit' to leave)")
    while True:
        try:
            line = input("\nyou> ")
        except (EOFError, KeyboardInterrupt):
            print()
            return
        if line.strip() in ("quit", "exit"):
            return
        if line.strip():
            print("\n".join(user.run(line)[0]))
