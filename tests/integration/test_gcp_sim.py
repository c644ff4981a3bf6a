"""TpuOps through the REAL Google clients (google-api-python-client v2alpha1, GAPIC tpu_v2 REST) against
the local TPU API simulator running the default scenario."""

from __future__ import annotations

import copy
import random
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import sim.scenario as scenario_module
from ops.errors import BackendTimeout, BackendUnavailable, BadInput, NotFound, PermissionDenied, QuotaExceeded
from ops.gcp import google
from ops.tpu.api import TpuOps
from sim.gcp import GcpSimulator
from sim.scenario import load

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
ZONES = ["us-east5-a", "asia-northeast1-b", "europe-west4-a"]


def default_scenario() -> dict[str, Any]:
    """`sim.scenario.load()`; falls back to the file path when a stale editable install made `sim` a
    namespace package (importlib.resources then raises NotADirectoryError)."""
    try:
        return load()
    except NotADirectoryError:
        return load(Path(scenario_module.__file__).parent / "scenarios" / "default.yaml")


@pytest.fixture
def scenario() -> dict[str, Any]:
    return default_scenario()


@pytest.fixture
def gcp(scenario: dict[str, Any]) -> Iterator[GcpSimulator]:
    with GcpSimulator(scenario, now=lambda: NOW) as server:
        yield server


def make_ops(gcp: GcpSimulator, **kwargs: Any) -> TpuOps:
    kwargs.setdefault("timeout_s", 5.0)
    kwargs.setdefault("num_retries", 0)
    return TpuOps(gcp.project, api_endpoint=gcp.url, **kwargs)


@pytest.fixture
def ops(gcp: GcpSimulator) -> Iterator[TpuOps]:
    tpu = make_ops(gcp)
    yield tpu
    tpu.close()


@pytest.fixture
def fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """googleapiclient sleeps random() * 2**n between retries; make that a few milliseconds."""
    monkeypatch.setattr(random, "random", lambda: 0.005)


def test_list_across_the_three_zones(ops: TpuOps) -> None:
    listing = ops.list_queued_resources(ZONES)
    assert listing.errors == {}
    assert [(qr.zone, qr.name) for qr in listing.resources] == [
        ("asia-northeast1-b", "gemma4-standby"),
        ("europe-west4-a", "gemma4-old"),
        ("us-east5-a", "gemma4-qr"),
    ]
    standby, old, active = listing.resources

    assert active.state == "ACTIVE" and active.state_initiator == "USER"
    assert active.provisioning_model == "flex-start"
    assert active.accelerator_type == "v6e-8" and active.runtime_version == "v2-alpha-tpuv6e"
    assert active.create_time == NOW - timedelta(minutes=90)
    assert active.max_run_duration == timedelta(hours=4)
    assert active.termination_time == NOW + timedelta(hours=2, minutes=30)
    assert active.time_left(NOW) == timedelta(hours=2, minutes=30)
    assert active.node_ids == ("gemma4-qr-node",)
    (node,) = active.nodes
    assert node.name == "gemma4-qr-node" and node.zone == "us-east5-a"
    assert (node.state, node.health) == ("READY", "HEALTHY")
    assert node.internal_ips == ("127.0.0.1",) and node.external_ips == ("127.0.0.1",)
    assert node.termination_time == active.termination_time
    assert active.error is None and active.valid_until is None

    assert standby.state == "WAITING_FOR_RESOURCES" and standby.provisioning_model == "flex-start"
    assert standby.valid_until == NOW + timedelta(hours=3)
    assert standby.nodes == () and standby.node_ids == ("gemma4-standby-node",)
    assert standby.termination_time is None and standby.time_left(NOW) is None

    assert old.state == "FAILED" and old.state_initiator == "SERVICE" and old.provisioning_model == "spot"
    assert old.error is not None and old.error.startswith(
        'There is no more capacity in the zone "europe-west4-a"'
    )
    assert old.nodes == ()


def test_list_without_nodes_makes_no_node_calls(gcp: GcpSimulator, ops: TpuOps) -> None:
    listing = ops.list_queued_resources(ZONES, with_nodes=False)
    assert len(listing.resources) == 3 and all(qr.nodes == () for qr in listing.resources)
    assert not any("/nodes" in path for _, path in gcp.requests)


def test_describe_searches_zones_in_order(gcp: GcpSimulator, ops: TpuOps) -> None:
    qr = ops.get_queued_resource("gemma4-qr", ["asia-northeast1-b", "us-east5-a", "europe-west4-a"])
    assert (qr.name, qr.zone, qr.state) == ("gemma4-qr", "us-east5-a", "ACTIVE")
    assert [n.name for n in qr.nodes] == ["gemma4-qr-node"]
    assert not any("europe-west4-a" in path for _, path in gcp.requests)  # stopped at the first hit
    by_path = ops.get_queued_resource(
        "projects/demo-project/locations/us-east5-a/queuedResources/gemma4-qr", []
    )
    assert by_path == qr


def test_describe_not_found_names_the_zones(ops: TpuOps) -> None:
    with pytest.raises(NotFound) as err:
        ops.get_queued_resource("no-such-qr", ZONES)
    assert "no-such-qr" in err.value.message
    assert all(zone in err.value.message for zone in ZONES)
    assert err.value.hint and err.value.backend == "tpu"


def test_get_node_through_gapic_v2(ops: TpuOps) -> None:
    node = ops.get_node("us-east5-a", "gemma4-qr-node")
    assert (node.name, node.zone, node.state, node.health) == (
        "gemma4-qr-node",
        "us-east5-a",
        "READY",
        "HEALTHY",
    )
    assert node.accelerator_type == "v6e-8" and node.runtime_version == "v2-alpha-tpuv6e"
    assert node.internal_ips == ("127.0.0.1",) and node.external_ips == ("127.0.0.1",)
    assert node.create_time == NOW - timedelta(minutes=88)
    assert node.termination_time is None  # API v2 has no schedulingConfig.terminationTimestamp
    with pytest.raises(NotFound, match=r"TPU API v2 nodes\.get"):
        ops.get_node("asia-northeast1-b", "gemma4-standby-node")  # waiting: the node does not exist yet


def test_list_zones(ops: TpuOps) -> None:
    assert ops.list_zones() == sorted(ZONES)


def test_unavailable_zone_is_reported_while_others_are_listed(gcp: GcpSimulator, ops: TpuOps) -> None:
    gcp.inject_fault(r"/locations/asia-northeast1-b/queuedResources", 503, count=5)
    listing = ops.list_queued_resources(ZONES)
    assert [qr.name for qr in listing.resources] == ["gemma4-old", "gemma4-qr"]
    assert list(listing.errors) == ["asia-northeast1-b"]
    error = listing.errors["asia-northeast1-b"]
    assert isinstance(error, BackendUnavailable)
    assert "503" in error.message and "v2alpha1" in error.message and "\n" not in error.message
    assert "retry" in error.hint


def test_node_listing_failure_keeps_the_queued_resources(gcp: GcpSimulator, ops: TpuOps) -> None:
    gcp.inject_fault(r"/locations/us-east5-a/nodes$", 500, count=5)
    listing = ops.list_queued_resources(ZONES)
    assert len(listing.resources) == 3
    assert isinstance(listing.errors["us-east5-a"], BackendUnavailable)
    assert next(qr for qr in listing.resources if qr.name == "gemma4-qr").nodes == ()


def test_library_retries_recover_from_one_503(gcp: GcpSimulator, fast_backoff: None) -> None:
    tpu = make_ops(gcp, num_retries=2)
    gcp.inject_fault(r"/queuedResources$", 503, count=1)
    gcp.inject_fault(r"/v2/.*/nodes/", 503, count=1)
    assert len(tpu.list_queued_resources(["us-east5-a"]).resources) == 1
    assert tpu.get_node("us-east5-a", "gemma4-qr-node").state == "READY"
    list_calls = [p for m, p in gcp.requests if "/us-east5-a/queuedResources" in p]
    node_calls = [p for m, p in gcp.requests if p.startswith("/v2/") and "/nodes/" in p]
    assert len(list_calls) == 2 and len(node_calls) == 2
    tpu.close()


def test_rate_limit_is_quota_exceeded(gcp: GcpSimulator, ops: TpuOps) -> None:
    gcp.inject_fault(r"/locations$", 429, count=1)
    with pytest.raises(QuotaExceeded) as err:
        ops.list_zones()
    assert "429" in err.value.message and "minute" in err.value.hint
    gcp.inject_fault(r"/nodes/", 429, count=1)
    with pytest.raises(QuotaExceeded, match=r"TPU API v2 nodes\.get"):
        ops.get_node("us-east5-a", "gemma4-qr-node")


def test_slow_backend_is_a_timeout(gcp: GcpSimulator) -> None:
    tpu = make_ops(gcp, timeout_s=0.2)
    gcp.inject_fault(r"/queuedResources/gemma4-qr$", 200, delay_s=1.0)
    gcp.inject_fault(r"/nodes/gemma4-qr-node$", 200, delay_s=1.0)
    with pytest.raises(BackendTimeout, match=r"queuedResources\.get"):
        tpu.get_queued_resource("gemma4-qr", ["us-east5-a"])
    with pytest.raises(BackendTimeout, match=r"nodes\.get"):
        tpu.get_node("us-east5-a", "gemma4-qr-node")
    tpu.close()


def test_permission_denied_with_a_huge_body_stays_one_line(gcp: GcpSimulator, ops: TpuOps) -> None:
    huge = '{"error": {"code": 403, "message": "%s", "status": "PERMISSION_DENIED"}}' % ("denied\\n" * 2000)
    gcp.inject_fault(r"/queuedResources$", 403, count=3, body=huge)
    listing = ops.list_queued_resources(["us-east5-a"])
    error = listing.errors["us-east5-a"]
    assert isinstance(error, PermissionDenied)
    assert "\n" not in error.message and len(error.message) <= 300
    assert "403" in error.message


def test_other_project_is_permission_denied(gcp: GcpSimulator) -> None:
    tpu = TpuOps("someone-elses-project", api_endpoint=gcp.url, num_retries=0)
    with pytest.raises(PermissionDenied, match=r"locations\.list"):
        tpu.list_zones()
    tpu.close()


def test_connection_refused_is_backend_unavailable(gcp: GcpSimulator) -> None:
    url = gcp.url
    gcp.stop()
    tpu = TpuOps("demo-project", api_endpoint=url, num_retries=0, timeout_s=2)
    with pytest.raises(BackendUnavailable, match="cannot connect"):
        tpu.list_zones()
    with pytest.raises(BackendUnavailable, match="cannot connect"):
        tpu.get_node("us-east5-a", "gemma4-qr-node")
    assert isinstance(tpu.list_queued_resources(["us-east5-a"]).errors["us-east5-a"], BackendUnavailable)


def test_bad_input(ops: TpuOps) -> None:
    assert isinstance(ops.list_queued_resources(["not a zone"]).errors["not a zone"], BadInput)
    with pytest.raises(BadInput):
        ops.get_queued_resource("../etc", ZONES)
    with pytest.raises(BadInput):
        ops.get_node("us-east5-a", "a/b")


def test_paging_with_more_resources_than_one_page(scenario: dict[str, Any]) -> None:
    scenario = copy.deepcopy(scenario)
    template = scenario["google"]["queued_resources"][0]  # gemma4-qr, ACTIVE in us-east5-a
    for i in range(120):
        extra = copy.deepcopy(template)
        extra["name"] = f"bulk-{i:03d}"
        extra["node"]["id"] = f"bulk-{i:03d}-node"
        scenario["google"]["queued_resources"].append(extra)
    with GcpSimulator(scenario, now=lambda: NOW) as gcp:
        tpu = make_ops(gcp)
        listing = tpu.list_queued_resources(["us-east5-a"])
        tpu.close()
        pages = [p for _, p in gcp.requests if "/us-east5-a/queuedResources" in p]
        node_pages = [p for _, p in gcp.requests if "/us-east5-a/nodes" in p]
    assert len(listing.resources) == 121 and listing.errors == {}
    assert [qr.name for qr in listing.resources] == sorted(qr.name for qr in listing.resources)
    assert all(len(qr.nodes) == 1 and qr.nodes[0].name == f"{qr.name}-node" for qr in listing.resources)
    assert len(pages) == 3 and "pageToken=" in pages[1]  # default page size 50
    assert len(node_pages) == 3


def test_fault_count_and_clear(gcp: GcpSimulator, ops: TpuOps) -> None:
    gcp.inject_fault(r"/locations$", 503, count=2)
    for _ in range(2):
        with pytest.raises(BackendUnavailable):
            ops.list_zones()
    assert ops.list_zones() == sorted(ZONES)
    gcp.inject_fault(r"/locations$", 503, count=5)
    gcp.clear_faults()
    assert ops.list_zones() == sorted(ZONES)


def test_v2alpha1_client_is_cached_per_thread(gcp: GcpSimulator) -> None:
    mine = google.tpu_v2alpha1(gcp.url)
    assert google.tpu_v2alpha1(gcp.url) is mine
    other: list[Any] = []
    thread = threading.Thread(target=lambda: other.append(google.tpu_v2alpha1(gcp.url)))
    thread.start()
    thread.join()
    assert other and other[0] is not mine


def test_real_clients_read_every_served_collection(gcp: GcpSimulator) -> None:
    """The raw clients (not only TpuOps) parse what the simulator serves on v2alpha1 and v2."""
    parent = f"projects/{gcp.project}/locations/us-east5-a"
    alpha = google.tpu_v2alpha1(gcp.url).projects().locations()
    types = alpha.acceleratorTypes().list(parent=parent).execute()["acceleratorTypes"]
    assert [t["type"] for t in types] == ["v6e-1", "v6e-4", "v6e-8"]
    op = (
        alpha.operations().get(name=f"{parent}/operations/operation-1764400000000-gemma4-qr-create").execute()
    )
    assert op["done"] and op["response"]["name"] == f"{parent}/queuedResources/gemma4-qr"
    node = alpha.nodes().get(name=f"{parent}/nodes/gemma4-qr-node").execute()
    assert node["schedulingConfig"]["terminationTimestamp"]

    client = google.tpu_v2(gcp.url)
    assert [n.name for n in client.list_nodes(parent=parent)] == [f"{parent}/nodes/gemma4-qr-node"]
    v2_types = client.list_accelerator_types(parent=parent)
    assert [t.type_ for t in v2_types] == ["v6e-1", "v6e-4", "v6e-8"]
    assert {t.accelerator_configs[0].type_.name for t in v2_types} == {"V6E"}
    (qr,) = list(client.list_queued_resources(parent=parent))
    assert qr.state.state.name == "ACTIVE" and qr.tpu.node_spec[0].node_id == "gemma4-qr-node"
    locations = client.list_locations({"name": f"projects/{gcp.project}"})
    assert sorted(loc.location_id for loc in locations.locations) == sorted(ZONES)
    client.transport.close()
    google.close_connections(gcp.url)  # this thread's cached v2alpha1 client
