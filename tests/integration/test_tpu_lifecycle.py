"""Changing TPU resources through the REAL clients (google-api-python-client v2alpha1, GAPIC tpu_v2,
cloudquotas_v1, secretmanager_v1) against the emulator, with simulated time moved by `advance()`."""

from __future__ import annotations

import copy
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from google.cloud import cloudquotas_v1

from ops.errors import (
    AlreadyExists,
    BackendTimeout,
    BadInput,
    Cancelled,
    CapacityUnavailable,
    NotFound,
    OpsError,
    UnsupportedInZone,
)
from ops.gcp import google
from ops.gcp.quotas import zone_quotas
from ops.gcp.secrets import SecretStore
from ops.tpu.api import TpuOps
from ops.tpu.model import CreateSpec
from sim.gcp import GcpSimulator
from sim.gcp.world import SUSPEND_DURATION
from tests.cases import case_text
from tests.integration.test_discovery_contract import DOCS, validate
from tests.integration.test_gcp_sim import default_scenario

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
POLL: dict[str, Any] = {"timeout_s": 5.0, "poll_s": 0.01}


def lifecycle_scenario() -> dict[str, Any]:
    scenario = copy.deepcopy(default_scenario())
    zones = scenario["google"]["zones"]
    zones["us-east5-a"]["capacity"] = {"after": "5m", "provisioning": "1m"}
    zones["us-west4-a"] = {"accelerator_types": ["v6e-8"], "spot_preempt_after": "30m"}
    scenario["google"]["queued_resources"].append(
        {
            "name": "spot-qr",
            "zone": "europe-west4-a",
            "state": "ACTIVE",
            "provisioning_model": "SPOT",
            "created": "-10m",
            "preempt_after": "20m",
            "node": {"id": "spot-qr-node"},
        }
    )
    return scenario


@pytest.fixture
def gcp() -> Iterator[GcpSimulator]:
    with GcpSimulator(lifecycle_scenario(), now=lambda: NOW) as server:
        yield server


@pytest.fixture
def tpu(gcp: GcpSimulator) -> Iterator[TpuOps]:
    ops = TpuOps(gcp.project, api_endpoint=gcp.url, num_retries=0, timeout_s=5.0)
    yield ops
    ops.close()


def make_spec(name: str, zone: str = "us-east5-a", model: str = "flex-start", **kw: Any) -> CreateSpec:
    fields: dict[str, Any] = {
        "name": name,
        "node_id": f"{name}-node",
        "zone": zone,
        "accelerator_type": "v6e-8",
        "runtime_version": "v2-alpha-tpuv6e",
        "provisioning_model": model,
        "max_run_duration": timedelta(hours=4) if model == "flex-start" else None,
        "valid_until": timedelta(hours=1),
    }
    fields.update(kw)
    return CreateSpec(**fields)


def test_flex_start_create_body_and_lifecycle(gcp: GcpSimulator, tpu: TpuOps) -> None:
    spec = make_spec(
        "flex-qr",
        startup_script="#!/bin/bash\necho vllm",
        labels={"managed-by": "tpu-chatops"},
        service_account="bot@demo-project.iam.gserviceaccount.com",
    )
    op = tpu.create_queued_resource(spec)
    assert op.startswith("projects/demo-project/locations/us-east5-a/operations/")
    method, path, body = gcp.request_bodies[-1]
    assert method == "POST" and path.startswith("/v2alpha1/") and "queuedResourceId=flex-qr" in path
    assert validate(DOCS["v2alpha1"], "QueuedResource", body) == []
    node = body["tpu"]["nodeSpec"][0]["node"]
    assert node["networkConfig"]["enableExternalIps"] is True
    assert node["metadata"] == {"startup-script": "#!/bin/bash\necho vllm"}
    assert body["provisioningModel"] == "FLEX_START" and body["runDuration"] == {"maxRunDuration": "14400s"}
    assert body["queueingPolicy"] == {"validUntilDuration": "3600s"}

    gcp.advance(1)  # operation_duration 1s in the default scenario
    response = tpu.wait_operation(op, **POLL)
    assert (
        response["@type"].endswith("QueuedResource") and response["state"]["state"] == "WAITING_FOR_RESOURCES"
    )

    gcp.advance(4 * 60 + 5)  # capacity after 5m, the last minute PROVISIONING
    qr = tpu.get_queued_resource("flex-qr", ["us-east5-a"])
    assert qr.state == "PROVISIONING" and [n.state for n in qr.nodes] == ["CREATING"]
    gcp.advance(60)
    qr = tpu.get_queued_resource("flex-qr", ["us-east5-a"])
    assert qr.state == "ACTIVE" and qr.provisioning_model == "flex-start"
    (node_info,) = qr.nodes
    assert node_info.state == "READY" and node_info.internal_ips and node_info.external_ips
    active_at = NOW + timedelta(minutes=5)  # requested at NOW; the zone's capacity comes 5m later
    assert node_info.create_time == active_at - timedelta(minutes=1)  # PROVISIONING began
    assert qr.termination_time == active_at + timedelta(hours=4) and qr.max_run_duration == timedelta(hours=4)

    gcp.advance((qr.termination_time - gcp.now()).total_seconds() - 1)
    assert tpu.get_queued_resource("flex-qr", ["us-east5-a"]).state == "ACTIVE"
    gcp.advance(1)
    qr = tpu.get_queued_resource("flex-qr", ["us-east5-a"])
    assert (qr.state, qr.state_initiator, qr.nodes) == ("SUSPENDED", "SERVICE", ())
    with pytest.raises(NotFound):
        tpu.get_node("us-east5-a", "flex-qr-node")


def test_already_exists(gcp: GcpSimulator, tpu: TpuOps) -> None:
    tpu.create_queued_resource(make_spec("twice"))
    with pytest.raises(AlreadyExists, match="409"):
        tpu.create_queued_resource(make_spec("twice"))
    with pytest.raises(AlreadyExists):
        tpu.create_queued_resource(make_spec("gemma4-qr"))  # the scenario's


def test_delete_with_and_without_force(gcp: GcpSimulator, tpu: TpuOps) -> None:
    with pytest.raises(BadInput, match=r"FAILED_PRECONDITION|nodes exist") as err:
        tpu.delete_queued_resource("gemma4-qr", "us-east5-a", **POLL)
    assert "force" in err.value.hint
    op = tpu.delete_queued_resource("gemma4-qr", "us-east5-a", force=True, wait=False)
    assert tpu.get_queued_resource("gemma4-qr", ["us-east5-a"]).state == "DELETING"
    assert any("force=true" in p for m, p in gcp.requests if m == "DELETE")
    gcp.advance(1)
    assert tpu.wait_operation(op, **POLL) == {"@type": "type.googleapis.com/google.protobuf.Empty"}
    with pytest.raises(NotFound):
        tpu.get_queued_resource("gemma4-qr", ["us-east5-a"])
    # A waiting QR has no nodes: no force needed. Neither for a FAILED one.
    threading.Timer(0.05, lambda: gcp.advance(1)).start()
    tpu.delete_queued_resource("gemma4-standby", "asia-northeast1-b", **POLL)
    threading.Timer(0.05, lambda: gcp.advance(1)).start()
    tpu.delete_queued_resource("gemma4-old", "europe-west4-a", **POLL)
    assert [
        qr.name for qr in tpu.list_queued_resources(["asia-northeast1-b", "europe-west4-a"]).resources
    ] == ["spot-qr"]
    with pytest.raises(NotFound):
        tpu.delete_queued_resource("gemma4-old", "europe-west4-a")


def test_reset_a_failed_queued_resource(gcp: GcpSimulator, tpu: TpuOps) -> None:
    with pytest.raises(BadInput, match="only a FAILED queued resource can be reset"):
        tpu.reset_queued_resource("gemma4-qr", "us-east5-a")
    op = tpu.reset_queued_resource("gemma4-old", "europe-west4-a")
    gcp.advance(1)
    assert tpu.wait_operation(op, **POLL)["state"]["state"] in ("WAITING_FOR_RESOURCES", "ACTIVE")
    qr = tpu.get_queued_resource("gemma4-old", ["europe-west4-a"])
    assert qr.state == "ACTIVE" and qr.error is None  # europe-west4-a has capacity (default: available)


def test_stop_and_start_a_node_through_gapic(gcp: GcpSimulator, tpu: TpuOps) -> None:
    op = tpu.stop_node("us-east5-a", "gemma4-qr-node")
    assert tpu.get_node("us-east5-a", "gemma4-qr-node").state == "STOPPING"
    gcp.advance(1)
    assert tpu.wait_operation(op, **POLL)["state"] == "STOPPED"
    assert tpu.get_node("us-east5-a", "gemma4-qr-node").state == "STOPPED"
    with pytest.raises(BadInput):
        tpu.stop_node("us-east5-a", "gemma4-qr-node")
    op = tpu.start_node("us-east5-a", "gemma4-qr-node")
    gcp.advance(1)
    assert tpu.wait_operation(op, **POLL)["@type"].endswith("tpu.v2alpha1.Node")
    node = tpu.get_node("us-east5-a", "gemma4-qr-node")
    assert (node.state, node.health) == ("READY", "HEALTHY")
    stops = [m for m, p in gcp.requests if p.startswith("/v2/") and p.split("?")[0].endswith(":stop")]
    assert stops == ["POST", "POST"]  # GAPIC v2 REST; the second one was refused (not READY)


def test_accelerator_not_offered_has_the_real_text(gcp: GcpSimulator, tpu: TpuOps) -> None:
    real = case_text("tpu-create-accelerator-not-in-zone.txt")
    expected = real[real.index("Cloud TPU received") : real.index(" [EID")]
    expected = expected.replace("v6e-4", "v6e-1").replace("asia-east1-a", "europe-west4-a")
    with pytest.raises(UnsupportedInZone) as err:
        tpu.create_queued_resource(make_spec("wrong-type", zone="europe-west4-a", accelerator_type="v6e-1"))
    assert expected in err.value.message
    assert "HTTP 400" in err.value.message and "\n" not in err.value.message
    assert tpu.list_accelerator_types("europe-west4-a") == ["v5litepod-8", "v6e-8"]


def test_flex_start_not_offered_fails_the_operation(gcp: GcpSimulator, tpu: TpuOps) -> None:
    real = case_text("tpu-create-flex-start-unsupported.txt")
    expected = real[real.index('"message": "') + 12 : real.rindex('"')].replace('\\"', '"')
    expected = expected.replace("v6e-4", "v6e-8").replace("asia-east1-c", "europe-west4-a")
    op = tpu.create_queued_resource(make_spec("flex-eu", zone="europe-west4-a"))
    gcp.advance(1)
    with pytest.raises(UnsupportedInZone) as err:
        tpu.wait_operation(op, **POLL)
    assert expected in err.value.message and "code 3" in err.value.message
    with pytest.raises(NotFound):
        tpu.get_queued_resource("flex-eu", ["europe-west4-a"])  # nothing is kept
    # Spot is offered there; with the zone's preemptible quota 0 it is refused at once, before any
    # operation, and for good in that zone (the fault catalogue's tpu-preemptible-quota-zero): no retry.
    gcp.set_quota("europe-west4-a", "TPUV6EPreemptiblePerProjectPerZoneForTPUAPI", 0)
    with pytest.raises(
        UnsupportedInZone, match="Quota 'TPUV6EPreemptiblePerProjectPerZoneForTPUAPI' exhausted"
    ) as zero:
        tpu.create_queued_resource(make_spec("spot-eu", zone="europe-west4-a", model="spot"))
    assert "request preemptible quota" in zero.value.hint and "retry" not in zero.value.hint


def test_unknown_zone_is_unsupported(tpu: TpuOps) -> None:
    with pytest.raises(UnsupportedInZone, match="not found"):
        tpu.create_queued_resource(make_spec("nowhere", zone="mars-north1-a"))


def test_stockout_waits_until_valid_until_then_fails(gcp: GcpSimulator, tpu: TpuOps) -> None:
    op = tpu.create_queued_resource(make_spec("stock", zone="asia-northeast1-b"))
    gcp.advance(59 * 60)
    tpu.wait_operation(op, **POLL)
    assert tpu.get_queued_resource("stock", ["asia-northeast1-b"]).state == "WAITING_FOR_RESOURCES"
    gcp.advance(60)
    qr = tpu.get_queued_resource("stock", ["asia-northeast1-b"])
    assert qr.state == "FAILED" and qr.state_initiator == "SERVICE"
    assert qr.error == (
        'There is no more capacity in the zone "asia-northeast1-b"; you can try in another zone where Cloud '
        "TPU Nodes are offered (see https://cloud.google.com/tpu/docs/regions)"
    )
    raw = google.tpu_v2alpha1(gcp.url).projects().locations().queuedResources()
    failed = raw.get(
        name=f"projects/{gcp.project}/locations/asia-northeast1-b/queuedResources/stock"
    ).execute()
    assert failed["state"]["failedData"]["error"]["code"] == 8


def test_spot_preemption(gcp: GcpSimulator, tpu: TpuOps) -> None:
    """ACTIVE -> SUSPENDING (initiator SERVICE, node PREEMPTED) -> SUSPENDED with the node deleted."""
    assert tpu.get_node("europe-west4-a", "spot-qr-node").state == "READY"
    gcp.advance(20 * 60)
    qr = tpu.get_queued_resource("spot-qr", ["europe-west4-a"])
    assert (qr.state, qr.state_initiator, qr.preempted) == ("SUSPENDING", "SERVICE", True)
    assert tpu.get_node("europe-west4-a", "spot-qr-node").state == "PREEMPTED"
    gcp.advance(SUSPEND_DURATION.total_seconds())
    qr = tpu.get_queued_resource("spot-qr", ["europe-west4-a"])
    assert (qr.state, qr.state_initiator, qr.nodes, qr.preempted) == ("SUSPENDED", "SERVICE", (), True)
    with pytest.raises(NotFound):
        tpu.get_node("europe-west4-a", "spot-qr-node")
    with pytest.raises(BadInput, match="only a FAILED queued resource can be reset"):
        tpu.reset_queued_resource("spot-qr", "europe-west4-a")
    # A zone-wide preemption delay for created spot requests, and the control method.
    op = tpu.create_queued_resource(make_spec("spot-w", zone="us-west4-a", model="spot"))
    gcp.advance(1)
    tpu.wait_operation(op, **POLL)
    assert tpu.get_node("us-west4-a", "spot-w-node").state == "READY"
    gcp.advance(30 * 60)
    assert tpu.get_queued_resource("spot-w", ["us-west4-a"]).state == "SUSPENDING"
    op = tpu.create_queued_resource(make_spec("spot-x", zone="us-west4-a", model="spot"))
    gcp.advance(1)
    gcp.preempt("us-west4-a", "spot-x-node")
    assert tpu.get_node("us-west4-a", "spot-x-node").state == "PREEMPTED"
    assert tpu.get_queued_resource("spot-x", ["us-west4-a"]).preempted
    with pytest.raises(ValueError, match="not SPOT"):
        gcp.preempt("us-east5-a", "gemma4-qr-node")


def test_simulated_time_speed() -> None:
    real = [NOW]
    with GcpSimulator(lifecycle_scenario(), now=lambda: real[0], speed=60) as gcp:
        assert gcp.now() == NOW
        real[0] = NOW + timedelta(seconds=2)
        assert gcp.now() == NOW + timedelta(minutes=2)
        assert gcp.advance(30) == NOW + timedelta(minutes=2, seconds=30)
    scenario = lifecycle_scenario()
    scenario["google"]["time_speed"] = 600
    assert GcpSimulator(scenario).speed == 600


def test_wait_operation_cancel_and_timeout(gcp: GcpSimulator, tpu: TpuOps) -> None:
    op = tpu.create_queued_resource(make_spec("slow-op"))
    cancel = threading.Event()
    threading.Timer(0.1, cancel.set).start()
    with pytest.raises(Cancelled):  # not BackendTimeout: the cancel ended the wait
        tpu.wait_operation(op, timeout_s=60, poll_s=0.02, cancel=cancel)
    with pytest.raises(BackendTimeout, match="not done after"):
        tpu.wait_operation(op, timeout_s=0.1, poll_s=0.02)
    with pytest.raises(BadInput):
        tpu.wait_operation("operations/x", timeout_s=1)


def test_failed_operation_from_the_scenario_is_classified(gcp: GcpSimulator, tpu: TpuOps) -> None:
    gcp.world.operations[("europe-west4-a", "op-failed")] = copy.copy(
        next(iter(gcp.world.operations.values()))
    )
    op = gcp.world.operations[("europe-west4-a", "op-failed")]
    op.zone, op.op_id, op.error_code = "europe-west4-a", "op-failed", 8
    op.error_message = 'There is no more capacity in the zone "europe-west4-a"'
    with pytest.raises(CapacityUnavailable, match="RESOURCE_EXHAUSTED"):
        tpu.wait_operation(f"projects/{gcp.project}/locations/europe-west4-a/operations/op-failed", **POLL)


def test_zone_quotas_through_cloud_quotas(gcp: GcpSimulator) -> None:
    quotas = zone_quotas(gcp.project, "v6e", api_endpoint=gcp.url)
    assert quotas["us-east5-a"] == {
        "TPUV6EPerProjectPerZoneForTPUAPI": 64,
        "TPUV6EPreemptiblePerProjectPerZoneForTPUAPI": 64,
    }
    # europe-west4-a's preemptible quota is what its FAILED spot gemma4-old was admitted on
    assert quotas["europe-west4-a"]["TPUV6EPreemptiblePerProjectPerZoneForTPUAPI"] == 16
    gcp.set_quota("europe-west4-a", "TPUV6EPreemptiblePerProjectPerZoneForTPUAPI", 0)
    lowered = zone_quotas(gcp.project, "v6e", api_endpoint=gcp.url)["europe-west4-a"]
    assert lowered["TPUV6EPreemptiblePerProjectPerZoneForTPUAPI"] == 0  # a limit lowered is read as such
    assert zone_quotas(gcp.project, "v5p", api_endpoint=gcp.url) == {}  # no such quota ids: left out
    client = google.cloud_quotas(gcp.url)
    parent = f"projects/{gcp.project}/locations/global/services/tpu.googleapis.com"
    infos = list(client.list_quota_infos(request=cloudquotas_v1.ListQuotaInfosRequest(parent=parent)))
    assert [i.quota_id for i in infos] == [
        "TPUV6EPerProjectPerZoneForTPUAPI",
        "TPUV6EPreemptiblePerProjectPerZoneForTPUAPI",
    ]
    with pytest.raises(OpsError, match="403"):
        zone_quotas("someone-else", api_endpoint=gcp.url)


def test_secrets_round_trip_and_the_payload_never_leaks(gcp: GcpSimulator) -> None:
    store = SecretStore(gcp.project, api_endpoint=gcp.url)
    first = store.add_version("hf-token", "hf_first_SECRET")  # creates the secret
    second = store.add_version("hf-token", "hf_second_SECRET")
    assert first.endswith("/secrets/hf-token/versions/1") and second.endswith("/versions/2")
    assert store.access("hf-token") == "hf_second_SECRET"
    assert store.access("hf-token", "1") == "hf_first_SECRET"
    assert not any("/secrets" in p for _, p, _ in gcp.request_bodies)

    errors: list[BaseException] = []
    # A server that (wrongly) echoes the payload in its error must not get it into our exception.
    echo = '{"error": {"code": 500, "message": "cannot store hf_third_SECRET", "status": "INTERNAL"}}'
    gcp.inject_fault(r":addVersion$", 500, count=1, body=echo)
    with pytest.raises(OpsError) as err:
        store.add_version("hf-token", "hf_third_SECRET")
    errors.append(err.value)
    with pytest.raises(NotFound) as missing:
        store.access("hf-token", "9")
    errors.append(missing.value)
    with pytest.raises(BadInput):
        store.access("bad/id")
    for error in errors:
        assert error.__cause__ is None and error.__suppress_context__
        texts = [str(error), repr(error), getattr(error, "message", ""), getattr(error, "hint", "")]
        assert not any("SECRET" in text for text in texts), texts
    assert store.access("hf-token") == "hf_second_SECRET"  # the failed add stored nothing
    store.close()
