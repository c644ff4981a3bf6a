"""The bot is killed (SIGKILL) in the middle of a 4-zone `/tpu find`; after a restart nothing leaks.

The real bot runs as its own process (`python -m bot serve`, HTTP mode) against the Google emulator and the
Slack simulator of this test; the search's four requests wait for capacity (stockout everywhere) when the
process is killed. The restarted bot reconciles from the state store (at start, then every
RECONCILE_INTERVAL_S, so once the dead process's leases expired): each request carries its own label, so
each is deleted, audited and announced in the channel.
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from ops.store.state import Store
from ops.tpu.api import TpuOps
from sim.console import DEMO_CHANNEL, DEMO_USER, SlackUser
from sim.gcp import GcpSimulator
from sim.slack import SlackSimulator

ROOT = Path(__file__).resolve().parents[2]
ZONES = ["us-east1-d", "asia-northeast1-b", "europe-west4-a", "us-central1-a"]


def scenario() -> dict[str, Any]:
    zones = {zone: {"accelerator_types": ["v6e-8"], "capacity": "none"} for zone in ZONES}
    return {"project": "restart-project", "google": {"zones": zones}, "vllm": {}}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


class BotProcess:
    """`python -m bot serve` with settings in its environment, in a process group of its own; `kill()` is
    SIGKILL to the whole group (no clean-up at all), as a container runtime kills every process of a
    container: the bot's worker processes go with it instead of being orphaned."""

    def __init__(self, env: dict[str, str], port: int, log: Path) -> None:
        self._log = log.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bot", "serve"],
            cwd=ROOT,
            env=env,
            stdout=self._log,
            stderr=self._log,
            start_new_session=True,
        )
        self.url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, log.read_text()[-3000:]
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise AssertionError("the bot did not start: " + log.read_text()[-3000:])

    def kill(self) -> None:
        os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(timeout=10)
        self._log.close()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._log.close()


@pytest.fixture
def world(tmp_path: Path) -> Iterator[tuple[GcpSimulator, SlackSimulator, dict[str, str], int]]:
    token = "xoxb-simulated-" + secrets.token_hex(8)
    with GcpSimulator(scenario()) as gcp:
        slack = SlackSimulator(token, channels=[DEMO_CHANNEL])  # the bot is a member of the channel
        slack.start()
        port = free_port()
        env = {
            **os.environ,
            "SLACK_BOT_TOKEN": token,
            "SLACK_SIGNING_SECRET": secrets.token_hex(16),
            "SLACK_API_URL": slack.api_url,
            "BOT_MODE": "http",
            "BOT_HOST": "127.0.0.1",
            "BOT_PORT": str(port),
            "GCP_PROJECT": "restart-project",
            "TPU_ZONES": ",".join(ZONES),
            "GOOGLE_API_ENDPOINT": gcp.url,
            "STATE_DATABASE_URL": f"sqlite:///{tmp_path}/state.db",
            "ADMINS": DEMO_USER,
            "CAPACITY_POLL_S": "0.2",
            "OPERATION_LEASE_TTL_S": "3",
            "RECONCILE_INTERVAL_S": "1",
            "WORKER_THREADS": "4",
            "NO_PROXY": "127.0.0.1,localhost",
        }
        try:
            yield gcp, slack, env, port
        finally:
            slack.stop()


def searched(tpu: TpuOps) -> list[str]:
    listing = tpu.list_queued_resources(ZONES, with_nodes=False)
    return sorted(qr.name for qr in listing.resources if qr.name.startswith("gemma4-k"))


def test_kill_mid_search_then_restart_leaves_nothing(
    world: tuple[GcpSimulator, SlackSimulator, dict[str, str], int], tmp_path: Path
) -> None:
    gcp, slack, env, port = world
    tpu = TpuOps(gcp.project, api_endpoint=gcp.url, num_retries=0, timeout_s=5.0)
    first = BotProcess(env, port, tmp_path / "bot1.log")
    try:
        user = SlackUser(first.url, env["SLACK_SIGNING_SECRET"], slack)
        preview, answered = user.run(f"/tpu find gemma4-k --zones {','.join(ZONES)} --parallel 4", timeout=30)
        assert answered and any("[Confirm" in line for line in preview), preview
        user.run("click Confirm", timeout=1)
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(searched(tpu)) < 4:
            time.sleep(0.1)
        assert len(searched(tpu)) == 4
    finally:
        first.kill()
    assert len(searched(tpu)) == 4  # the dead bot left its four requests waiting (flex-start would bill)

    second = BotProcess(env, port, tmp_path / "bot2.log")
    try:
        deadline = time.monotonic() + 40
        while time.monotonic() < deadline and searched(tpu):
            time.sleep(0.2)
        assert searched(tpu) == []
        notes = [m for m in slack.messages if "`/tpu find` by" in m.text]
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and len(notes) < 4:
            time.sleep(0.2)
            notes = [m for m in slack.messages if "`/tpu find` by" in m.text]
        assert len(notes) == 4 and all(m.channel == DEMO_CHANNEL and "was deleted" in m.text for m in notes)
    finally:
        second.stop()
        tpu.close()
    store = Store(env["STATE_DATABASE_URL"])
    try:
        audit = [e for e in store.audit(50) if e.action == "reconcile"]
        assert len(audit) == 4 and all(e.outcome.startswith("deleted") for e in audit)
        assert store.inflight(open_only=True) == []
    finally:
        store.close()
