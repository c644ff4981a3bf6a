"""HTTP hardening: oversized bodies refused before they are read, /readyz that cannot starve /slack/events,
and the Socket Mode websocket in /readyz."""

from __future__ import annotations

import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any, cast
from urllib.parse import urlsplit

import httpx

from bot.app import MAX_BODY_BYTES, socket_state
from bot.observability import Readiness
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
