"""The primary is one queued resource, known by zone and name (`primary_among`), and a second TPU beside it
takes a free name (`free_name`)."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from ops.tpu.model import QueuedResourceInfo, free_name, primary_among

T0 = datetime(2026, 1, 1, 10, 0, tzinfo=UTC)
ZONES = ["us-east5-a", "asia-northeast1-b", "europe-west4-a"]


def _qr(**kw: object) -> QueuedResourceInfo:
    base = QueuedResourceInfo(
        name="gemma4-qr", zone="us-east5-a", state="ACTIVE", state_initiator=None,
        provisioning_model="flex-start", accelerator_type="v6e-8", runtime_version="v2-alpha-tpuv6e",
        create_time=T0, node_ids=("gemma4-qr-node",), nodes=(), termination_time=None, valid_until=None,
        max_run_duration=timedelta(hours=4), error=None,
    )  # fmt: skip
    return replace(base, **kw)  # type: ignore[arg-type]


def test_of_two_resources_of_one_name_the_live_one_then_the_older_is_the_primary() -> None:
    active = _qr(zone="europe-west4-a", create_time=T0 + timedelta(hours=1))
    failed = _qr(zone="us-east5-a", state="FAILED")
    waiting = _qr(zone="asia-northeast1-b", state="WAITING_FOR_RESOURCES")
    assert primary_among([failed, waiting, active], "gemma4-qr", ZONES) is active
    assert primary_among([failed, waiting], "gemma4-qr", ZONES) is waiting
    newer = _qr(zone="us-east5-a", create_time=T0 + timedelta(minutes=5))
    older = _qr(zone="europe-west4-a")
    assert primary_among([newer, older], "gemma4-qr", ZONES) is older
    same_age = _qr(zone="europe-west4-a")
    assert primary_among([same_age, _qr()], "gemma4-qr", ZONES).zone == "us-east5-a"  # TPU_ZONES order
    assert primary_among([_qr(name="other")], "gemma4-qr", ZONES) is None


def test_a_free_name_is_free_of_every_resource_and_node_name() -> None:
    assert free_name("gemma4-qr", {"gemma4-qr", "gemma4-qr-node"}) == "gemma4-qr-2"
    assert free_name("gemma4-qr", {"gemma4-qr", "gemma4-qr-2", "gemma4-qr-3-node"}) == "gemma4-qr-4"
    long = free_name("a" * 63, {"a" * 63})
    assert long.endswith("-2") and len(f"{long}-node") <= 63
