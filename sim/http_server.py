"""The HTTP server of the simulators: stdlib `ThreadingHTTPServer`, quiet when a client goes away, with the
listen backlog of the servers it stands in for.

A client that closes a keep-alive connection with data unread (it gave up on a slow answer: a deadline, a
timeout, a process stopping) resets it; the handler thread then gets `ConnectionResetError` or
`BrokenPipeError`, and `socketserver.BaseServer.handle_error` prints the traceback to stderr (CPython
`Lib/socketserver.py`). For a simulator that is the normal end of a conversation, not an error.
"""

from __future__ import annotations

import sys
from http.server import ThreadingHTTPServer
from typing import Any


class SimHttpServer(ThreadingHTTPServer):
    """`ThreadingHTTPServer` with daemon handler threads, silent about clients that went away; any other
    exception of a handler is printed as the stdlib does."""

    daemon_threads = True
    # socketserver listens with a backlog of 5: a client opening 100 connections at once (a /fleet of 50
    # deployments) lost SYNs past the fifth and retried them a second later, a delay no real backend adds.
    # uvicorn (vLLM's server) listens with 2048 (its `--backlog` default), Google's front ends more.
    request_queue_size = 2048

    def handle_error(self, request: Any, client_address: Any) -> None:
        if isinstance(sys.exc_info()[1], ConnectionError):  # reset, broken pipe, aborted: the client left
            return
        super().handle_error(request, client_address)
