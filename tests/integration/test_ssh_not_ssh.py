"""An SSH port that answers with something that is not SSH (here an HTTP server's reply) is named as such,
with the catalogue's fix, through paramiko's real handshake against a real socket on loopback."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator

import pytest

from ops.errors import BackendUnavailable
from ops.vllm.ssh import RemoteHost
from sim.host import generate_ed25519_key

PINNED = "AAAAC3NzaC1lZDI1NTE5AAAAIOMqqnkVzrm0SdG6UOoqKLsabgH5C9okWi0dh2l9GKJl"  # never reached
HTTP_REPLY = b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"


@pytest.fixture()
def not_ssh() -> Iterator[int]:
    server = socket.create_server(("127.0.0.1", 0))
    stop = threading.Event()

    def serve() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.sendall(HTTP_REPLY)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join(timeout=2)
    server.close()


def test_port_answering_http_is_not_ssh(not_ssh: int) -> None:
    host = RemoteHost(
        "127.0.0.1",
        not_ssh,
        user="tpu-chatops",
        pkey=generate_ed25519_key(),
        pinned_host_keys={"ssh-ed25519": PINNED},
        connect_timeout_s=5,
    )
    with pytest.raises(BackendUnavailable) as caught:
        host.run("docker_start", container="vllm-gemma4")
    host.close()
    assert "not with SSH" in caught.value.message
    assert "SSH_PORT" in caught.value.hint and "not the vLLM port" in caught.value.hint
