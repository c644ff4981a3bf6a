"""Worker processes for CPU-heavy work (log template mining, charts, parsing large outputs).

Slack acks are answered by threads of the bot process; Python runs one thread at a time per process (the
GIL), so a long CPU-bound job on a command thread delays every ack. Such jobs run here instead, in a pool
of `CPU_WORKERS` processes started with "spawn" (a fork of the threaded bot process could inherit a held
lock). `start()` starts them and has them import what they need without waiting (at a lower priority on a busy
machine that takes seconds), so the bot warms up its own threads meanwhile (`bot.slack.app.warm_up`).
"""

from __future__ import annotations

import contextlib
import importlib
import multiprocessing
import os
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ProcessPoolExecutor, ThreadPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from typing import Any, TypeVar

from ops.errors import BackendUnavailable

__all__ = ["ACKS", "ACK_YIELD_MAX_S", "AckGate", "CpuWorkers", "prestart"]

T = TypeVar("T")

NICENESS = 10
"""Added to the worker processes' nice value: on a busy machine the kernel gives the bot's own process (and
so the acks) the CPU first."""
WARM_MODULES = ("llm.logwindow", "ops.vllm.bench")
"""Modules a worker imports when warmed: the log reader and miner, and the chart renderer."""


def _import(modules: tuple[str, ...]) -> int:
    for name in modules:
        importlib.import_module(name)
    return multiprocessing.current_process().pid or 0


class CpuWorkers:
    """A lazily started process pool. Thread-safe.

    Args:
        processes: worker processes (Settings.cpu_workers).
    """

    def __init__(self, processes: int = 1) -> None:
        self.processes = processes
        self._pool: ProcessPoolExecutor | None = None
        self._lock = threading.Lock()

    def _executor(self) -> ProcessPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ProcessPoolExecutor(
                    self.processes,
                    mp_context=multiprocessing.get_context("spawn"),
                    initializer=os.nice,
                    initargs=(NICENESS,),
                )
            return self._pool

    def run(self, func: Callable[..., T], /, *args: Any, **kwargs: Any) -> T:
        """`func(*args, **kwargs)` in a worker process; blocks the calling thread (not the GIL) until done.

        `func` must be a module-level function; arguments and result must pickle.

        Raises:
            What `func` raises (re-raised here). BackendUnavailable: a worker process died (the pool is
            restarted for the next call).
        """
        try:
            return self._executor().submit(func, *args, **kwargs).result()
        except BrokenProcessPool as exc:
            with self._lock:
                self._pool = None
            raise BackendUnavailable(
                "a worker process of the bot died", "retry; if it repeats, check the bot's memory limit"
            ) from exc

    def start(self) -> list[Future[int]]:
        """Start every worker process and have each import WARM_MODULES; returns at once.

        Returns:
            One future per process, done when its imports are (its result: the worker's pid).
        """
        pool = self._executor()
        return [pool.submit(_import, WARM_MODULES) for _ in range(self.processes)]

    def warm(self) -> None:
        """`start`, then wait until every worker process has imported WARM_MODULES.

        Raises:
            What an import raised; BrokenProcessPool when a worker died.
        """
        for future in self.start():
            future.result()

    def shutdown(self) -> None:
        """Stop the workers (waits for running jobs)."""
        with self._lock:
            pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)


def prestart(pool: ThreadPoolExecutor, threads: int, init: Callable[[], object] | None = None) -> None:
    """Start `threads` threads of `pool` now (a ThreadPoolExecutor starts them one per submit, during the
    first burst otherwise), running `init` once in each; blocks until all run (at most 60 s)."""
    barrier = threading.Barrier(threads + 1)

    def start() -> None:
        if init is not None:
            init()
        barrier.wait(60)

    futures = [pool.submit(start) for _ in range(threads)]
    barrier.wait(60)
    for future in futures:
        future.result()


ACK_YIELD_MAX_S = 5.0
"""How long command work yields to a burst of acks at most, in seconds (`AckGate.wait_quiet`). Slack wants
each request acked within 3 s (https://docs.slack.dev/tools/bolt-python/concepts/acknowledge); a burst is
acked first and its work waits behind it. Requests still arriving after 5 s are the steady load, not a
burst, and work that kept waiting for a gap in them might never run; every waiting command was acked
already, so waiting delays its answer, never its ack."""


class AckGate:
    """Acks first: counts the Slack requests being answered, and lets command work wait until a burst ends.

    One process runs one Python thread at a time, so a command starting its work (building requests,
    parsing answers, writing the audit trail) while a burst of requests is still being acked delays those
    acks. `bot.slack.app.wsgi` calls `enter`/`leave` around each Slack request; `bot.commands.runner.Runner`
    calls
    `wait_quiet` on a pool thread before each command it queued (not for a form, which must open within
    the trigger_id's 3 s, and never while answering a request, which would wait for itself): it waits until
    no request has been in flight for `quiet_s`, as long as the burst lasts but at most ACK_YIELD_MAX_S, so
    a burst is acked at the speed of an empty app and its work starts right after.
    """

    def __init__(self) -> None:
        self._changed = threading.Condition()
        self._inflight = 0
        self._last_leave = 0.0
        self._work = threading.local()  # `.on`: this thread runs command work (`work`)

    def enter(self) -> None:
        """A Slack request arrived (its ack is being computed)."""
        with self._changed:
            self._inflight += 1

    def leave(self) -> None:
        """A Slack request was answered."""
        with self._changed:
            self._inflight -= 1
            self._last_leave = time.monotonic()
            if self._inflight == 0:
                self._changed.notify_all()

    def wait_quiet(self, quiet_s: float = 0.02, max_s: float = ACK_YIELD_MAX_S) -> bool:
        """Block until no request has been in flight for `quiet_s` seconds, or `max_s` seconds passed.

        Returns:
            True when it became quiet, False when `max_s` ran out first.
        """
        deadline = time.monotonic() + max_s
        with self._changed:
            while True:
                now = time.monotonic()
                quiet_for = now - self._last_leave if self._inflight == 0 else 0.0
                if self._inflight == 0 and quiet_for >= quiet_s:
                    return True
                if now >= deadline:
                    return False
                # in flight: woken by the last leave; quiet but not for long enough: the rest of quiet_s
                self._changed.wait(min(deadline - now, quiet_s - quiet_for if self._inflight == 0 else max_s))

    @contextlib.contextmanager
    def work(self) -> Iterator[None]:
        """Marks the calling thread as running command work for the block, after `wait_quiet`: within it,
        `pause` yields to acks too."""
        self.wait_quiet()
        self._work.on = True
        try:
            yield
        finally:
            self._work.on = False

    def pause(self) -> None:
        """Between two steps of command work (before an audit row, before a reply is sent): `wait_quiet`
        when the calling thread is in `work`, so a burst that arrives while commands run is acked first;
        elsewhere (a listener answering a request, a scheduler) nothing, as it would wait for itself or
        for no reason."""
        if getattr(self._work, "on", False):
            self.wait_quiet()


ACKS = AckGate()
"""The process's gate (one HTTP server per process)."""
