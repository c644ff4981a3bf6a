"""Pure parts of safe hands: spend arithmetic, pins compared on Confirm, ownership labels."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from bot.shared.safety import check_pins, pins_text
from ops.cost.spend import plan_spend
from ops.errors import OpsError
from ops.tpu.model import QueuedResourceInfo
from ops.tpu.ownership import label_value, made_by, ownership_labels


class _Ctx:
    """Only what check_pins reads."""

    def __init__(self, plan: str) -> None:
        self.confirmed_plan = plan


def _pin(state: str = "ACTIVE", created: str = "2026-11-30T10:00:00+00:00") -> dict[str, str]:
    return {"zone": "us-east5-a", "name": "gemma4-qr", "created": created, "state": state}


def test_spend_worst_case_is_parallel_times_the_top_price_for_the_whole_run() -> None:
    plan = plan_spend("v6e-8", "spot", ["us-east5-a", "us-central1-b"], 3, 4.0)
    assert plan.usd_per_hour["us-east5-a"] == pytest.approx(8.64)
    assert plan.usd_per_hour["us-central1-b"] == pytest.approx(8 * 0.64833)
    assert plan.at_once == 2  # never more than the zones tried
    assert plan.winner_usd == pytest.approx(34.56) and plan.worst_case_usd == pytest.approx(69.12)
    assert not plan.ceiling and not plan.missing
    elsewhere = plan_spend("v6e-8", "spot", ["us-east5-a", "mars-east1-a"], 2, 4.0)
    assert elsewhere.ceiling and elsewhere.usd_per_hour["mars-east1-a"] == pytest.approx(8 * 3.24)
    assert elsewhere.missing == [
        "no spot row for v6e in mars-east1; used instead: the on-demand row of asia-south1 ($3.240 per "
        "chip-hour), not a price of mars-east1"
    ]


def test_spend_without_a_sourced_price_is_bounded_by_on_demand() -> None:
    plan = plan_spend("v6e-8", "flex-start", ["us-east5-a"], 1, 2.0)
    assert plan.ceiling and plan.usd_per_hour["us-east5-a"] == pytest.approx(21.60)  # on-demand, 8 chips
    assert plan.worst_case_usd == pytest.approx(43.20)


def test_spend_without_an_end_is_per_hour() -> None:
    plan = plan_spend("v6e-8", "spot", ["us-east5-a"], 1, None)
    assert plan.worst_case_usd is None and plan.worst_case_usd_per_hour is not None


@pytest.mark.parametrize(
    ("now", "refused"),
    [
        (_pin(), ""),
        (_pin(created="2026-11-30T11:00:00+00:00"), "was recreated"),
        (_pin(state="absent", created=""), "no longer exists"),
        (_pin(state="SUSPENDED"), "went from ACTIVE to SUSPENDED"),
    ],
)
def test_pins_refuse_what_changed(now: dict[str, str], refused: str) -> None:
    ctx: Any = _Ctx(pins_text([_pin()]))
    if not refused:
        check_pins(ctx, [now], "tpu delete gemma4-qr")
        return
    with pytest.raises(OpsError, match=refused):
        check_pins(ctx, [now], "tpu delete gemma4-qr")


def test_a_waiting_request_that_became_active_is_the_same_target() -> None:
    ctx: Any = _Ctx(pins_text([_pin(state="WAITING_FOR_RESOURCES")]))
    check_pins(ctx, [_pin(state="ACTIVE")], "tpu find")
    appeared: Any = _Ctx(pins_text([_pin(state="absent", created="")]))
    with pytest.raises(OpsError, match="now exists"):
        check_pins(appeared, [_pin()], "tpu create gemma4-qr")


def test_a_plan_without_pins_is_refused() -> None:
    ctx: Any = _Ctx("0123456789abcdef")
    with pytest.raises(OpsError, match="carries no pin"):
        check_pins(ctx, [_pin()], "tpu delete gemma4-qr")


def test_labels_follow_google_rules_and_prove_ownership_with_the_create_time() -> None:
    labels = ownership_labels("r0abc", "U0ADMIN01", "Search.1")
    assert labels == {
        "managed-by": "tpu-chatops",
        "tpu-chatops-request": "r0abc",
        "tpu-chatops-user": "u0admin01",
        "tpu-chatops-search": "search-1",
    }
    assert len(label_value("x" * 100)) == 63
    sent = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
    qr = QueuedResourceInfo(
        "gemma4-qr", "us-east5-a", "ACTIVE", None, "flex-start", "v6e-8", "r", sent + timedelta(seconds=5),
        (), (), None, None, None, None, labels=labels,
    )  # fmt: skip
    assert made_by(qr, "r0abc", sent)
    assert not made_by(qr, "r0other", sent)
    older = QueuedResourceInfo(
        "gemma4-qr", "us-east5-a", "ACTIVE", None, "flex-start", "v6e-8", "r", sent - timedelta(hours=2),
        (), (), None, None, None, None, labels=labels,
    )  # fmt: skip
    assert not made_by(older, "r0abc", sent)  # existed before the request: never its own
