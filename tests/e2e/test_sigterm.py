"""SIGTERM stops the real bot process cleanly: it exits 0 within a container's grace period, and none of the
processes it started (the CPU worker processes) is left behind.

The bot runs as its own process (`python -m bot serve`, HTTP mode) against this test's Google emulator and
Slack simulator, as in test_restart_mid_search.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import httpx

from sim.gcp import GcpSimulator
from sim.slack import SlackSimulator
from tests.e2e.test_restart_mid_search import BotProcess, world  # noqa: F401  (the fixture)

GRACE_S = 10
"""Cloud Run's grace period between SIGTERM and SIGKILL (Kubernetes' default is 30 s)."""


def children(pid: int) -> set[int]:
    """Every live descendant of `pid` (from /proc)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found: set[int] = set()
    frontier = {pid}
    while frontier:
        frontier = {child for child, parent in parents.items() if parent in frontier} - found
        found |= frontier
    return found


def alive(pid: int) -> bool:
    """Whether `pid` runs (a zombie waiting to be reaped does not)."""
    try:
        os.kill(pid, 0)
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (ProcessLookupError, FileNotFoundError):
        return False
    return state != "Z"


def test_sigterm_closes_the_bot_and_its_worker_processes(
    world: tuple[GcpSimulator, SlackSimulator, dict[str, str], int],  # noqa: F811
    tmp_path: Path,
) -> None:
    _, _, env, port = world
    bot = BotProcess({**env, "CPU_WORKERS": "2"}, port, tmp_path / "bot.log")
    try:
        deadline = time.monotonic() + 90
        while httpx.get(f"{bot.url}/readyz", timeout=2).status_code != 200:  # warmed: workers started
            assert time.monotonic() < deadline, (tmp_path / "bot.log").read_text()[-3000:]
            time.sleep(0.3)
        started = children(bot.proc.pid)
        assert started, "the bot started no worker process"
        bot.proc.send_signal(signal.SIGTERM)
        assert bot.proc.wait(timeout=GRACE_S) == 0, (tmp_path / "bot.log").read_text()[-3000:]
        time.sleep(0.5)
        assert not [pid for pid in started if alive(pid)], "worker processes survived SIGTERM"
    finally:
        bot.stop()
