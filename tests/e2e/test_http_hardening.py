"""HTTP hardening: oversized bodies refused before they are read, /readyz that cannot starve /slack/events,
and the Socket Mode websocket in /readyz."""

from __future__ import annotations

import socket
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any, cast
from urllib.parse import urlsplit

import httpx

from bot.app import MAX_BODY_BYTES, socket_state
from bot.demo import Demo
from bot.observability import Readiness


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
    release = threading.Event()
    original = demo.bot.readiness
    demo.bot.readiness = Readiness(lambda: release.wait(30), lambda: None, auth_ok=False)
    try:
        with ThreadPoolExecutor(max_workers=40) as pool:
            probes = [pool.submit(httpx.get, demo.server.url + "/readyz", timeout=30) for _ in range(40)]
            time.sleep(0.5)
            started = time.monotonic()
            out, answered = demo.user.run("/tpu help", timeout=10)
            ack_s = time.monotonic() - started
            waiting = sum(not p.done() for p in probes)
            release.set()
            statuses = [p.result().status_code for p in probes]
    finally:
        release.set()
        demo.bot.readiness = original
    assert answered and out[0].startswith("[HTTP 200]")
    assert ack_s < 3.0
    assert waiting <= 1  # only the probe running the check waited
    assert statuses.count(503) >= 39


def test_socket_mode_readiness_reports_the_websocket() -> None:
    connected = {"now": False}
    handler = SimpleNamespace(client=SimpleNamespace(is_connected=lambda: connected["now"]))
    readiness = Readiness(
        lambda: None, lambda: None, auth_ok=True, connection_check=socket_state(cast(Any, handler))
    )
    assert (readiness.problem() or "").startswith("Socket Mode websocket not connected")
    connected["now"] = True
    assert readiness.problem() is None
