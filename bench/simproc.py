"""Run a SIMULATED backend (Google, vLLM, Slack) in its own process, for benchmarks.

A benchmark must not share a process (and its interpreter lock) with what it measures: each simulator
started here has its own process, and the benchmark drives it through a pipe.
`SimProcess(factory, *args)` calls `factory(*args)` in a new "spawn" process, starts the simulator and
answers `call(function, *args)` with `function(simulator, *args)`; `function` must be a module-level
function (it is sent by reference).
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any

SIM_NICENESS = 10
"""The simulators stand for remote services: on this machine they yield the CPU to what is measured."""


def _serve(conn: Connection, factory: Callable[..., Any], args: tuple[Any, ...]) -> None:
    os.nice(SIM_NICENESS)
    sim = factory(*args)
    sim.start()
    conn.send(sim.url)
    while True:
        request = conn.recv()
        if request is None:
            break
        function, call_args = request
        try:
            conn.send((True, function(sim, *call_args)))
        except Exception as exc:  # report to the benchmark, keep serving
            conn.send((False, f"{type(exc).__name__}: {exc}"))
    sim.stop()
    conn.send("stopped")


class SimProcess:
    """A simulator in its own process. Use as a context manager; `url` is where it listens."""

    def __init__(self, factory: Callable[..., Any], *args: Any) -> None:
        context = multiprocessing.get_context("spawn")
        self._conn, child = context.Pipe()
        self._process = context.Process(target=_serve, args=(child, factory, args), daemon=True)
        self._process.start()
        self.url: str = self._conn.recv()
        assert self._process.pid is not None  # started above
        self.pid: int = self._process.pid

    def call(self, function: Callable[..., Any], *args: Any) -> Any:
        """`function(simulator, *args)` in the simulator's process; returns its (pickled) result."""
        self._conn.send((function, args))
        ok, value = self._conn.recv()
        if not ok:
            raise RuntimeError(value)
        return value

    def close(self) -> None:
        if self._process.is_alive():
            self._conn.send(None)
            self._conn.recv()
            self._process.join(10)
        if self._process.is_alive():
            self._process.kill()

    def __enter__(self) -> SimProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
