"""Create-failure classification (ops.diagnosis.zonefit.classify) on the real texts in sim/cases, on the
typed errors and on operation errors; the create body mapping; capacity-search names."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest

from ops.diagnosis.zonefit import Classification, classify
from ops.errors import (
    AlreadyExists,
    BackendTimeout,
    BackendUnavailable,
    BadInput,
    Cancelled,
    CapacityUnavailable,
    NotFound,
    PermissionDenied,
    QuotaExceeded,
    UnsupportedInZone,
)
from ops.gcp.google import operation_error
from ops.gcp.secrets import crc32c
from ops.tpu.model import CreateSpec, check_create_spec, queued_resource_body
from sim.cases import CASES

# What sim/cases/README.md says the bot should conclude for each tpu-create-*.txt.
EXPECTED = {
    "tpu-create-zone-stockout.txt": Classification("transient", "stockout"),
    "tpu-create-accelerator-not-in-zone.txt": Classification("permanent", "accelerator not offered"),
    "tpu-create-flex-start-unsupported.txt": Classification("permanent", "flex-start not offered"),
}


def test_every_real_create_text_is_covered() -> None:
    assert {p.name for p in CASES.iterdir() if re.fullmatch(r"tpu-create-.*\.txt", p.name)} == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_real_create_texts(name: str) -> None:
    verdict = classify((CASES / name).read_text())
    assert verdict == EXPECTED[name]
    assert verdict.remember == (verdict.kind == "permanent")


@pytest.mark.parametrize(
    ("error", "kind", "reason", "scope"),
    [
        (UnsupportedInZone("the zone does not offer it"), "permanent", "not offered in zone", "zone"),
        (CapacityUnavailable("zone is full"), "transient", "stockout", "zone"),
        # A 429 whose words no family knows is not told to retry: a quota of 0 reads the same there.
        (QuotaExceeded("HTTP 429 Too Many Requests"), "unknown", "quota or rate limit", "zone"),
        (BackendTimeout("TPU API: no answer in time"), "transient", "timeout", "zone"),
        (BackendUnavailable("TPU API: HTTP 503 Service Unavailable"), "transient", "server error", "zone"),
        (AlreadyExists("HTTP 409 Conflict"), "transient", "already exists", "zone"),
        (Cancelled("stopped"), "transient", "cancelled", "zone"),
        (PermissionDenied("HTTP 403 Forbidden"), "permanent", "permission denied", "request"),
        (BadInput("HTTP 400: runDuration.maxRunDuration is required"), "permanent", "bad request", "request"),
        (
            NotFound("HTTP 404: Location projects/p/locations/xx-nowhere1-z is not found."),
            "permanent",
            "zone unknown",
            "zone",
        ),
    ],
)
def test_typed_errors(error: Exception, kind: str, reason: str, scope: str) -> None:
    assert classify(error) == Classification(kind, reason, scope)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        (
            "code 8: Quota 'TPUV6EPreemptiblePerProjectPerZoneForTPUAPI' exceeded. Limit: 64.",
            "quota exceeded",
        ),
        ("HTTP 503: The service is currently unavailable.", "server error"),
        ("code 14: UNAVAILABLE", "server error"),
        ("Error code 8", "stockout"),
        (
            'SPOT provisioning model is not supported for accelerator type "v6e-8" in location "x"',
            "spot not offered",
        ),
        ("something else entirely", "unknown error"),
    ],
)
def test_other_texts(text: str, reason: str) -> None:
    assert classify(text).reason == reason


def test_internal_ips_is_not_a_server_error() -> None:
    assert classify("the node has internal IPs only").reason == "unknown error"


@pytest.mark.parametrize(
    ("code", "message", "cls"),
    [
        (
            8,
            'There is no more capacity in the zone "us-east5-a"; you can try in another zone',
            CapacityUnavailable,
        ),
        (8, "Quota 'TPUV6EPerProjectPerZoneForTPUAPI' exceeded", QuotaExceeded),
        (
            3,
            'FLEX_START provisioning model is not supported for accelerator type "v6e-4" in location "a-b1"',
            UnsupportedInZone,
        ),
        (3, "runDuration is required", BadInput),
        (6, "exists", AlreadyExists),
        (13, "Internal error", BackendUnavailable),
        (4, "deadline", BackendTimeout),
        (7, "denied", PermissionDenied),
    ],
)
def test_operation_errors(code: int, message: str, cls: type) -> None:
    error = operation_error({"code": code, "message": message}, "TPU operation create x")
    assert type(error) is cls
    assert message in error.message and error.hint and error.backend == "tpu"


def spec(model: str, **kw: object) -> CreateSpec:
    fields: dict[str, object] = {
        "name": "gemma4-qr",
        "node_id": "gemma4-qr-node",
        "zone": "us-east5-a",
        "accelerator_type": "v6e-8",
        "runtime_version": "v2-alpha-tpuv6e",
        "provisioning_model": model,
        "max_run_duration": timedelta(hours=4) if model == "flex-start" else None,
        "valid_until": timedelta(hours=4),
    }
    fields.update(kw)
    return CreateSpec(**fields)  # type: ignore[arg-type]


def test_flex_start_body_matches_the_gcloud_mapping() -> None:
    body = queued_resource_body(
        spec("flex-start", startup_script="#!/bin/bash\necho hi", labels={"purpose": "flex-start"}), "p"
    )
    assert body == {
        "tpu": {
            "nodeSpec": [
                {
                    "parent": "projects/p/locations/us-east5-a",
                    "nodeId": "gemma4-qr-node",
                    "node": {
                        "acceleratorType": "v6e-8",
                        "runtimeVersion": "v2-alpha-tpuv6e",
                        "networkConfig": {"network": "default", "enableExternalIps": True},
                        "metadata": {"startup-script": "#!/bin/bash\necho hi"},
                        "labels": {"purpose": "flex-start"},
                    },
                }
            ]
        },
        "provisioningModel": "FLEX_START",
        "runDuration": {"maxRunDuration": "14400s"},
        "queueingPolicy": {"validUntilDuration": "14400s"},
    }


def test_other_models_and_service_account() -> None:
    spot = queued_resource_body(
        spec("spot", valid_until=None, service_account="sa@p.iam.gserviceaccount.com"), "p"
    )
    assert spot["spot"] == {} and spot["provisioningModel"] == "SPOT" and "queueingPolicy" not in spot
    assert spot["tpu"]["nodeSpec"][0]["node"]["serviceAccount"] == {
        "email": "sa@p.iam.gserviceaccount.com",
        "scope": ["https://www.googleapis.com/auth/cloud-platform"],
    }
    reserved = queued_resource_body(spec("reserved"), "p")
    assert reserved["guaranteed"] == {"reserved": True} and "provisioningModel" not in reserved
    assert queued_resource_body(spec("on-demand"), "p")["provisioningModel"] == "STANDARD"
    assert all(
        "runDuration" not in queued_resource_body(spec(m), "p") for m in ("spot", "reserved", "on-demand")
    )


@pytest.mark.parametrize(
    "bad",
    [
        spec("flex-start", max_run_duration=None),
        spec("flex-start", max_run_duration=timedelta(days=8)),
        spec("spot", max_run_duration=timedelta(hours=1)),
        spec("preemptible"),
        spec("spot", name="Bad_Name"),
        spec("spot", node_id="x" * 64),
        spec("spot", zone="europe"),
        spec("spot", accelerator_type="tpu8"),
        spec("spot", valid_until=timedelta(0)),
    ],
)
def test_bad_specs(bad: CreateSpec) -> None:
    with pytest.raises(BadInput):
        check_create_spec(bad)


def test_crc32c_check_value() -> None:
    assert crc32c(b"123456789") == 0xE3069283
