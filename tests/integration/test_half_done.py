"""Creates answered late, lost or twice, through the REAL google clients against the emulator: the search
never claims more than it saw, and reconciliation settles what appears after the command ended (a search's
request deleted by its label, a create's kept), without touching what it did not make."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from ops.capacity import CapacitySearch, SearchResult
from ops.errors import NotFound
from ops.ownership import create_owned, ownership_labels, reconcile, record_sending
from ops.store import Store
from ops.tpu import TpuOps
from ops.tpu_model import CreateSpec
from sim.gcp import GcpSimulator

ZONE = "us-east5-a"
CREATE_PATH = r"/queuedResources$"
CLIENT_TIMEOUT_S = 1.0
LATE_S = 3.0  # the emulator carries the create out this long after it arrived: after the client gave up


def scenario() -> dict[str, Any]:
    zones = {ZONE: {"accelerator_types": ["v6e-8"]}}
    primary = {"name": "gemma4-qr", "zone": ZONE, "state": "ACTIVE", "created": "-90m"}
    google = {"zones": zones, "queued_resources": [primary]}
    return {"project": "late-project", "google": google, "vllm": {}}


@pytest.fixture
def gcp() -> Iterator[GcpSimulator]:
    with GcpSimulator(scenario()) as server:
        yield server


@pytest.fixture
def tpu(gcp: GcpSimulator) -> Iterator[TpuOps]:
    ops = TpuOps(gcp.project, api_endpoint=gcp.url, num_retries=0, timeout_s=CLIENT_TIMEOUT_S)
    yield ops
    ops.close()


def search(tpu: TpuOps, store: Store, name: str) -> SearchResult:
    finder = CapacitySearch(tpu, store, poll_s=0.05, operation_timeout_s=10, delete_timeout_s=10)
    return finder.run(
        name, "v6e-8", "flex-start", [ZONE], max_run_duration=timedelta(hours=4), user_id="U0OPERATOR"
    )


def appears(tpu: TpuOps, name: str, timeout_s: float = 10.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            tpu.get_queued_resource(name, [ZONE])
            return
        except NotFound:
            time.sleep(0.1)
    raise AssertionError(f"{name} never appeared")


def test_a_late_create_is_unresolved_not_deleted_and_reconciliation_deletes_it(
    gcp: GcpSimulator, tpu: TpuOps, store: Store
) -> None:
    """The issue's repro: the create is answered after the client's timeout. The search must not say that
    every request was deleted; once the request appears, reconciliation deletes it by its label."""
    gcp.inject_fault(CREATE_PATH, 200, delay_s=LATE_S, method="POST")
    result = search(tpu, store, "newx")
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
    result = search(tpu, store, "gemma4-dup")
    creates = [path for method, path in gcp.requests if method == "POST" and "queuedResources" in path]
    assert len(creates) == 2  # delivered twice
    assert result.winner is not None and result.winner.name == "gemma4-dup"
    assert result.left_alone == () and result.all_deleted


def test_a_lost_answer_of_a_create_that_happened_is_watched_and_cleaned_up(
    gcp: GcpSimulator, tpu: TpuOps, store: Store
) -> None:
    """A 503 after the API made the request, in a zone without capacity: read back, it is ours; the search
    ends (no capacity) and deletes it, so here every request is accounted for."""
    gcp.set_capacity(ZONE, "none")
    gcp.inject_fault(CREATE_PATH, 503, after=True, method="POST")
    finder = CapacitySearch(
        tpu, store, poll_s=0.05, operation_timeout_s=10, delete_timeout_s=10, zone_timeout_s=1
    )
    result = finder.run("gemma4-lost", "v6e-8", "flex-start", [ZONE], max_run_duration=timedelta(hours=1))
    assert result.winner is None and result.all_deleted and result.zones[ZONE].startswith("failed")
    with pytest.raises(NotFound):
        tpu.get_queued_resource("gemma4-lost", [ZONE])


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
