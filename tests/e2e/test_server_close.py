"""The bot's HTTP server stops cleanly while clients are still sending: the loop ends, and no worker thread
finishing a response writes to a closed descriptor (waitress's "Exception when servicing", `OSError:
[Errno 9] Bad file descriptor`)."""

from __future__ import annotations

import logging
import threading

import httpx
import pytest

from bot.slack.app import HttpServer
from sim.demo import Demo


def test_close_while_requests_are_in_flight_logs_no_error(
    demo: Demo, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.ERROR)
    server = HttpServer(demo.bot, "127.0.0.1", 0, threads=8)
    serving = threading.Thread(target=server.serve_forever, daemon=True)
    serving.start()
    stop = threading.Event()
    answered: list[int] = []

    def hammer() -> None:
        with httpx.Client(timeout=5) as client:
            while not stop.is_set():
                try:
                    answered.append(client.get(f"{server.url}/healthz").status_code)
                except httpx.HTTPError:  # refused or cut once the server closes
                    continue

    clients = [threading.Thread(target=hammer, daemon=True) for _ in range(4)]
    for client in clients:
        client.start()
    while len(answered) < 50:
        threading.Event().wait(0.05)

    server.close()
    serving.join(10)
    stop.set()
    for client in clients:
        client.join(10)

    assert not serving.is_alive(), "serve_forever did not end"
    assert set(answered) == {200}
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
