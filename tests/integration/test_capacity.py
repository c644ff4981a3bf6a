"""CapacitySearch through the REAL clients against the emulator, with simulated time sped up 600x."""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from types import MappingProxyType
from typing import Any

import pytest

from ops.store.state import Store
from ops.tpu.api import TpuOps
from ops.tpu.capacity import CapacitySearch, SearchResult
from sim.gcp import GcpSimulator

SPEED = 600.0  # simulated seconds per real second: 1 simulated minute = 0.1 s
PERMANENT = ["asia-east1-a", "asia-east1-c"]  # type not offered; flex-start not offered
STOCKOUT = ["us-east1-d", "asia-northeast1-b", "europe-west4-a"]
CAPACITY = "us-east5-a"
ZONES = [PERMANENT[0], STOCKOUT[0], PERMANENT[1], STOCKOUT[1], STOCKOUT[2], CAPACITY]


def scenario(capacity_zone: Any = None) -> dict[str, Any]:
    zones: dict[str, Any] = {
        PERMANENT[0]: {"accelerator_types": ["v5litepod-8"]},
        PERMANENT[1]: {"accelerator_types": ["v6e-8"], "flex_start": False},
        **{zone: {"accelerator_types": ["v6e-8"], "capacity": "none"} for zone in STOCKOUT},
        CAPACITY: {"accelerator_types": ["v6e-8"], "capacity": capacity_zone or {"after": "2m"}},
    }
    google = {"time_speed": SPEED, "operation_duration": "10s", "delete_duration": "20s", "zones": zones}
    return {"project": "search-project", "google": google, "vllm": {}}


@pytest.fixture
def gcp() -> Iterator[GcpSimulator]:
    with GcpSimulator(scenario()) as server:
        yield server


@pytest.fixture
def tpu(gcp: GcpSimulator) -> Iterator[TpuOps]:
    ops = TpuOps(gcp.project, api_endpoint=gcp.url, num_retries=0, timeout_s=5.0)
    yield ops
    ops.close()


def searcher(tpu: TpuOps, store: Store) -> CapacitySearch:
    return CapacitySearch(tpu, store, poll_s=0.02, operation_timeout_s=10, delete_timeout_s=10)


def search(
    tpu: TpuOps, store: Store, zones: list[str] | None = ZONES, **kw: Any
) -> tuple[SearchResult, list[Mapping[str, str]]]:
    snapshots: list[Mapping[str, str]] = []
    kw.setdefault("parallel", 4)
    kw.setdefault("valid_until", timedelta(minutes=10))
    result = searcher(tpu, store).run(
        "gemma4",
        "v6e-8",
        "flex-start",
        zones,
        max_run_duration=timedelta(hours=4),
        progress=snapshots.append,
        **kw,
    )
    return result, snapshots


def queued_resources(tpu: TpuOps) -> list[tuple[str, str]]:
    listing = tpu.list_queued_resources(ZONES, with_nodes=False)
    assert listing.errors == {}
    return [(qr.zone, qr.name) for qr in listing.resources]


def creates(gcp: GcpSimulator, zone: str) -> int:
    return sum(1 for m, p in gcp.requests if m == "POST" and f"/locations/{zone}/queuedResources?" in p)


def test_parallel_search_keeps_exactly_one(gcp: GcpSimulator, tpu: TpuOps, store: Store) -> None:
    # The stockouts' valid-until far beyond the capacity zone's 2 minutes (12 s real here), so that on a busy
    # machine they are still waiting, and get deleted, when the winner is found.
    result, snapshots = search(tpu, store, parallel=4, valid_until=timedelta(hours=2))
    assert result.winner is not None and result.error is None and not result.cancelled
    assert (result.winner.zone, result.winner.name) == (CAPACITY, "gemma4")
    assert result.winner.state == "ACTIVE" and result.winner.nodes[0].external_ips
    assert result.leftovers == 0
    assert queued_resources(tpu) == [(CAPACITY, "gemma4")]  # every other request is gone
    assert result.zones == {
        PERMANENT[0]: "skipped (not offered: v6e-8)",  # from acceleratorTypes.list, before any create
        STOCKOUT[0]: "deleted",
        PERMANENT[1]: "failed: flex-start not offered (remembered)",
        STOCKOUT[1]: "deleted",
        STOCKOUT[2]: "deleted",
        CAPACITY: "ACTIVE",
    }
    assert all(isinstance(s, MappingProxyType) for s in snapshots)
    seen = {state for snap in snapshots for state in snap.values()}
    assert {"pending", "requesting", "WAITING_FOR_RESOURCES", "ACTIVE", "deleted"} <= seen
    # At most 4 requests were outstanding at any time.
    outstanding = [
        sum(1 for s in snap.values() if s in ("requesting", "WAITING_FOR_RESOURCES", "PROVISIONING"))
        for snap in snapshots
    ]
    assert max(outstanding) <= 4


def test_sequential_search_uses_the_same_name_and_waits_out_stockouts(
    gcp: GcpSimulator, tpu: TpuOps, store: Store
) -> None:
    result, _ = search(tpu, store, parallel=1, valid_until=timedelta(minutes=3))
    assert result.winner is not None and result.winner.name == "gemma4" and result.winner.zone == CAPACITY
    assert [result.zones[z] for z in STOCKOUT] == ["failed: stockout"] * 3  # FAILED at valid-until, deleted
    assert queued_resources(tpu) == [(CAPACITY, "gemma4")]
    assert result.elapsed_s >= 3 * 3 * 60 / SPEED + 2 * 60 / SPEED


def test_cancel_mid_search_leaves_nothing(gcp: GcpSimulator, tpu: TpuOps, store: Store) -> None:
    gcp.set_capacity(CAPACITY, "none")
    cancel = threading.Event()

    def watch(snapshot: Mapping[str, str]) -> None:
        if sum(1 for s in snapshot.values() if s == "WAITING_FOR_RESOURCES") >= 3:
            cancel.set()

    result = searcher(tpu, store).run(
        "gemma4",
        "v6e-8",
        "flex-start",
        ZONES,
        parallel=4,
        max_run_duration=timedelta(hours=4),
        progress=watch,
        cancel=cancel,
    )
    assert result.cancelled and result.winner is None and result.leftovers == 0
    assert queued_resources(tpu) == []
    assert "cancelled" in result.zones.values()
    assert all(s.startswith(("failed:", "cancelled", "skipped")) for s in result.zones.values()), result.zones


def test_remembered_failures_are_skipped_then_retried_with_retry_all(
    gcp: GcpSimulator, tpu: TpuOps, store: Store
) -> None:
    zones = [PERMANENT[0], PERMANENT[1], CAPACITY]
    first, _ = search(tpu, store, zones, parallel=1)
    assert first.winner is not None
    assert first.zones[PERMANENT[0]] == "skipped (not offered: v6e-8)"
    tpu.delete_queued_resource("gemma4", CAPACITY, force=True, timeout_s=5, poll_s=0.02)
    remembered = store.zone_failures("v6e-8", "flex-start")
    assert set(remembered) == {PERMANENT[1]}
    assert remembered[PERMANENT[1]].message.startswith("flex-start not offered: ")
    assert creates(gcp, PERMANENT[0]) == 0 and creates(gcp, PERMANENT[1]) == 1

    second, snapshots = search(tpu, store, zones, parallel=1)
    assert second.winner is not None
    day = datetime.now(UTC).strftime("%Y-%m-%d")
    assert second.zones[PERMANENT[1]].startswith(f"skipped (remembered: flex-start not offered, {day} ")
    assert snapshots[0][PERMANENT[1]].startswith("skipped")
    assert creates(gcp, PERMANENT[1]) == 1
    tpu.delete_queued_resource("gemma4", CAPACITY, force=True, timeout_s=5, poll_s=0.02)

    # Another provisioning model is not affected by flex-start's memory.
    assert store.zone_failures("v6e-8", "spot") == {}

    third, _ = search(tpu, store, zones, parallel=1, retry_all=True)
    assert third.winner is not None
    assert creates(gcp, PERMANENT[0]) == 0 and creates(gcp, PERMANENT[1]) == 2
    assert third.zones[PERMANENT[1]] == "failed: flex-start not offered (remembered)"


def test_a_zone_whose_types_cannot_be_listed_is_tried_and_its_failure_remembered(
    gcp: GcpSimulator, tpu: TpuOps, store: Store
) -> None:
    gcp.inject_fault(rf"/locations/{PERMANENT[0]}/acceleratorTypes", 503, count=10)
    result, _ = search(tpu, store, [PERMANENT[0], CAPACITY], parallel=2)
    assert result.winner is not None and result.winner.zone == CAPACITY
    assert result.zones[PERMANENT[0]] == "failed: accelerator not offered (remembered)"
    assert creates(gcp, PERMANENT[0]) == 1
    remembered = store.zone_failures("v6e-8", "flex-start")
    assert remembered[PERMANENT[0]].message.startswith("accelerator not offered: ")


def test_zones_default_to_those_offering_the_type(gcp: GcpSimulator, tpu: TpuOps, store: Store) -> None:
    assert searcher(tpu, store).candidate_zones("v6e-8") == sorted(z for z in ZONES if z != PERMANENT[0])
    result, _ = search(tpu, store, None, parallel=6)
    assert result.winner is not None and result.winner.zone == CAPACITY
    assert PERMANENT[0] not in result.zones
    assert queued_resources(tpu) == [(CAPACITY, "gemma4")]


def test_a_request_wide_error_stops_the_search_and_cleans_up(
    gcp: GcpSimulator, tpu: TpuOps, store: Store
) -> None:
    gcp.set_capacity(CAPACITY, "none")
    gcp.inject_fault(r"/locations/us-east5-a/queuedResources$", 403, count=1)
    result, _ = search(tpu, store, [STOCKOUT[0], CAPACITY, STOCKOUT[1]], parallel=2)
    assert result.winner is None and result.error is not None and "403" in result.error.message
    assert result.zones[CAPACITY] == "failed: permission denied"
    assert result.leftovers == 0 and queued_resources(tpu) == []
    assert store.zone_failures("v6e-8", "flex-start") == {}  # not a zone property: not remembered
