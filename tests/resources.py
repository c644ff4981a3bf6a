"""What the test process holds: open file descriptors, threads and child processes, grouped by kind.

Read from Linux's /proc (proc(5)): /proc/self/fd links name what each descriptor is ("socket:[…]",
"pipe:[…]", "anon_inode:[eventpoll]", a path), /proc/self/task/*/children lists the child processes.
Elsewhere every count is empty (the guard then has nothing to check).

`ResourceWatch` (registered by tests/conftest.py) snapshots them before the first test and after each test
module (after its module fixtures are torn down) and, with `--resources`, prints each module's growth. Under
CI=true it fails the run when descriptors or threads grew by more than `FD_BUDGET`/`THREAD_BUDGET` over
the session, naming the kinds that grew.
"""

from __future__ import annotations

import gc
import os
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import pytest

FD_BUDGET = 64
"""Descriptors the whole session may add: what lives as long as the process (matplotlib's open font files,
multiprocessing's resource tracker pipe, a library's lazily opened handle). The leak this guards against
left 14 descriptors and 30 threads per demo start, about 900 descriptors over tests/e2e alone."""
THREAD_BUDGET = 16
"""Threads the whole session may add (a library's lazily started process-wide helper threads)."""

_PROC = Path("/proc/self")
_DIGITS = re.compile(r"\d+")


def fd_kind(target: str) -> str:
    """A descriptor's kind from its /proc/self/fd link: "socket", "pipe", "anon_inode:eventpoll", or a
    file path with its digits collapsed to "N" (so temporary names group together)."""
    if target.startswith(("socket:", "pipe:")):
        return target.split(":", 1)[0]
    if target.startswith("anon_inode:"):
        return target.strip("[]").replace("[", "")
    return _DIGITS.sub("N", target)


def thread_kind(name: str) -> str:
    """A thread's name with its numbers collapsed ("fanout_3" -> "fanout_N")."""
    return _DIGITS.sub("N", name)


@dataclass
class Snapshot:
    """Counts by kind of what the process holds at one moment."""

    fds: Counter[str] = field(default_factory=Counter)
    threads: Counter[str] = field(default_factory=Counter)
    children: Counter[str] = field(default_factory=Counter)

    @classmethod
    def take(cls) -> Snapshot:
        snap = cls()
        try:
            entries = os.listdir(_PROC / "fd")
        except OSError:
            return snap
        for entry in entries:
            if entry in ("0", "1", "2"):  # stdin/stdout/stderr: pytest's capture swaps what they point at
                continue
            try:
                snap.fds[fd_kind(os.readlink(_PROC / "fd" / entry))] += 1
            except OSError:  # closed meanwhile (the listing's own descriptor, a racing thread)
                continue
        snap.threads.update(thread_kind(t.name) for t in threading.enumerate())
        for pid in _children():
            try:
                cmdline = (Path("/proc") / pid / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            except OSError:
                continue
            snap.children[_DIGITS.sub("N", cmdline.strip())[:80]] += 1
        return snap

    def totals(self) -> tuple[int, int, int]:
        """(descriptors, threads, child processes)."""
        return sum(self.fds.values()), sum(self.threads.values()), sum(self.children.values())


def _children() -> list[str]:
    pids: list[str] = []
    try:
        tasks = os.listdir(_PROC / "task")
    except OSError:
        return pids
    for task in tasks:
        try:
            pids += (_PROC / "task" / task / "children").read_text().split()
        except OSError:
            continue
    return pids


def growth(before: Counter[str], after: Counter[str], top: int = 5) -> str:
    """The kinds that grew most, as "kind +n, …" (empty when nothing grew)."""
    grown = Counter({kind: after[kind] - before[kind] for kind in after if after[kind] > before[kind]})
    return ", ".join(f"{kind} +{n}" for kind, n in grown.most_common(top))


def settled(baseline: Snapshot, fds: int = 0, threads: int = 0, wait_s: float = 5.0) -> Snapshot:
    """A snapshot once the process holds at most `fds`/`threads` more than `baseline` and no more child
    processes, or after `wait_s` seconds: threads told to stop (a pool shut down without waiting) and child
    processes being reaped take a moment to go. Unreachable objects are collected first (a closed client
    kept in a reference cycle still holds its socket until then)."""
    deadline = time.monotonic() + wait_s
    while True:
        gc.collect()
        now = Snapshot.take()
        (f0, t0, c0), (f1, t1, c1) = baseline.totals(), now.totals()
        if (f1 - f0 <= fds and t1 - t0 <= threads and c1 <= c0) or time.monotonic() >= deadline:
            return now
        time.sleep(0.1)


def summary(before: Snapshot, after: Snapshot) -> str:
    """What grew between two snapshots, one line: totals and the kinds that grew most."""
    (f0, t0, c0), (f1, t1, c1) = before.totals(), after.totals()
    grown = "; ".join(
        g
        for g in (
            growth(before.fds, after.fds),
            growth(before.threads, after.threads),
            growth(before.children, after.children),
        )
        if g
    )
    return f"fds {f0} -> {f1}, threads {t0} -> {t1}, child processes {c0} -> {c1}" + (
        f" (grown: {grown})" if grown else ""
    )


class ResourceWatch:
    """A pytest plugin: snapshots after each test module, reports growth, guards the session under CI."""

    def __init__(self, config: pytest.Config) -> None:
        self.report = bool(config.getoption("resources"))
        self.guard = os.environ.get("CI") == "true"
        self.start: Snapshot | None = None
        self.end: Snapshot | None = None
        self.rows: list[tuple[str, Snapshot, Snapshot]] = []
        self.leak: str | None = None
        self._module_start: Snapshot | None = None

    def _snapshot(self) -> Snapshot:
        if self.report:
            gc.collect()
        return Snapshot.take()

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_setup(self, item: pytest.Item) -> None:
        if self.start is None:
            gc.collect()
            self.start = Snapshot.take()
        if self._module_start is None:
            self._module_start = self._snapshot()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_teardown(self, item: pytest.Item, nextitem: pytest.Item | None) -> object:
        result = yield
        if nextitem is None or nextitem.path != item.path:
            # Module-scoped fixtures are finalized in this teardown: what remains now was left behind.
            assert self._module_start is not None
            self.rows.append((item.nodeid.split("::", 1)[0], self._module_start, self._snapshot()))
            self._module_start = None
        return result

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.start is None:
            return
        self.end = settled(self.start, FD_BUDGET, THREAD_BUDGET, wait_s=5.0 if self.guard else 0.0)
        (f0, t0, _), (f1, t1, _) = self.start.totals(), self.end.totals()
        if self.guard and (f1 - f0 > FD_BUDGET or t1 - t0 > THREAD_BUDGET):
            self.leak = (
                f"resource leak over the session (budget +{FD_BUDGET} fds, +{THREAD_BUDGET} threads): "
                + summary(self.start, self.end)
            )
            if session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.start is None or self.end is None:
            return
        if self.report:
            terminalreporter.section("what each test module left behind")
            for module, before, after in self.rows:
                terminalreporter.write_line(f"{module}: {summary(before, after)}")
        terminalreporter.write_line(f"resources: {summary(self.start, self.end)}")
        if self.leak is not None:
            terminalreporter.write_line(self.leak, red=True)
