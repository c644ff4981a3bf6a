"""Ownership through the REAL google clients against the emulator: labels on every create, ambiguous
creates (503 or timeout, before or after the emulator created the resource) read back by label, clean-up
that never deletes what the bot did not make, one operation per name, and reconciliation; creates answered
late, lost or twice: the search never claims more than it saw, and reconciliation settles what appears
after the command ended (a search's request deleted by its label, a create's kept)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ops.errors import NotFound
from ops.store.state import OperationBusy, Store
from ops.tpu.api import TpuOps
from ops.tpu.capacity import CapacitySearch, SearchResult
from ops.tpu.model import CreateSpec
from ops.tpu.ownership import (
    MANAGED_BY,
    REQUEST_KEY,
    SEARCH_KEY,
    create_owned,
    hold_operation,
    operation_keys,
    ownership_labels,
    reconcile,
    record_sending,
)
from sim.gcp import GcpSimulator

ZONE = "us-east5-a"
CREATE_PATH = r"/queuedResources$"


def scenario() -> dict[str, Any]:
    zones = {
        ZONE: {"accelerator_types": ["v6e-8"]},
        "us-east1-d": {"accelerator_types": ["v6e-8"], "capacity": "none"},
    }
    primary = {
        "name": "gemma4-qr",
        "zone": ZONE,
        "state": "ACTIVE",
        "provisioning_model": "FLEX_START",
        "max_run_duration": "4h",
        "created": "-90m",
    }
    google = {"time_speed": 60, "operation_duration": "5s", "delete_duration": "5s", "zones": zones}
    return {"project": "own-project", "google": {**google, "queued_resources": [primary]}, "vllm": {}}


@pytest.fixture
def gcp() -> Iterator[GcpSimulator]:
    with GcpSimulator(scenario()) as server:
        yield server


@pytest.fixture
def tpu(gcp: GcpSimulator) -> Iterator[TpuOps]:
    ops = TpuOps(gcp.project, api_endpoint=gcp.url, num_retries=0, timeout_s=1.0)
    yield ops
    ops.close()


def run_search(tpu: TpuOps, store: Store, name: str, zones: list[str], **kw: Any) -> SearchResult:
    search = CapacitySearch(tpu, store, poll_s=0.05, operation_timeout_s=10, delete_timeout_s=10)
    return search.run(
        name,
        "v6e-8",
        "flex-start",
        zones,
        max_run_duration=timedelta(hours=4),
        valid_until=timedelta(minutes=30),
        user_id="U0OPERATOR",
        **kw,
    )


def deletes(gcp: GcpSimulator) -> list[str]:
    return [path for method, path in gcp.requests if method == "DELETE"]


@pytest.mark.parametrize(
    ("status", "delay_s", "after"),
    [(503, 0.0, False), (503, 0.0, True), (200, 1.5, True), (504, 1.5, False)],
    ids=["503-before", "503-after", "timeout-after", "timeout-before"],
)
def test_ambiguous_create_on_the_live_primary_leaves_it_alone(
    gcp: GcpSimulator, tpu: TpuOps, store: Store, status: int, delay_s: float, after: bool
) -> None:
    gcp.inject_fault(CREATE_PATH, status, delay_s=delay_s, after=after, method="POST")
    result = run_search(tpu, store, "gemma4-qr", [ZONE])
    primary = tpu.get_queued_resource("gemma4-qr", [ZONE])
    assert primary.state == "ACTIVE"
    assert not any("gemma4-qr" in path for path in deletes(gcp)), deletes(gcp)
    assert result.winner is None
    assert result.left_alone and "gemma4-qr" in result.left_alone[0] and "left alone" in result.left_alone[0]
    assert "failed" in result.zones[ZONE]


def test_ambiguous_create_that_did_create_is_recognised_by_its_label(
    gcp: GcpSimulator, tpu: TpuOps, store: Store
) -> None:
    gcp.inject_fault(CREATE_PATH, 503, after=True, method="POST")
    result = run_search(tpu, store, "gemma4-new", [ZONE])
    assert result.winner is not None and result.winner.name == "gemma4-new"
    labels = result.winner.labels
    assert labels["managed-by"] == MANAGED_BY and labels[SEARCH_KEY] == result.search_id
    assert labels[REQUEST_KEY].startswith(result.search_id)
    assert labels["tpu-chatops-user"] == "u0operator"
    kept = [r for r in store.inflight(open_only=False) if r.state == "kept"]
    assert [r.name for r in kept] == ["gemma4-new"]


def test_clean_up_deletes_only_labelled_requests(gcp: GcpSimulator, tpu: TpuOps, store: Store) -> None:
    """Parallel search under one name in two zones: the stockout zone's request (ours) is deleted there
    only; the winner keeps the name asked for; the primary is never touched."""
    result = run_search(tpu, store, "gemma4-b", ["us-east1-d", ZONE], parallel=2)
    assert result.winner is not None and (result.winner.name, result.winner.zone) == ("gemma4-b", ZONE)
    assert result.zones["us-east1-d"] == "deleted"
    assert tpu.get_queued_resource("gemma4-qr", [ZONE]).state == "ACTIVE"
    assert tpu.get_queued_resource("gemma4-b", [ZONE]).state == "ACTIVE"
    with pytest.raises(NotFound):
        tpu.get_queued_resource("gemma4-b", ["us-east1-d"])
    assert not any("gemma4-qr" in path or f"/{ZONE}/" in path for path in deletes(gcp)), deletes(gcp)
    states = {(r.zone, r.name): r.state for r in store.inflight(open_only=False)}
    assert states == {("us-east1-d", "gemma4-b"): "deleted", (ZONE, "gemma4-b"): "kept"}


def test_parallel_search_on_the_primary_s_name_leaves_it_alone(
    gcp: GcpSimulator, tpu: TpuOps, store: Store
) -> None:
    """The name is already taken in one zone (the live primary): that zone fails "already exists" and is
    never deleted; the request the search made elsewhere is deleted on cancel."""
    cancel = threading.Event()

    def watch(states: Any) -> None:
        if states.get("us-east1-d") == "WAITING_FOR_RESOURCES" and states.get(ZONE, "").startswith("failed"):
            cancel.set()

    result = run_search(
        tpu, store, "gemma4-qr", ["us-east1-d", ZONE], parallel=2, progress=watch, cancel=cancel
    )
    assert result.winner is None and result.cancelled
    assert result.zones[ZONE] == "failed: already exists"  # someone else's: nothing of ours to delete
    assert tpu.get_queued_resource("gemma4-qr", [ZONE]).state == "ACTIVE"
    with pytest.raises(NotFound):
        tpu.get_queued_resource("gemma4-qr", ["us-east1-d"])
    assert not any(f"/{ZONE}/" in path for path in deletes(gcp)), deletes(gcp)


def test_a_second_operation_on_the_same_name_is_refused(store: Store) -> None:
    now = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    keys = operation_keys("p", "search", "gemma4-qr")
    with hold_operation(store, keys, "op-1", "U1", "tpu find gemma4-qr", now=lambda: now):
        with pytest.raises(OperationBusy) as refused:
            create_keys = operation_keys("p", ZONE, "gemma4-qr")
            store.acquire_operation(create_keys, "op-2", "U2", "tpu create gemma4-qr", ttl_s=60, now=now)
        # The bot layer names the holder with a live mention (bot.shared.safety); ops says the id.
        assert refused.value.holder.user_id == "U1" and "started by U1" in refused.value.message
        assert "2026-11-30 12:00 UTC" in refused.value.message
    store.acquire_operation(keys, "op-3", "U2", "tpu find gemma4-qr", ttl_s=60, now=now)


def test_an_expired_lease_is_taken_over(store: Store) -> None:
    start = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    store.acquire_operation(["k"], "dead", "U1", "tpu find x", ttl_s=60, now=start)
    assert store.operation_running("dead", start)
    store.acquire_operation(["k"], "alive", "U2", "tpu find x", ttl_s=60, now=start + timedelta(minutes=2))
    assert not store.operation_running("dead", start + timedelta(minutes=2))


def test_two_concurrent_searches_for_one_name_make_one_resource(
    gcp: GcpSimulator, tpu: TpuOps, store: Store
) -> None:
    """Both threads try the same name at once; the lease admits one, the other is told who runs it."""
    outcomes: list[object] = []
    barrier = threading.Barrier(2)

    def one(op_id: str) -> None:
        barrier.wait()
        try:
            with hold_operation(
                store, operation_keys(tpu.project, "search", "gemma4-b"), op_id, op_id, "tpu find gemma4-b",
                now=lambda: datetime.now(UTC),
            ):  # fmt: skip
                outcomes.append(run_search(tpu, store, "gemma4-b", [ZONE], search_id=op_id))
        except OperationBusy as exc:
            outcomes.append(exc)

    threads = [threading.Thread(target=one, args=(f"op{i}",)) for i in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sum(isinstance(o, OperationBusy) for o in outcomes) == 1
    listing = tpu.list_queued_resources([ZONE], with_nodes=False)
    assert sorted(qr.name for qr in listing.resources) == ["gemma4-b", "gemma4-qr"]


def test_reconcile_deletes_an_orphaned_search_request_and_adopts_a_create(
    gcp: GcpSimulator, tpu: TpuOps, store: Store
) -> None:
    now = datetime.now(UTC)
    made = []
    for name, kind in (("gemma4-orphan", "find"), ("gemma4-wanted", "create")):
        spec = CreateSpec(
            name, f"{name}-node", ZONE, "v6e-8", "v2-alpha-tpuv6e", "flex-start", timedelta(hours=1), None,
            labels=ownership_labels(f"req-{name}", "U1"),
        )  # fmt: skip
        record_sending(
            store, spec, request_id=f"req-{name}", operation_id=f"op-{name}", kind=kind, project=tpu.project,
            user_id="U1", channel_id="C1", now=now,
        )  # fmt: skip
        made.append(create_owned(tpu, spec, f"req-{name}", now))
    # A row whose name is the primary's but whose request never created it: the primary is left alone.
    primary = CreateSpec("gemma4-qr", "n", ZONE, "v6e-8", "r", "flex-start", timedelta(hours=1), None)
    record_sending(
        store, primary, request_id="req-lost", operation_id="op-lost", kind="find", project=tpu.project,
        user_id="U1", channel_id="C1", now=now,
    )  # fmt: skip
    done = {r.request.name: r.action for r in reconcile(tpu, store, now=lambda: now, poll_s=0.05)}
    assert done == {"gemma4-orphan": "deleted", "gemma4-wanted": "adopted", "gemma4-qr": "not ours"}
    assert tpu.get_queued_resource("gemma4-qr", [ZONE]).state == "ACTIVE"
    assert tpu.get_queued_resource("gemma4-wanted", [ZONE]).name == "gemma4-wanted"
    with pytest.raises(NotFound):
        tpu.get_queued_resource("gemma4-orphan", [ZONE])
    assert store.inflight(open_only=True) == []


def endpoint_world(labels: dict[str, str] | None) -> dict[str, Any]:
    node: dict[str, Any] = {"internal_ip": "10.0.0.7", "external_ip": "34.1.2.3"}
    if labels:
        node["labels"] = labels
    other = {"name": "someone-elses", "zone": ZONE, "state": "ACTIVE", "node": node}
    google = {"zones": {ZONE: {"accelerator_types": ["v6e-8"]}}, "queued_resources": [other]}
    return {"project": "own-project", "google": google, "vllm": {}}


def test_endpoint_never_comes_from_an_unlabelled_active_resource() -> None:
    from ops.vllm.endpoint import EndpointResolver

    with GcpSimulator(endpoint_world(None)) as server:
        ops = TpuOps(server.project, api_endpoint=server.url, num_retries=0, timeout_s=5.0)
        resolver = EndpointResolver(None, ops, [ZONE], 8000, primary="gemma4-qr")
        with pytest.raises(NotFound) as missing:
            resolver.resolve()
        assert "someone-elses" in missing.value.message and "not made by the bot" in missing.value.message
        ops.close()
    with GcpSimulator(endpoint_world({"managed-by": MANAGED_BY})) as server:
        ops = TpuOps(server.project, api_endpoint=server.url, num_retries=0, timeout_s=5.0)
        external = EndpointResolver(None, ops, [ZONE], 8000, primary="gemma4-qr").resolve()
        assert external.url == "http://34.1.2.3:8000"
        internal = EndpointResolver(None, ops, [ZONE], 8000, primary="gemma4-qr", internal_ip=True).resolve()
        assert internal.url == "http://10.0.0.7:8000" and "internal IP" in internal.source
        ops.close()


def test_the_emulator_refuses_labels_google_refuses(gcp: GcpSimulator, tpu: TpuOps) -> None:
    from ops.errors import BadInput
    from ops.tpu.model import CreateSpec

    spec = CreateSpec(
        "gemma4-x", "gemma4-x-node", ZONE, "v6e-8", "v2-alpha-tpuv6e", "spot", None, None,
        labels={"Owner": "U0ABC"},
    )  # fmt: skip
    with pytest.raises(BadInput) as refused:
        tpu.create_queued_resource(spec)
    assert "Invalid label" in refused.value.message


# ---- creates answered late, lost or twice


def appears(tpu: TpuOps, name: str, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            tpu.get_queued_resource(name, [ZONE])
            return
        except NotFound:
            time.sleep(0.1)
    raise AssertionError(f"{name} never appeared")


LATE_S = 3.0  # the emulator carries the create out this long after it arrived: after the client gave up


def test_a_late_create_is_unresolved_not_deleted_and_reconciliation_deletes_it(
    gcp: GcpSimulator, tpu: TpuOps, store: Store
) -> None:
    """The issue's repro: the create is answered after the client's timeout. The search must not say that
    every request was deleted; once the request appears, reconciliation deletes it by its label."""
    gcp.inject_fault(CREATE_PATH, 200, delay_s=LATE_S, method="POST")
    result = run_search(tpu, store, "newx", [ZONE])
    assert result.winner is None and not result.all_deleted
    assert list(result.unresolved) == [ZONE]
    assert result.zones[ZONE] == "unresolved: ambiguous create (timeout), request not seen (see below)"
    (record,) = store.inflight(open_only=True)
    assert record.state == "sending" and record.note == "after the timeout"
    assert record.request_id == result.unresolved[ZONE]

    early = reconcile(tpu, store, now=lambda: datetime.now(UTC), poll_s=0.05)
    assert [item.action for item in early] == ["unseen"]  # not there yet: still open, nothing claimed
    appears(tpu, "newx")
    (done,) = reconcile(tpu, store, now=lambda: datetime.now(UTC), poll_s=0.05)
    assert done.action == "deleted"
    assert done.detail.startswith("`newx` in `us-east5-a` appeared after the timeout (")
    assert done.detail.endswith("and was deleted")
    with pytest.raises(NotFound):
        tpu.get_queued_resource("newx", [ZONE])
    assert store.inflight(open_only=True) == []
    assert tpu.get_queued_resource("gemma4-qr", [ZONE]).state == "ACTIVE"


def test_a_duplicated_create_is_recognised_as_its_own_not_someone_elses(
    gcp: GcpSimulator, tpu: TpuOps, store: Store
) -> None:
    """The create's connection drops after the API made the resource; the client library sends it again
    and gets ALREADY_EXISTS. The label proves the resource is this request's: the search keeps it."""
    gcp.inject_fault(CREATE_PATH, 200, drop=True, method="POST")
    result = run_search(tpu, store, "gemma4-dup", [ZONE])
    creates = [path for method, path in gcp.requests if method == "POST" and "queuedResources" in path]
    assert len(creates) == 2  # delivered twice
    assert result.winner is not None and result.winner.name == "gemma4-dup"
    assert result.left_alone == () and result.all_deleted


def test_a_lost_answer_of_a_create_that_happened_is_watched_and_cleaned_up(
    gcp: GcpSimulator, tpu: TpuOps, store: Store
) -> None:
    """A 503 after the API made the request, in a zone without capacity: read back, it is ours; the search
    ends (no capacity) and deletes it, so here every request is accounted for."""
    stockout = "us-east1-d"
    gcp.inject_fault(CREATE_PATH, 503, after=True, method="POST")
    finder = CapacitySearch(
        tpu, store, poll_s=0.05, operation_timeout_s=10, delete_timeout_s=10, zone_timeout_s=1
    )
    result = finder.run("gemma4-lost", "v6e-8", "flex-start", [stockout], max_run_duration=timedelta(hours=1))
    assert result.winner is None and result.all_deleted and result.zones[stockout].startswith("failed")
    with pytest.raises(NotFound):
        tpu.get_queued_resource("gemma4-lost", [stockout])


def _sent(store: Store, tpu: TpuOps, name: str, kind: str, at: datetime) -> CreateSpec:
    request_id = f"req-{name}"
    spec = CreateSpec(
        name, f"{name}-node", ZONE, "v6e-8", "v2-alpha-tpuv6e", "spot", None, None,
        labels=ownership_labels(request_id, "U1"),
    )  # fmt: skip
    record_sending(
        store, spec, request_id=request_id, operation_id=f"op-{name}", kind=kind, project=tpu.project,
        user_id="U1", channel_id="C1", now=at,
    )  # fmt: skip
    return spec


def test_a_late_create_of_tpu_create_is_kept_and_an_unseen_one_closes_after_the_watch(
    gcp: GcpSimulator, tpu: TpuOps, store: Store
) -> None:
    now = datetime.now(UTC)
    spec = _sent(store, tpu, "gemma4-wanted", "create", now)
    gcp.inject_fault(CREATE_PATH, 200, delay_s=LATE_S, method="POST")
    outcome = create_owned(tpu, spec, "req-gemma4-wanted", now, pause_s=0.05)
    assert outcome.operation is None and outcome.resource is None and outcome.ambiguous is not None
    store.update_inflight("req-gemma4-wanted", "sending", now=now, note="after the timeout")
    _sent(store, tpu, "gemma4-never", "find", now - timedelta(hours=2))  # sent, never made, long ago
    appears(tpu, "gemma4-wanted")
    done = {item.request.name: item for item in reconcile(tpu, store, now=lambda: now, poll_s=0.05)}
    assert done["gemma4-wanted"].action == "adopted"
    assert "appeared after the timeout" in done["gemma4-wanted"].detail
    assert done["gemma4-wanted"].detail.endswith("is kept: `/tpu create` asked for it")
    assert (
        done["gemma4-never"].action == "absent" and "did not appear in 60 min" in done["gemma4-never"].detail
    )
    assert (
        tpu.get_queued_resource("gemma4-wanted", [ZONE]).labels["tpu-chatops-request"] == "req-gemma4-wanted"
    )
    assert store.inflight(open_only=True) == []


def test_reconciliation_reads_only_its_own_project(gcp: GcpSimulator, tpu: TpuOps, store: Store) -> None:
    """A record of another deployment's project is not read with this project's API (it would look absent
    and be closed while its resource bills)."""
    other = CreateSpec("gemma4-x", "n", ZONE, "v6e-8", "r", "spot", None, None)
    record_sending(
        store, other, request_id="req-x", operation_id="op-x", kind="find", project="another-project",
        user_id="U1", channel_id="C1", now=datetime.now(UTC) - timedelta(days=1),
    )  # fmt: skip
    assert reconcile(tpu, store, now=lambda: datetime.now(UTC), poll_s=0.05) == []
    assert [r.request_id for r in store.inflight(open_only=True)] == ["req-x"]
