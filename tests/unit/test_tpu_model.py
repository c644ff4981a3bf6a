"""Unit tests of the pure mappings: API JSON -> typed values (ops.tpu.model), client errors -> OpsError
(ops.gcp.google)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httplib2
import pytest
import requests
from google.api_core import exceptions as core_exceptions
from googleapiclient.errors import HttpError

from ops.errors import (
    BackendTimeout,
    BackendUnavailable,
    BadInput,
    NotFound,
    OpsError,
    PermissionDenied,
    QuotaExceeded,
)
from ops.gcp.google import map_error
from ops.times import parse_protobuf_duration
from ops.tpu.model import (
    NodeInfo,
    QueuedResourceInfo,
    node_from_api,
    parse_time,
    provisioning_model_label,
    queued_resource_from_api,
    termination_time_of,
    valid_until_of,
)

T0 = datetime(2026, 11, 29, 10, 0, tzinfo=UTC)
PARENT = "projects/p/locations/us-east5-a"


def qr(**fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "name": f"{PARENT}/queuedResources/q1",
        "createTime": "2026-11-29T10:00:00Z",
        "tpu": {"nodeSpec": [{"parent": PARENT, "nodeId": "q1-node", "node": {"acceleratorType": "v6e-8"}}]},
        "state": {"state": "ACTIVE", "stateInitiator": "USER"},
    }
    body.update(fields)
    return body


def node(name: str = "q1-node", **fields: Any) -> dict[str, Any]:
    return {"name": f"{PARENT}/nodes/{name}", "state": "READY", **fields}


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"provisioningModel": "FLEX_START"}, "flex-start"),
        ({"provisioningModel": "FLEX_START", "spot": {}}, "flex-start"),
        ({"provisioningModel": "SPOT"}, "spot"),
        ({"spot": {}}, "spot"),
        ({"provisioningModel": "STANDARD", "spot": {}}, "spot"),
        ({"provisioningModel": "RESERVATION_BOUND"}, "reserved"),
        ({"guaranteed": {"reserved": True}}, "reserved"),
        ({"reservationName": f"{PARENT}/reservations/-"}, "reserved"),
        ({"bestEffort": {}}, "best-effort"),
        ({"guaranteed": {"minDuration": "3600s"}}, "on-demand"),
        ({"provisioningModel": "STANDARD"}, "on-demand"),
        ({"provisioningModel": "PROVISIONING_MODEL_UNSPECIFIED"}, "on-demand"),
        ({}, "on-demand"),
    ],
)
def test_provisioning_model_mapping(fields: dict[str, Any], expected: str) -> None:
    assert provisioning_model_label(fields) == expected
    assert queued_resource_from_api(qr(**fields)).provisioning_model == expected


def test_termination_time_prefers_run_duration_termination_time() -> None:
    raw = qr(runDuration={"maxRunDuration": "14400s", "terminationTime": "2026-11-29T13:00:00Z"})
    nodes = [node_from_api(node(schedulingConfig={"terminationTimestamp": "2026-11-29T15:00:00Z"}))]
    assert termination_time_of(raw, nodes) == T0 + timedelta(hours=3)


def test_termination_time_falls_back_to_the_earliest_node_timestamp() -> None:
    raw = qr(runDuration={"maxRunDuration": "14400s"})
    nodes = [
        node_from_api(node("a", schedulingConfig={"terminationTimestamp": "2026-11-29T15:00:00Z"})),
        node_from_api(node("b", schedulingConfig={"terminationTimestamp": "2026-11-29T14:30:00.5Z"})),
        node_from_api(node("c")),
    ]
    assert termination_time_of(raw, nodes) == T0 + timedelta(hours=4, minutes=30, milliseconds=500)


def test_termination_time_falls_back_to_the_node_create_time_plus_max_run_for_active_only() -> None:
    """The max run duration counts from when the TPU VMs are provisioned (the node's createTime, here 2 h
    after the request), not from the queued resource's createTime."""
    raw = qr(runDuration={"maxRunDuration": "14400s"})
    nodes = [node_from_api(node(createTime="2026-11-29T12:00:00Z"))]
    assert termination_time_of(raw, nodes) == T0 + timedelta(hours=6)
    assert termination_time_of(raw) is None  # no node seen: unknown, never the request's time + 4 h
    waiting = qr(runDuration={"maxRunDuration": "14400s"}, state={"state": "WAITING_FOR_RESOURCES"})
    assert termination_time_of(waiting, nodes) is None
    assert termination_time_of(qr(), nodes) is None  # on-demand: no fixed end


def test_valid_until_variants() -> None:
    assert valid_until_of(qr(queueingPolicy={"validUntilTime": "2026-11-29T11:00:00Z"})) == T0 + timedelta(
        hours=1
    )
    assert valid_until_of(qr(queueingPolicy={"validUntilDuration": "7200s"})) == T0 + timedelta(hours=2)
    interval = {"validInterval": {"startTime": "2026-11-29T10:00:00Z", "endTime": "2026-11-29T13:00:00Z"}}
    assert valid_until_of(qr(queueingPolicy=interval)) == T0 + timedelta(hours=3)
    assert valid_until_of(qr()) is None


def test_queued_resource_mapping_attaches_only_its_nodes() -> None:
    raw = qr(
        provisioningModel="FLEX_START",
        runDuration={"maxRunDuration": "14400s"},
        state={"state": "ACTIVE", "stateInitiator": "STATE_INITIATOR_UNSPECIFIED"},
    )
    nodes = [
        node(
            "q1-node",
            networkEndpoints=[{"ipAddress": "10.0.0.2", "accessConfig": {"externalIp": "34.1.1.1"}}],
            createTime="2026-11-29T10:00:00Z",  # provisioned at once: the run counts from here
        ),
        node("other-node", queuedResource=f"{PARENT}/queuedResources/other"),
        node("q1-extra", queuedResource=f"{PARENT}/queuedResources/q1"),
    ]
    info = queued_resource_from_api(raw, nodes)
    assert (info.name, info.zone, info.state, info.state_initiator) == ("q1", "us-east5-a", "ACTIVE", None)
    assert info.node_ids == ("q1-node", "q1-extra")
    assert [n.name for n in info.nodes] == ["q1-extra", "q1-node"]
    assert info.accelerator_type == "v6e-8" and info.runtime_version == ""
    assert info.max_run_duration == timedelta(hours=4)
    assert info.termination_time == T0 + timedelta(hours=4)
    assert info.time_left(T0 + timedelta(hours=1)) == timedelta(hours=3)
    assert info.time_left(T0 + timedelta(hours=5)) == timedelta(0)


def test_failed_queued_resource_error_is_one_line() -> None:
    failed = {"state": "FAILED", "failedData": {"error": {"code": 8, "message": "no more\n  capacity "}}}
    info = queued_resource_from_api(qr(state=failed))
    assert info.state == "FAILED" and info.error == "no more capacity" and info.nodes == ()


def test_node_mapping() -> None:
    info = node_from_api(
        node(
            health="HEALTH_UNSPECIFIED",
            acceleratorType="v6e-8",
            createTime="2026-11-29T10:00:00.123456789Z",
            networkEndpoints=[{"ipAddress": "10.0.0.2", "port": 8470}, {"ipAddress": "10.0.0.3"}],
        )
    )
    assert info == NodeInfo(
        name="q1-node",
        zone="us-east5-a",
        state="READY",
        health=None,
        health_description="",
        accelerator_type="v6e-8",
        runtime_version="",
        internal_ips=("10.0.0.2", "10.0.0.3"),
        external_ips=(),
        create_time=T0 + timedelta(microseconds=123456),
        termination_time=None,
    )
    assert node_from_api({}).state == "STATE_UNSPECIFIED"


def test_time_and_duration_parsing() -> None:
    assert parse_time("2026-11-29T19:00:00+09:00") == T0
    assert parse_time("2026-11-29T10:00:00Z").tzinfo == UTC  # type: ignore[union-attr]
    assert parse_time("yesterday") is None and parse_time(None) is None
    assert parse_protobuf_duration("14400s") == timedelta(hours=4)
    assert parse_protobuf_duration("1.5s") == timedelta(seconds=1.5)
    assert parse_protobuf_duration("4h") is None and parse_protobuf_duration(3600) is None


def test_time_left_unknown() -> None:
    info = queued_resource_from_api(qr(state={"state": "WAITING_FOR_RESOURCES"}))
    assert isinstance(info, QueuedResourceInfo) and info.time_left(T0) is None


def http_error(status: int, content: bytes) -> HttpError:
    return HttpError(
        httplib2.Response({"status": status}), content, uri="https://tpu.googleapis.com/v2alpha1/x"
    )


@pytest.mark.parametrize(
    ("exc", "cls"),
    [
        (http_error(404, b'{"error": {"code": 404, "message": "nope"}}'), NotFound),
        (http_error(401, b""), PermissionDenied),
        (http_error(403, b'{"error": {"code": 403, "message": "denied"}}'), PermissionDenied),
        (http_error(429, b"{}"), QuotaExceeded),
        (http_error(500, b"oops"), BackendUnavailable),
        (http_error(503, b"{}"), BackendUnavailable),
        (http_error(504, b"{}"), BackendTimeout),
        (http_error(400, b"{}"), BadInput),
        (http_error(409, b"{}"), OpsError),
        (core_exceptions.NotFound("GET http://x/v2/n: gone"), NotFound),
        (core_exceptions.Forbidden("no"), PermissionDenied),
        (core_exceptions.TooManyRequests("slow down"), QuotaExceeded),
        (core_exceptions.ServiceUnavailable("down"), BackendUnavailable),
        (
            core_exceptions.RetryError("Timeout of 2.0s exceeded", core_exceptions.ServiceUnavailable("x")),
            BackendUnavailable,
        ),
        (requests.exceptions.ReadTimeout("read timed out"), BackendTimeout),
        (requests.exceptions.ConnectTimeout("connect timed out"), BackendTimeout),
        (requests.exceptions.ConnectionError("refused"), BackendUnavailable),
        (TimeoutError("timed out"), BackendTimeout),
        (ConnectionRefusedError(111, "Connection refused"), BackendUnavailable),
        (httplib2.ServerNotFoundError("no dns"), BackendUnavailable),
        (ValueError("weird"), BackendUnavailable),
    ],
)
def test_error_mapping(exc: BaseException, cls: type[OpsError]) -> None:
    mapped = map_error(exc, "TPU API v2alpha1 queuedResources.list us-east5-a")
    assert type(mapped) is cls
    assert mapped.message.startswith("TPU API v2alpha1 queuedResources.list us-east5-a")
    assert mapped.hint and mapped.backend == "tpu" and "\n" not in mapped.message


def test_error_message_is_truncated_and_strips_the_request_line() -> None:
    mapped = map_error(
        http_error(403, b'{"error": {"message": "%s"}}' % (b"x\\n" * 1000)), "TPU API v2alpha1 get"
    )
    assert len(mapped.message) <= 300 and "\n" not in mapped.message
    gapic = map_error(
        core_exceptions.NotFound("GET http://127.0.0.1:1/v2/a?%24alt=json: Resource gone"), "api"
    )
    assert gapic.message == "api: HTTP 404 Not Found: Resource gone"
