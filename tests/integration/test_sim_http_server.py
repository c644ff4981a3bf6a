"""The simulators' HTTP server says nothing when a client resets its connection (it gave up), and still
prints any other handler error as the stdlib does."""

from __future__ import annotations

import socket
import struct
import threading
from http.server import BaseHTTPRequestHandler

import pytest

from sim.http_server import SimHttpServer


class _Handler(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        if self.path == "/boom":
            raise ValueError("a simulator bug")
        self.send_response(200)
        self.end_headers()

    def log_message(self, format: str, *args: object) -> None:
        return


def _serve() -> tuple[SimHttpServer, threading.Thread]:
    server = SimHttpServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server, thread


def _reset_mid_request(port: int) -> None:
    """Send half a request, then close with SO_LINGER 0: the kernel answers with a reset."""
    client = socket.create_connection(("127.0.0.1", port))
    client.sendall(b"GET / HTTP/1.1\r\nHost: x")
    client.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    client.close()


def test_a_client_reset_is_quiet_and_a_bug_is_not(capfd: pytest.CaptureFixture[str]) -> None:
    server, thread = _serve()
    try:
        port = server.server_address[1]
        for _ in range(5):
            _reset_mid_request(port)
        with socket.create_connection(("127.0.0.1", port)) as client:
            client.sendall(b"GET /boom HTTP/1.1\r\nHost: x\r\n\r\n")
            client.recv(100)
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
    err = capfd.readouterr().err
    assert "ValueError: a simulator bug" in err
    assert "ConnectionResetError" not in err and "BrokenPipeError" not in err
