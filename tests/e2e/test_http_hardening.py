"""HTTP hardening: oversized bodies refused before they are read, /readyz that cannot starve /slack/events,
the Socket Mode websocket in /readyz, and hostile requests: every malformed one gets a 4xx before anything of
it is parsed, a signed command is answered while hostile bodies are refused, nothing of an unsigned body is
logged, a replayed slash command runs once."""

from __future__ import annotations

import io
import json
import logging
import re
import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any, cast
from urllib.parse import urlsplit

import httpx
import pytest

from bot.observability import Readiness, setup_logging
from bot.slack import app as slack_app
from bot.slack.app import MAX_BODY_BYTES, RefusalLog, socket_state
from bot.slack.listeners import REPLAYED
from sim.demo import Demo


def test_an_oversized_body_is_refused_from_its_length_before_it_is_sent(demo: Demo) -> None:
    url = urlsplit(demo.server.url)
    with socket.create_connection((url.hostname, url.port), timeout=5) as conn:
        conn.sendall(
            b"POST /slack/events HTTP/1.1\r\nHost: bot\r\nContent-Type: application/json\r\n"
            + f"Content-Length: {MAX_BODY_BYTES * 50}\r\n\r\n".encode()
            + b"{"
        )
        answer = conn.recv(4096).decode(errors="replace")  # answered with 49 MB still unsent
    assert answer.startswith("HTTP/1.1 413")


def test_readyz_never_waits_on_a_slow_check_and_slash_commands_still_ack(demo: Demo) -> None:
    release, checking = threading.Event(), threading.Event()

    def slow_auth_test() -> None:
        checking.set()
        release.wait(60)

    original = demo.bot.readiness
    demo.bot.readiness = Readiness(slow_auth_test, lambda: None, auth_ok=False)
    url = demo.server.url + "/readyz"
    try:
        with ThreadPoolExecutor(max_workers=1) as pool:
            first = pool.submit(httpx.get, url, timeout=90)
            assert checking.wait(30)
            # While that check hangs, more probes than the server has threads each get the last result, and a
            # slash command is still acknowledged and answered: no probe holds a thread.
            probes = [httpx.get(url, timeout=30) for _ in range(3 * demo.settings.worker_threads)]
            out, answered = demo.user.run("/tpu help", timeout=30)
            assert not first.done()
            release.set()
            assert first.result().status_code == 200
    finally:
        release.set()
        demo.bot.readiness = original
    assert all(p.status_code == 503 and "not checked yet" in p.text for p in probes)
    assert answered and out[0].startswith("[HTTP 200]")


def test_socket_mode_readiness_reports_the_websocket() -> None:
    connected = {"now": False}
    handler = SimpleNamespace(client=SimpleNamespace(is_connected=lambda: connected["now"]))
    readiness = Readiness(
        lambda: None, lambda: None, auth_ok=True, connection_check=socket_state(cast(Any, handler))
    )
    assert (readiness.problem() or "").startswith("Socket Mode websocket not connected")
    connected["now"] = True
    assert readiness.problem() is None


# ---- hostile and malformed requests (signature first, nothing slow under the logging lock) ----------------

HOSTILE_BODY = json.dumps({"type": "event_callback", "text": "password: x" + " " * 60_000}).encode()
FORGED = "\n2026-01-01 00:00:00,000 INFO bot.oncall.checks: audit action=auto-recover command='/tpu delete x'"


def _raw(demo: Demo, request: bytes) -> str:
    url = urlsplit(demo.server.url)
    with socket.create_connection((url.hostname, url.port), timeout=10) as conn:
        conn.sendall(request)
        return conn.recv(4096).decode(errors="replace")


@pytest.mark.parametrize(
    ("headers", "body", "status"),
    [
        ({"X-Slack-Request-Timestamp": "12abc", "X-Slack-Signature": "v0=" + "0" * 64}, b"text=x", 401),
        ({"X-Slack-Request-Timestamp": "1e9", "Content-Type": "application/json"}, b"{}", 401),
        ({"X-Slack-Request-Timestamp": str(10**30)}, b"{", 401),
        ({"Content-Type": "application/x-www-form-urlencoded"}, b"{not a form", 401),
        ({"Content-Type": "application/json"}, b"[" * 200_000, 401),
        ({"Content-Type": "text/plain"}, b"\xff\xfe", 401),
        ({"X-Padding": "x" * 40_000}, b"text=x", 431),
    ],
    ids=[
        "odd-timestamp",
        "exponent-timestamp",
        "huge-timestamp",
        "form-with-brace",
        "deep-json",
        "bytes",
        "headers",
    ],
)
def test_a_malformed_unsigned_request_gets_a_4xx(
    demo: Demo, headers: dict[str, str], body: bytes, status: int
) -> None:
    response = httpx.post(demo.server.url + "/slack/events", content=body, headers=headers, timeout=30)
    assert response.status_code == status, response.text


@pytest.mark.parametrize(
    ("content_type", "body", "status"),
    [
        ("application/x-www-form-urlencoded", "{not a form", 400),
        ("application/json", "[" * 200_000, 400),
        ("application/json", '{"a":' * 65 + "1" + "}" * 65, 400),
        ("text/plain", "text=x", 415),
    ],
    ids=["form-with-brace", "deep-json", "too-deep", "content-type"],
)
def test_a_malformed_signed_request_gets_a_4xx_not_a_500(
    demo: Demo, content_type: str, body: str, status: int
) -> None:
    assert demo.user.post_signed(body, content_type).status_code == status


def test_get_and_a_chunked_signed_request(demo: Demo) -> None:
    assert httpx.get(demo.server.url + "/slack/events").status_code == 405
    body = demo.user.slash_body("/tpu", "help", "chunked").encode()
    ts = str(int(time.time()))
    signature = demo.user._verifier.generate_signature(timestamp=ts, body=body)
    head = (
        "POST /slack/events HTTP/1.1\r\nHost: bot\r\nContent-Type: application/x-www-form-urlencoded\r\n"
        f"X-Slack-Request-Timestamp: {ts}\r\nX-Slack-Signature: {signature}\r\n"
        "Transfer-Encoding: chunked\r\nConnection: close\r\n\r\n"
    ).encode()
    half = len(body) // 2
    chunks = b"".join(f"{len(part):x}\r\n".encode() + part + b"\r\n" for part in (body[:half], body[half:]))
    assert _raw(demo, head + chunks + b"0\r\n\r\n").startswith("HTTP/1.1 200")


def test_an_unsigned_body_is_never_logged_and_log_lines_cannot_be_forged(
    demo: Demo, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(slack_app, "_REFUSALS", RefusalLog())  # this refusal is logged, not counted
    stream = io.StringIO()
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    try:
        setup_logging(logging.INFO, json_format=False, stream=stream)
        body = json.dumps({"text": "x" + FORGED, "pad": "password: x" + " " * 60_000}).encode()
        headers = {"Content-Type": "application/json", "X-Slack-Request-Timestamp": str(int(time.time()))}
        headers["X-Slack-Signature"] = "v0=" + "0" * 64
        assert httpx.post(demo.server.url + "/slack/events", content=body, headers=headers).status_code == 401
        logging.getLogger("bot.test").warning("a value from a request: %s", "x" + FORGED)
    finally:
        root.handlers[:] = saved[0]
        root.setLevel(saved[1])
    lines = stream.getvalue().splitlines()
    assert any("refused 401 on /slack/events: signature does not match" in line for line in lines)
    assert all("password: x" not in line and "pad" not in line for line in lines)
    record_start = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} [A-Z]+ [\w.]+: ")
    assert all(record_start.match(line) or line.startswith("    ") for line in lines)
    assert not any(line.startswith("2026-01-01 00:00:00,000") for line in lines)


def test_a_signed_command_is_answered_while_16_hostile_bodies_are_refused(demo: Demo) -> None:
    """The issue's load: sixteen senders of 60 KB unsigned bodies (a password and 60,000 spaces) keep
    posting while a signed `/tpu list` is sent; it is acked and answered, and every hostile body gets 401.
    (How fast is measured by bench/hostile.py, not here.)"""
    stop = threading.Event()
    statuses: list[int] = []
    events = demo.server.url + "/slack/events"

    def hostile() -> None:
        with httpx.Client(timeout=120) as client:
            while not stop.is_set():
                headers = {"Content-Type": "application/json", "X-Slack-Signature": "v0=" + "0" * 64}
                headers["X-Slack-Request-Timestamp"] = str(int(time.time()))
                response = client.post(events, content=HOSTILE_BODY, headers=headers)
                statuses.append(response.status_code)

    with ThreadPoolExecutor(max_workers=16) as pool:
        senders = [pool.submit(hostile) for _ in range(16)]
        try:
            while len(statuses) < 16:  # every sender is posting
                time.sleep(0.05)
            out, answered = demo.user.run("/tpu list", timeout=60)
            healthy = httpx.get(demo.server.url + "/healthz", timeout=30).status_code
        finally:
            stop.set()
        for sender in senders:
            sender.result()
    assert answered and out[0].startswith("[HTTP 200]"), out
    assert "gemma4-qr" in "\n".join(out)
    assert healthy == 200
    assert statuses and set(statuses) == {401}


def test_a_replayed_slash_command_runs_once(demo: Demo) -> None:
    body = demo.user.slash_body("/tpu", "list", "replayed")
    first = demo.user.post_signed(body, "application/x-www-form-urlencoded")
    again = demo.user.post_signed(body, "application/x-www-form-urlencoded")
    assert first.status_code == again.status_code == 200
    assert REPLAYED in again.text
    assert demo.slack.wait_for(lambda m: m.response_id == "replayed", timeout=20) is not None
    time.sleep(1.0)  # time for a second run to answer, were there one
    assert len([m for m in demo.slack.messages if m.response_id == "replayed"]) == 1


def test_an_overflowing_duration_gets_the_usage_line(demo: Demo) -> None:
    out, _ = demo.user.run("/tpu create x1 --flex-start --max-run 99999999999999999999d", timeout=20)
    text = "\n".join(out)
    assert out[0].startswith("[HTTP 200]") and "too long (at most 365d)" in text and "Usage" in text
    assert "Traceback" not in text


def test_a_model_that_ignores_max_tokens_still_gets_a_final_answer(demo: Demo) -> None:
    demo.vllm.set_output_fault("runaway")  # 2 MB streamed, whatever max_tokens says
    try:
        out, answered = demo.user.run("/gemma ask say hello", timeout=60)
    finally:
        demo.vllm.set_output_fault(None)
    text = "\n".join(out)
    assert answered, out
    assert "The answer was cut at 100,000 characters (the server ignored max_tokens)" in text
