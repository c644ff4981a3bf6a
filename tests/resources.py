"""What the test process holds: open file descriptors, threads and child processes, grouped by kind.

Read from Linux's /proc (proc(5)): /proc/self/fd links name what each descriptor is ("socket:[…]",
"pipe:[…]", "anon_inode:[eventpoll]", a path), /proc/self/task/*/children lists the child processes.
Elsewhere every count is empty (the guard then has nothing to check).

`ResourceWatch` (registered by tests/conftest.py) snapshots them before the first test and after each test
module (after its module fixtures are torn down) and, with `--resources`, prints each module's growth. Under
CI=true it fails the run when descriptors or threads grew by more than `FD_BUDGET`/`THREAD_BUDGET` over
the session, or a child process is still running at its end, naming the kinds that grew. With the guard or
`--resources` on, the test process is made a child subreaper (prctl(2) PR_SET_CHILD_SUBREAPER), so a
grandchild whose parent exited (a daemon a test started through a shell or `pg_ctl`) is adopted by it and
counted as a child instead of escaping to init.

Under pytest-xdist each worker process watches itself and sends its snapshots to the main process in
`workeroutput` (pytest-xdist's channel for a worker's session data); the main process checks and prints
them per worker.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import gc
import os
import re
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

FD_BUDGET = 64
"""Descriptors the whole session may add: what lives as long as the process (matplotlib's open font files,
multiprocessing's resource tracker pipe, a library's lazily opened handle). The leak this guards against
left 14 descriptors and 30 threads per demo start, about 900 descriptors over tests/e2e alone."""
THREAD_BUDGET = 16
"""Threads the whole session may add (a library's lazily started process-wide helper threads)."""
CHILD_BUDGET = 0
"""Running child processes (zombies aside) the session may leave: none, a test stops what it starts."""
LIFETIME_CHILDREN = ("multiprocessing.resource_tracker", "multiprocessing.forkserver")
"""Child processes that live as long as the test process, started once by the first user of multiprocessing
(https://docs.python.org/3/library/multiprocessing.html#contexts-and-start-methods): shown, never counted."""
PR_SET_CHILD_SUBREAPER = 36
"""prctl(2) option number, from linux/prctl.h (https://man7.org/linux/man-pages/man2/PR_SET_CHILD_SUBREAPER.2const.html)."""

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
                if _state(pid) == "Z":  # exited, not yet reaped: holds nothing but its process-table entry
                    continue
                argv = (Path("/proc") / pid / "cmdline").read_bytes().decode().split("\0")
            except OSError:
                continue
            # The program by its name, not its path: a long venv path would push what tells the kind
            # ("multiprocessing.resource_tracker") past the cut.
            cmdline = " ".join([os.path.basename(argv[0]), *argv[1:]]).strip()
            snap.children[_DIGITS.sub("N", cmdline)[:80]] += 1
        return snap

    def to_dict(self) -> dict[str, dict[str, int]]:
        """The counts as plain dicts (what pytest-xdist can send from a worker)."""
        return {"fds": dict(self.fds), "threads": dict(self.threads), "children": dict(self.children)}

    @classmethod
    def from_dict(cls, data: dict[str, dict[str, int]]) -> Snapshot:
        """The inverse of `to_dict`."""
        return cls(Counter(data["fds"]), Counter(data["threads"]), Counter(data["children"]))

    def totals(self) -> tuple[int, int, int]:
        """(descriptors, threads, child processes)."""
        return sum(self.fds.values()), sum(self.threads.values()), sum(self.children.values())

    def leakable_children(self) -> int:
        """Child processes other than the process-lifetime ones (`LIFETIME_CHILDREN`)."""
        return sum(n for kind, n in self.children.items() if not any(k in kind for k in LIFETIME_CHILDREN))


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


def _state(pid: str) -> str:
    """A process's state letter from /proc/<pid>/stat ("R", "S", "Z"...: proc_pid_stat(5)); the command name
    before it is in parentheses and may hold spaces, hence the split after the last ")"."""
    stat = (Path("/proc") / pid / "stat").read_text()
    return stat.rsplit(")", 1)[1].split()[0]


def become_subreaper() -> bool:
    """Make this process adopt its orphaned descendants (prctl PR_SET_CHILD_SUBREAPER), so a leaked daemon
    stays one of its children. Returns False where that is not available (not Linux, no libc)."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        libc = ctypes.CDLL(name, use_errno=True)
        return bool(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def leak(start: Snapshot, end: Snapshot) -> str | None:
    """What exceeded the session's budgets between `start` and `end`, one line, or None."""
    (f0, t0, _), (f1, t1, _) = start.totals(), end.totals()
    c0, c1 = start.leakable_children(), end.leakable_children()
    if f1 - f0 > FD_BUDGET or t1 - t0 > THREAD_BUDGET or c1 - c0 > CHILD_BUDGET:
        return (
            f"resource leak over the session (budget +{FD_BUDGET} fds, +{THREAD_BUDGET} threads, "
            f"+{CHILD_BUDGET} child processes): " + summary(start, end)
        )
    return None


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
        (f0, t0, _), (f1, t1, _) = baseline.totals(), now.totals()
        c0, c1 = baseline.leakable_children(), now.leakable_children()
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
    """A pytest plugin: snapshots after each test module, reports growth, guards the session under CI.

    In a pytest-xdist worker it sends its snapshots to the main process (`workeroutput["resources"]`); the
    main process, which runs no test, checks and prints each worker's."""

    def __init__(self, config: pytest.Config) -> None:
        self.config = config
        self.report = bool(config.getoption("resources"))
        self.guard = os.environ.get("CI") == "true"
        self.worker = hasattr(config, "workerinput")
        self.start: Snapshot | None = None
        self.rows: list[tuple[str, Snapshot, Snapshot]] = []
        self.sessions: list[tuple[str, Snapshot, Snapshot, list[tuple[str, Snapshot, Snapshot]]]] = []
        """(process label, start, end, module rows) of this process, or of each xdist worker."""
        self.leaks: list[str] = []
        self._module_start: Snapshot | None = None
        if self.guard or self.report:
            become_subreaper()

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

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: object) -> None:
        """pytest-xdist's hook in the main process when a worker finished: keep what it measured."""
        data = getattr(node, "workeroutput", {}).get("resources")
        if data is None:
            return
        rows = [(module, Snapshot.from_dict(b), Snapshot.from_dict(a)) for module, b, a in data["rows"]]
        start, end = Snapshot.from_dict(data["start"]), Snapshot.from_dict(data["end"])
        self.sessions.append((str(data["worker"]), start, end, rows))

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.start is not None:
            end = settled(self.start, FD_BUDGET, THREAD_BUDGET, wait_s=5.0 if self.guard else 0.0)
            if self.worker:
                workeroutput: dict[str, Any] = self.config.workeroutput  # type: ignore[attr-defined]
                workeroutput["resources"] = {
                    "worker": self.config.workerinput["workerid"],  # type: ignore[attr-defined]
                    "start": self.start.to_dict(),
                    "end": end.to_dict(),
                    "rows": [(module, b.to_dict(), a.to_dict()) for module, b, a in self.rows],
                }
                return
            self.sessions.append(("", self.start, end, self.rows))
        if self.guard:
            for label, start, end, _ in self.sessions:
                found = leak(start, end)
                if found is not None:
                    self.leaks.append(f"{label}: {found}" if label else found)
            if self.leaks and session.exitstatus == pytest.ExitCode.OK:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if self.worker or not self.sessions:
            return
        for label, start, end, rows in sorted(self.sessions, key=lambda s: s[0]):
            prefix = f"{label}: " if label else ""
            if self.report:
                where = f" in {label}" if label else ""
                terminalreporter.section(f"what each test module left behind{where}")
                for module, before, after in rows:
                    terminalreporter.write_line(f"{module}: {summary(before, after)}")
            terminalreporter.write_line(f"{prefix}resources: {summary(start, end)}")
        for found in self.leaks:
            terminalreporter.write_line(found, red=True)
