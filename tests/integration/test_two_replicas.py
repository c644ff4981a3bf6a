"""Several replicas sharing one PostgreSQL state store (a real throwaway cluster).

1. Two bots in HTTP mode behind "a load balancer" (the test posts to either): a Slack event retried with
   the same `event_id` (`X-Slack-Retry-Num`) and sent to both is answered once; a slash command replayed
   to both (same `trigger_id`) is acked by both and run by one.
2. Two replica PROCESSES run the alert scheduler (`bot.oncall.scheduler.AlertScheduler`) gated by the
scheduler
   lease (`Store.acquire_lease`): exactly one ticks; when the holder is killed (SIGKILL) the other takes
   over within one interval, and every alert reaches the Slack simulator exactly once.

Run as `python -m tests.integration.test_two_replicas replica NAME` this module is one such replica (its
settings come as JSON in TPU_CHATOPS_REPLICA_SETTINGS); it prints one JSON line per lease check and tick.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from pydantic import SecretStr

from bot.slack.app import HttpServer, build
from sim.console import SlackUser
from sim.demo import Demo
from tests import postgres

ROOT = Path(__file__).resolve().parents[2]
LEASE = "alert-scheduler"
INTERVAL_S = 2.0  # the scheduler's tick interval
HEARTBEAT_S = INTERVAL_S / 4  # every replica tries to take or renew the lease this often
TTL_S = INTERVAL_S / 2  # so a dead holder's lease is taken within TTL_S + HEARTBEAT_S < INTERVAL_S
ALERT_CHANNEL = "C0ALERTS01"


@pytest.fixture(scope="module")
def cluster_url() -> Iterator[str]:
    with postgres.cluster() as url:
        yield url


@pytest.fixture
def world(cluster_url: str) -> Iterator[Demo]:
    """The demo's simulators and bot, with the state store on PostgreSQL."""
    with Demo(state_database_url=postgres.create_database(cluster_url)) as demo:
        yield demo


def test_retried_event_is_handled_once_across_two_replicas(world: Demo) -> None:
    assert world.bot.services.store.engine.dialect.name == "postgresql"
    second = build(world.settings)  # same settings: same simulators, same PostgreSQL store
    server = HttpServer(second, "127.0.0.1", 0, threads=4)
    threading.Thread(target=server.serve_forever, name="replica-2", daemon=True).start()
    replica_a = world.user
    replica_b = SlackUser(server.url, world.signing_secret, world.slack)
    try:
        ts = f"{int(time.time())}.123456"
        body = replica_a.mention_body("vllm endpoint", ts)
        assert replica_a.post_signed(body, "application/json").status_code == 200
        # Slack did not see the 200 in time: it retries, and the load balancer spreads the retries.
        barrier = threading.Barrier(4)
        statuses: list[int] = []

        def retry(user: SlackUser, num: str) -> None:
            barrier.wait()
            headers = {"X-Slack-Retry-Num": num, "X-Slack-Retry-Reason": "http_timeout"}
            statuses.append(user.post_signed(body, "application/json", extra_headers=headers).status_code)

        threads = [
            threading.Thread(target=retry, args=(user, num))
            for user, num in ((replica_b, "1"), (replica_a, "1"), (replica_b, "2"), (replica_a, "2"))
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=20)
        assert statuses == [200, 200, 200, 200]
        assert world.slack.wait_for(lambda m: m.thread_ts == ts, timeout=20) is not None
        time.sleep(1.5)
        answers = [m for m in world.slack.messages if m.thread_ts == ts]
        assert len(answers) == 1, [m.text for m in answers]

        # A different event on replica B is answered by it (the dedupe is by event id, not per replica).
        other_ts = f"{int(time.time())}.654321"
        other = json.loads(replica_b.mention_body("vllm endpoint", other_ts))
        other["event_id"] = "EvReplicaB0001"
        assert replica_b.post_signed(json.dumps(other), "application/json").status_code == 200
        assert world.slack.wait_for(lambda m: m.thread_ts == other_ts, timeout=20) is not None
        event_id = str(json.loads(body)["event_id"])
        assert not world.bot.services.store.first_time_event(
            event_id, datetime.now(UTC)
        )  # in the shared table
        labels = {"command": "vllm endpoint", "outcome": "ok"}
        for bot in (world.bot, second):  # each replica ran exactly one of the two events
            counted = _wait(
                lambda bot=bot: bot.metrics.registry.get_sample_value("tpu_chatops_commands_total", labels),
                10,
                "the command metric",
            )
            assert counted == 1.0
        assert "tpu_chatops_ack_latency_seconds_count" in httpx.get(f"{server.url}/metrics").text
    finally:
        replica_b.close()
        server.close()
        second.close()


def test_a_slash_command_replayed_to_two_replicas_runs_once(world: Demo) -> None:
    second = build(world.settings)
    server = HttpServer(second, "127.0.0.1", 0, threads=4)
    threading.Thread(target=server.serve_forever, name="replica-2", daemon=True).start()
    replica_b = SlackUser(server.url, world.signing_secret, world.slack)
    try:
        body = world.user.slash_body("/vllm", "endpoint", "replayed-to-both")
        barrier = threading.Barrier(2)
        statuses: list[int] = []

        def post(user: SlackUser) -> None:
            barrier.wait()
            statuses.append(user.post_signed(body, "application/x-www-form-urlencoded").status_code)

        threads = [threading.Thread(target=post, args=(user,)) for user in (world.user, replica_b)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=20)
        assert statuses == [200, 200]  # each replica acks at once, before the shared store is asked
        assert world.slack.wait_for(lambda m: m.response_id == "replayed-to-both", timeout=20) is not None
        time.sleep(1.5)  # time for a second run to answer, were there one
        answers = [m for m in world.slack.messages if m.response_id == "replayed-to-both"]
        assert len(answers) == 1, [m.text for m in answers]
    finally:
        replica_b.close()
        server.close()
        second.close()


# ---- the scheduler lease, with replica processes


def _settings_json(demo: Demo) -> str:
    fields: dict[str, Any] = {}
    for name, value in demo.settings:
        fields[name] = value.get_secret_value() if isinstance(value, SecretStr) else value
    fields["alert_channel"] = ALERT_CHANNEL
    return json.dumps(fields, default=str)


def _start_replica(demo: Demo, name: str, log_dir: Path) -> tuple[subprocess.Popen[str], Path]:
    out = log_dir / f"{name}.jsonl"
    env = {**os.environ, "TPU_CHATOPS_REPLICA_SETTINGS": _settings_json(demo), "PYTHONPATH": str(ROOT)}
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.integration.test_two_replicas", "replica", name],
        cwd=ROOT,
        env=env,
        stdout=out.open("w"),
        stderr=(log_dir / f"{name}.err").open("w"),
        text=True,
    )
    return process, out


def _lines(path: Path) -> list[dict[str, Any]]:
    lines = []
    for raw in path.read_text().splitlines():
        try:
            lines.append(json.loads(raw))
        except ValueError:
            continue  # a line cut by the kill
    return lines


def _wait(predicate: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def test_lease_holder_killed_the_other_replica_takes_over_within_one_interval(
    world: Demo, tmp_path: Path
) -> None:
    pytest.importorskip("bot.oncall.scheduler")
    first, first_out = _start_replica(world, "replica-a", tmp_path)
    second = None
    try:
        # replica-a starts first and gets the lease; then replica-b starts and must stay standby.
        _wait(lambda: any(line.get("tick") for line in _lines(first_out)), 60, "replica-a's first tick")
        second, second_out = _start_replica(world, "replica-b", tmp_path)
        _wait(lambda: len(_lines(second_out)) >= 4, 60, "replica-b's lease checks")
        assert not any(line["held"] for line in _lines(second_out) if "held" in line)
        _wait(lambda: sum(1 for line in _lines(first_out) if line.get("tick")) >= 2, 30, "a second tick")
        sent_before_kill = sum(line.get("sent", 0) for line in _lines(first_out))
        assert sent_before_kill >= 1  # the demo scenario has a stale FAILED queued resource

        first.send_signal(signal.SIGKILL)  # the holder dies mid-run, without releasing the lease
        first.wait(timeout=10)
        killed_at = time.time()
        took_over = _wait(
            lambda: next((line for line in _lines(second_out) if line.get("held")), None),
            INTERVAL_S * 3,
            "replica-b to take the lease",
        )
        assert took_over["t"] - killed_at <= INTERVAL_S, f"took {took_over['t'] - killed_at:.2f} s"
        _wait(lambda: sum(1 for line in _lines(second_out) if line.get("tick")) >= 1, 30, "replica-b's tick")
        # Something new after the hand-over is not missed: the new holder posts it.
        world.gcp.advance(3 * 3600)  # the simulated world moves on: queued resources change state
        _wait(lambda: sum(line.get("sent", 0) for line in _lines(second_out)) >= 1, 30, "the new alert")
        _wait(lambda: sum(1 for line in _lines(second_out) if line.get("tick")) >= 3, 30, "replica-b ticks")
    finally:
        for process in (first, second):
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=20)

    a_ticks = [line for line in _lines(first_out) if line.get("tick")]
    b_ticks = [line for line in _lines(second_out) if line.get("tick")]
    # Exactly one replica ran the jobs at any time: every tick of b comes after a's last one.
    assert a_ticks and b_ticks and max(t["t"] for t in a_ticks) < min(t["t"] for t in b_ticks)
    # Exactly once and none missed: what a sent is not sent again by b (b finds it claimed in the ledger),
    # b sends what became due after the hand-over, and nothing failed to post.
    assert sum(t.get("duplicate", 0) for t in b_ticks[:1]) >= sent_before_kill
    assert sum(t.get("sent", 0) for t in b_ticks) >= 1
    assert not any(t.get("failed") or t.get("errors") for t in a_ticks + b_ticks)
    posted = [m.text for m in world.slack.messages if m.channel == ALERT_CHANNEL and not m.thread_ts]
    assert posted, "no alert reached Slack"
    assert all(count == 1 for count in Counter(posted).values()), Counter(posted)


def _replica(name: str) -> int:
    """One replica: every HEARTBEAT_S take or renew the lease; while held, tick every INTERVAL_S."""
    from bot.config import Settings
    from bot.oncall.scheduler import AlertScheduler
    from bot.services import Services
    from bot.slack.gateway import SlackGateway

    settings = Settings(_env_file=None, **json.loads(os.environ["TPU_CHATOPS_REPLICA_SETTINGS"]))  # type: ignore[call-arg]
    services = Services.from_settings(settings)
    client = SlackGateway.connect(settings.slack_bot_token.get_secret_value(), settings.slack_api_url)
    assert settings.alert_channel is not None
    scheduler = AlertScheduler.build(
        services, client, settings.alert_channel, interval_s=INTERVAL_S, vllm_checks=False
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    last_tick = 0.0
    while not stop.is_set():
        held = services.store.acquire_lease(LEASE, name, TTL_S, datetime.now(UTC))
        print(json.dumps({"t": time.time(), "held": held}), flush=True)
        if held and time.monotonic() - last_tick >= INTERVAL_S:
            last_tick = time.monotonic()
            result = scheduler.tick()
            line = {"t": time.time(), "tick": True, "sent": result.sent, "duplicate": result.duplicate}
            print(json.dumps({**line, "failed": result.failed, "errors": result.errors}), flush=True)
        stop.wait(HEARTBEAT_S)
    services.store.release_lease(LEASE, name)
    return 0


if __name__ == "__main__":
    if len(sys.argv) == 3 and sys.argv[1] == "replica":
        sys.exit(_replica(sys.argv[2]))
    sys.exit("usage: python -m tests.integration.test_two_replicas replica NAME")
