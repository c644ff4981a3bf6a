"""bot.commands.workers: CPU-heavy work in worker processes, thread pools started before the first burst, and
`/readyz` saying "warming up" until the bot has warmed up."""

from __future__ import annotations

import os
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from bot.commands.workers import NICENESS, AckGate, CpuWorkers, prestart
from bot.observability import Readiness


def _pid_and_niceness() -> tuple[int, int]:
    return os.getpid(), os.nice(0)


@pytest.mark.slow  # spawns a worker process that imports the log miner and the chart renderer
def test_work_runs_in_a_worker_process_at_a_lower_priority() -> None:
    workers = CpuWorkers(1)
    try:
        workers.warm()
        pid, niceness = workers.run(_pid_and_niceness)
    finally:
        workers.shutdown()
    assert pid != os.getpid()
    assert niceness >= min(19, os.nice(0) + NICENESS)


def test_prestart_starts_every_thread_and_runs_init_in_each() -> None:
    names: set[str] = set()
    lock = threading.Lock()

    def init() -> None:
        with lock:
            names.add(threading.current_thread().name)

    with ThreadPoolExecutor(6, thread_name_prefix="warm") as pool:
        prestart(pool, 6, init)
        assert len(names) == 6


def test_readyz_waits_for_the_warm_up() -> None:
    warmed = threading.Event()
    readiness = Readiness(lambda: None, lambda: None, auth_ok=True, warmed=warmed)
    assert readiness.problem() == "warming up (worker processes, thread pools, API clients)"
    warmed.set()
    assert readiness.problem() is None


def test_command_work_waits_for_a_quiet_moment_between_acks_but_not_for_long() -> None:
    gate = AckGate()
    assert gate.wait_quiet(quiet_s=0.02, max_s=60.0)  # nothing in flight: only the quiet period
    gate.enter()
    started = time.monotonic()  # before the timer starts: a loaded machine may run it at once
    threading.Timer(0.2, gate.leave).start()
    assert gate.wait_quiet(quiet_s=0.05, max_s=60.0)
    assert time.monotonic() - started >= 0.25  # the request left, then 50 ms of quiet
    gate.enter()  # never leaves: bounded by max_s
    started = time.monotonic()
    assert not gate.wait_quiet(quiet_s=0.02, max_s=0.3)
    assert time.monotonic() - started >= 0.3


def test_command_work_waits_as_long_as_a_burst_lasts_then_starts() -> None:
    gate = AckGate()
    stop = threading.Event()

    def burst() -> None:  # overlapping requests for about 1 s: never a quiet moment, two in flight at once
        gate.enter()
        while not stop.wait(0.01):
            gate.enter()
            gate.leave()
        gate.leave()

    sender = threading.Thread(target=burst)
    started = time.monotonic()
    sender.start()
    threading.Timer(1.0, stop.set).start()
    try:
        assert gate.wait_quiet(quiet_s=0.02, max_s=30.0)
        assert time.monotonic() - started >= 1.0  # longer than a fixed 0.5 s: the whole burst
    finally:
        stop.set()
        sender.join()


def test_command_steps_pause_for_a_later_burst_but_nothing_else_does() -> None:
    gate = AckGate()
    gate.enter()  # a request in flight
    started = time.monotonic()
    gate.pause()  # not command work (a listener, a scheduler): no wait, it might be waiting for itself
    assert time.monotonic() - started < 1.0
    paused: list[float] = []

    def command() -> None:
        with gate.work():  # starts once the first request has left
            gate.enter()  # a later burst arrives while the command runs
            threading.Timer(0.3, gate.leave).start()
            step = time.monotonic()
            gate.pause()  # between two steps: waits for that burst to be acked
            paused.append(time.monotonic() - step)
        gate.pause()  # after its work the thread is no longer marked

    worker = threading.Thread(target=command)
    worker.start()
    threading.Timer(0.1, gate.leave).start()
    worker.join(timeout=30)
    assert paused and paused[0] >= 0.3
