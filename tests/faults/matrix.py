"""The fault matrix: every read-only command, and the preview of every changing one, against each backend
fault the simulators inject (Google, SSH, vLLM, Slack). This module holds the commands and the judging of a
cell; each family is a test module of its own (tests/faults/test_*_faults.py), so that pytest-xdist's
`--dist loadfile` can run them in different worker processes.

For every cell: a final answer arrives within CELL_LIMIT_S, with no "Traceback"; an error is a `:x:` or red
line; the bot stays up (a follow-up command works); nothing is lost (a message that met a Slack 429 arrives
after Retry-After); no queued resource appears or disappears. One Demo per fault family; the cells of a
family run concurrently, each as its own Slack user in its own channel. The matrix size and the failing
cells are printed at the end of the session, also without `-s` and under pytest-xdist: each test records its
cells on its report (`record_cells` in tests/faults/conftest.py) and `pytest_terminal_summary` in
tests/conftest.py adds them up.
"""

from __future__ import annotations

import itertools
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import pytest

from sim.console import SlackUser
from sim.demo import Demo
from sim.slack import Message

CELL_LIMIT_S = 15.0
"""Seconds a user may wait for the final answer of one cell (backend timeouts are 1 s in these worlds)."""

READ_ONLY = [
    "/tpu help",
    "/tpu list",
    "/tpu list --all-zones",
    "/tpu describe gemma4-qr",
    "/tpu status",
    "/tpu zones",
    "/tpu cost --type v6e-8 --hours 2",
    "/tpu config gcloud",
    "/tpu config startup",
    "/tpu audit --last 5",
    "/vllm health",
    "/vllm endpoint",
    "/vllm models",
    "/vllm info",
    "/vllm metrics",
    "/vllm status",
    "/vllm logs --tail 20",
    "/vllm syslog --tail 20",
    "/vllm bench --prompts 4",
    "/gemma ask hello",
    "/gemma stats hello",
    "/gemma chat what is running",
    "/logs --since 1h",
    "/logs analyze --since 1h",
]
PREVIEWS = [
    "/tpu create fm-new --zone us-east5-a",
    "/tpu delete gemma4-old --zone europe-west4-a",
    "/tpu reset gemma4-old",
    "/tpu start gemma4-qr-node",
    "/tpu stop gemma4-qr-node",
    "/tpu ensure",
    "/tpu find fm-find --type v6e-8",
    "/vllm start",
    "/vllm stop",
    "/vllm restart",
    "/vllm rm",
]
COMMANDS = READ_ONLY + PREVIEWS
SLACK_COMMANDS = [
    "/tpu help",
    "/tpu status",
    "/tpu list",
    "/vllm metrics",
    "/tpu config startup",
    PREVIEWS[0],
]
"""Slack faults hit the delivery path, which is the same for every command: a representative set."""

ERROR_MARKS = (":x:", ":red_circle:", ":warning:", ":no_entry")
_channels = itertools.count(1)


@dataclass
class Outcome:
    family: str
    fault: str
    command: str
    problems: list[str] = field(default_factory=list)


MATRIX: list[Outcome] = []
"""The cells judged so far in this process (a test's own are those it added)."""


# ---- helpers ---------------------------------------------------------------------------------------------


def queued_resources(demo: Demo) -> set[tuple[str, str]]:
    with demo.gcp.world.lock:
        return set(demo.gcp.world.queued_resources)


def new_user(demo: Demo) -> SlackUser:
    channel = f"C0FAULT{next(_channels):04d}"
    demo.slack.join(channel)
    return SlackUser(demo.server.url, demo.signing_secret, demo.slack, channel_id=channel)


def _final(message: Message) -> bool:
    """The answer itself: no progress state, no message of the user, no file (a reply's files go up first)."""
    return not message.in_progress and message.kind not in ("user", "file")


def send(
    demo: Demo, user: SlackUser, line: str, *, mention: bool = False
) -> tuple[list[Message], float, int]:
    """Send a slash command (or a mention) and wait for its final answer.

    Returns:
        (the messages of this conversation, seconds until the final one arrived or -1, the ack's HTTP status).
    """
    start = len(demo.slack.messages)
    started = time.monotonic()
    if mention:
        ts = f"{int(time.time())}.{next(_channels):06d}"
        text = line.lstrip("/")
        demo.slack.record_user_message(user.channel_id, ts, text)
        response = user.post_signed(user.mention_body(text, ts), "application/json")

        def mine(m: Message) -> bool:
            return m.channel == user.channel_id and m.kind != "user"
    else:
        command, _, text = line.partition(" ")
        rid = f"fm{next(_channels)}"
        response = user.post_signed(user.slash_body(command, text, rid), "application/x-www-form-urlencoded")

        def mine(m: Message) -> bool:
            return m.response_id == rid or (m.channel == user.channel_id and m.kind in ("post", "update"))

    if response.status_code != 200:
        return [], -1.0, response.status_code
    try:
        ack = str(response.json().get("text", "")) if response.content else ""
    except ValueError:
        ack = response.text
    if ack and not ack.startswith(":hourglass_flowing_sand:"):  # answered in the ack itself
        synthetic = Message("response", user.channel_id, "0", ack)
        return [synthetic], time.monotonic() - started, 200
    found = demo.slack.wait_for(lambda m: mine(m) and _final(m), CELL_LIMIT_S, start=start)
    elapsed = time.monotonic() - started if found is not None else -1.0
    time.sleep(0.2)  # let a trailing file upload or edit land
    return [m for m in demo.slack.messages[start:] if mine(m)], elapsed, 200


def judge(
    demo: Demo, family: str, fault: str, line: str, *, mention: bool = False, min_s: float = 0.0
) -> Outcome:
    outcome = Outcome(family, fault, line + (" (mention)" if mention else ""))
    user = new_user(demo)
    try:
        messages, elapsed, status = send(demo, user, line, mention=mention)
    finally:
        user.close()
    text = "\n".join(m.render() for m in messages)
    if status != 200:
        outcome.problems.append(f"HTTP {status}")
    elif elapsed < 0:
        outcome.problems.append(f"no final answer within {CELL_LIMIT_S:g} s")
    elif elapsed < min_s:
        outcome.problems.append(f"answer after {elapsed:.2f} s, before Retry-After {min_s:g} s")
    if "Traceback" in text or 'File "' in text:
        outcome.problems.append("a traceback reached the user")
    if elapsed >= 0 and not text.strip():
        outcome.problems.append("empty answer")
    if line in PREVIEWS and elapsed >= 0:
        confirm = any(
            e.get("text", {}).get("text", "").lower().startswith("confirm")
            for m in messages
            for _, e in m.buttons()
        )
        if not confirm and not any(mark in text for mark in ERROR_MARKS):
            outcome.problems.append(f"preview has neither a Confirm button nor an error line: {text[:200]!r}")
    return outcome


def run_cells(demo: Demo, family: str, fault: str, commands: list[str], **kwargs: Any) -> list[Outcome]:
    with ThreadPoolExecutor(max_workers=12) as pool:
        outcomes = list(pool.map(lambda line: judge(demo, family, fault, line, **kwargs), commands))
    MATRIX.extend(outcomes)
    return outcomes


def still_up(demo: Demo, family: str, fault: str) -> None:
    """The follow-up: with the fault cleared, a command that uses every backend still answers."""
    outcome = judge(demo, family, fault, "/tpu status")
    outcome.command = "follow-up /tpu status"
    MATRIX.append(outcome)


def unhandled(records: list[logging.LogRecord]) -> list[str]:
    return [
        f"{r.name}: {r.getMessage()[:200]}"
        for r in records
        if r.exc_info is not None
        and r.levelno >= logging.ERROR
        and r.name.startswith(("bot", "ops", "slack"))
    ]


def check_family(
    demo: Demo, before: set[tuple[str, str]], family: str, caplog: pytest.LogCaptureFixture
) -> None:
    """The checks of a whole family after its cells: no queued resource appeared or disappeared, the bot
    logged no unhandled exception, and no cell of `family` failed in this process.

    Raises:
        AssertionError: naming each failed cell as "[fault] command: problems".
    """
    after = queued_resources(demo)
    if after != before:
        MATRIX.append(Outcome(family, "*", "queued resources", [f"changed: {sorted(before ^ after)}"]))
    errors = unhandled(caplog.records)
    if errors:
        MATRIX.append(Outcome(family, "*", "bot log", [f"unhandled exception: {e}" for e in errors[:5]]))
    failed = [o for o in MATRIX if o.family == family and o.problems]
    assert not failed, "\n".join(f"[{o.fault}] {o.command}: {'; '.join(o.problems)}" for o in failed)


SLACK_RETRY_AFTER_S = 2
"""The Retry-After of the injected Slack 429s, in seconds: a cell answering sooner failed to wait."""


def run_slack_cells(demo: Demo, method: str, *, mention: bool) -> None:
    """Each of SLACK_COMMANDS with one Slack API error on the next call of `method` ("response" for a
    `response_url` post, or "chat.postMessage"; a mention's help goes out through chat.postEphemeral, so
    that method takes the fault then), one cell at a time since the fault is taken by whichever call comes
    next: a 429 with Retry-After, invalid_blocks and msg_too_long (the simulator answers these with HTTP 400
    on `response_url` and HTTP 200 on a Web API method). The cells, then the follow-up, are added to MATRIX
    as family "slack"."""
    for name, kwargs in (
        ("429", {"error": "ratelimited", "status": 429, "retry_after": SLACK_RETRY_AFTER_S}),
        ("invalid_blocks", {"error": "invalid_blocks", "status": 400 if method == "response" else 200}),
        ("msg_too_long", {"error": "msg_too_long", "status": 400 if method == "response" else 200}),
    ):
        for line in SLACK_COMMANDS:
            ephemeral = mention and line.endswith(" help")
            target = "chat.postEphemeral" if ephemeral and method == "chat.postMessage" else method
            demo.slack.fail_next(target, count=1, **kwargs)  # type: ignore[arg-type]
            outcome = judge(
                demo,
                "slack",
                f"{method} {name}",
                line,
                mention=mention,
                min_s=SLACK_RETRY_AFTER_S if name == "429" else 0.0,
            )
            MATRIX.append(outcome)
            demo.slack._faults.clear()
    still_up(demo, "slack", f"{method} faults")
