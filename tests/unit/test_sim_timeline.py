"""The default demo world tells one story per node: its Cloud Logging, its VM's journal and the vLLM
simulator's counters agree with the node's creation and the serving container's start."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

from sim import scenario as scenarios
from sim.gcp.world import World, serving_since
from sim.vllm.metrics import SEEDED_PREEMPTIONS

START = datetime(2026, 12, 6, 6, 0, tzinfo=UTC)


def _world() -> tuple[dict, World]:
    scenario = scenarios.load(None)
    return scenario, World.from_scenario(scenario, START)


def test_nothing_is_logged_before_the_node_exists() -> None:
    _, world = _world()
    node = next(qr.node for qr in world.queued_resources.values() if qr.node.node_id == "gemma4-qr-node")
    assert node.create_time == START - timedelta(minutes=88)
    generated = [e for e in world.logs if "protoPayload" not in e.body]
    assert generated and min(e.timestamp for e in generated) >= node.create_time


def test_the_serving_container_logs_its_own_load_and_its_preemption_count() -> None:
    scenario, world = _world()
    since = serving_since(scenario, START)
    assert since == START - timedelta(minutes=45)
    after = [e.blob for e in world.logs if e.timestamp >= since]
    assert sum("is preempted by" in b for b in after) == SEEDED_PREEMPTIONS
    engine = [b for b in after if "engine 000:" in b]
    assert engine and all(int(re.search(r"running: (\d+) reqs", b)[1]) <= 2 for b in engine)  # type: ignore[index]
    assert all("waiting: 0 reqs" in b for b in engine)


def test_the_failures_of_earlier_containers_precede_the_serving_one() -> None:
    scenario, world = _world()
    since = serving_since(scenario, START)
    assert since is not None
    for marker in ("resource_exhausted", "gated repo", "16.00 gib kv cache is needed"):
        times = [e.timestamp for e in world.logs if marker in e.blob]
        assert times and max(times) < since, marker
