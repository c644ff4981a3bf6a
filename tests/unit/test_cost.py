"""ops.cost: the sourced price table, chip counting, estimates and live burn arithmetic."""

from __future__ import annotations

import math
import re
from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from ops import cost
from ops.errors import BadInput
from ops.tpu_model import NodeInfo, QueuedResourceInfo

T0 = datetime(2026, 1, 1, 10, 0, tzinfo=UTC)


def _qr(**kw: object) -> QueuedResourceInfo:
    base = QueuedResourceInfo(
        name="gemma4-qr",
        zone="us-east5-a",
        state="ACTIVE",
        state_initiator=None,
        provisioning_model="spot",
        accelerator_type="v6e-8",
        runtime_version="v2-alpha-tpuv6e",
        create_time=T0,
        node_ids=("gemma4-qr-node",),
        nodes=(),
        termination_time=T0 + timedelta(hours=4),
        valid_until=None,
        max_run_duration=timedelta(hours=4),
        error=None,
    )
    return replace(base, **kw)  # type: ignore[arg-type]


def _node(create_time: datetime | None, name: str = "gemma4-qr-node") -> NodeInfo:
    return NodeInfo(
        name=name,
        zone="us-east5-a",
        state="READY",
        health="HEALTHY",
        health_description="",
        accelerator_type="v6e-8",
        runtime_version="v2-alpha-tpuv6e",
        internal_ips=("10.0.0.2",),
        external_ips=(),
        create_time=create_time,
        termination_time=None,
    )


# ---- the table ------------------------------------------------------------------------------------------


def test_every_row_has_a_source_and_a_date() -> None:
    assert cost.PRICES
    for (family, model, region), row in cost.PRICES.items():
        assert (row.family, row.model, row.region) == (family, model, region)
        assert model in cost.MODELS
        assert row.usd_per_chip_hour > 0
        assert row.source.strip()
        assert re.fullmatch(r"\d{4}-\d\d-\d\d", row.as_of)


def test_figures_without_a_public_source_are_absent() -> None:
    # docs/google-apis.md §2: no public, dated source for flex-start, 1- or 3-year commitments.
    assert not [k for k in cost.PRICES if k[1] in ("flex-start", "1y", "3y")]
    assert all(
        row.source.startswith("SkyPilot catalog") and "https://" in row.source for row in cost.PRICES.values()
    )
    assert cost.DEFAULT_MODEL == "flex-start"


@pytest.mark.parametrize(
    ("family", "model", "region", "rate", "source"),
    [
        ("v6e", "on-demand", "us-east5", 2.70, "SkyPilot"),
        ("v6e", "on-demand", "europe-west4", 2.97, "SkyPilot"),
        ("v6e", "on-demand", "asia-northeast1", 3.24, "SkyPilot"),
        ("v6e", "spot", "us-east5", 1.08, "SkyPilot"),
        ("v6e", "spot", "us-east4", 0.858, "SkyPilot"),
        ("v5e", "on-demand", "us-west4", 1.20, "SkyPilot"),
        ("v5e", "spot", "asia-southeast1", 0.78, "SkyPilot"),
        ("v5p", "on-demand", "us-south1", 4.779, "SkyPilot"),
        ("v5p", "spot", "europe-west4", 1.348, "SkyPilot"),
        ("v4", "on-demand", "us-central2", 3.22, "SkyPilot"),
        ("v4", "spot", "us-central2", 0.9215, "SkyPilot"),
    ],
)
def test_rates_match_the_catalog(family: str, model: str, region: str, rate: float, source: str) -> None:
    row = cost.PRICES[(family, model, region)]
    assert row.usd_per_chip_hour == rate
    assert source in row.source


# ---- chips / region_of ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("accel", "n"),
    [
        ("v6e-1", 1),
        ("v6e-8", 8),
        ("V6E-8", 8),
        ("v6e-256", 256),
        ("v5litepod-4", 4),
        ("v5litepod-16", 16),
        ("v5p-8", 4),
        ("v5p-1024", 512),
        ("v4-8", 4),
        ("v4-32", 16),
    ],
)
def test_chip_counts(accel: str, n: int) -> None:
    assert cost.chips(accel) == n


@pytest.mark.parametrize(
    "accel", ["v9-8", "v3-8", "tpu-v6e-slice", "v6e", "", "v6e-0", "v5p-7", "v4-3", "v6e-x"]
)
def test_bad_accelerator_types(accel: str) -> None:
    with pytest.raises(BadInput):
        cost.chips(accel)


def test_unknown_family_names_the_known_ones() -> None:
    with pytest.raises(BadInput) as err:
        cost.chips("v9-8")
    assert "v6e-N" in str(err.value) and "v5p-N" in str(err.value)


def test_region_of() -> None:
    assert cost.region_of("us-east5-a") == "us-east5"
    assert cost.region_of("asia-northeast1-b") == "asia-northeast1"
    for bad in ["us-east5", "us-east5-ab", "", "$(id)"]:
        with pytest.raises(BadInput):
            cost.region_of(bad)


# ---- estimate -------------------------------------------------------------------------------------------


def test_estimate_spot_v6e_us_east5() -> None:
    est = cost.estimate("v6e-8", 4, "spot", "us-east5")
    assert (est.accelerator_type, est.chips, est.model, est.region) == ("v6e-8", 8, "spot", "us-east5")
    assert est.usd_per_chip_hour == 1.08
    assert est.hours == 4.0
    assert est.total_usd == pytest.approx(8 * 1.08 * 4)
    assert est.usd_per_hour == pytest.approx(8.64)
    assert est.as_of == "2026-11-29"
    assert "github.com/skypilot-org/skypilot-catalog" in est.source


def test_flex_start_is_refused_and_the_sourced_models_are_offered() -> None:
    with pytest.raises(BadInput, match="no flex-start price for v6e in us-east5; known: on-demand, spot"):
        cost.estimate("v6e-8", 4, cost.DEFAULT_MODEL, "us-east5")
    offered = cost.sourced_estimates("v6e-8", 4, "us-east5")
    assert [(e.model, e.total_usd) for e in offered] == [("spot", pytest.approx(34.56)), ("on-demand", 86.4)]
    assert cost.pricing_model_of("reserved") == "1y" and cost.pricing_model_of("spot") == "spot"


def test_estimate_on_demand_and_spot_and_core_counted_types() -> None:
    assert cost.estimate("v6e-8", 1, "on-demand", "us-east5").total_usd == pytest.approx(21.6)
    assert cost.estimate("v6e-4", 0.5, "spot", "us-central1").total_usd == pytest.approx(4 * 0.648 * 0.5)
    v5p = cost.estimate("v5p-8", 2, "on-demand", "us-central1")
    assert v5p.chips == 4
    assert v5p.total_usd == pytest.approx(4 * 4.20 * 2)
    assert "017e2502fb63c7a28757acd94002b2d6099d3e3d" in v5p.source
    assert cost.estimate("v5litepod-4", 10, "spot", "us-west4").total_usd == pytest.approx(4 * 0.469 * 10)
    assert cost.estimate("v6e-8", 0, "on-demand", "us-east5").total_usd == 0


def test_commitments_are_refused() -> None:
    with pytest.raises(BadInput, match="no 1y price for v6e in us-east5"):
        cost.estimate("v6e-8", 1, "1y", "us-east5")


def test_missing_model_in_region_names_what_is_known() -> None:
    with pytest.raises(BadInput) as err:
        cost.estimate("v6e-8", 1, "flex-start", "europe-west4")
    assert err.value.message == "no flex-start price for v6e in europe-west4; known: on-demand, spot"
    assert "no sourced flex-start price for v6e in any region" in err.value.hint
    with pytest.raises(BadInput) as err:
        cost.estimate("v5litepod-8", 1, "spot", "europe-north1")
    assert "spot for v5e is sourced only in: " in err.value.hint and "us-east5" in err.value.hint


def test_3y_is_never_guessed() -> None:
    with pytest.raises(BadInput) as err:
        cost.estimate("v6e-8", 1, "3y", "us-east5")
    assert err.value.message == "no 3y price for v6e in us-east5; known: on-demand, spot"


def test_no_extrapolation_between_regions_or_generations() -> None:
    with pytest.raises(BadInput, match="no flex-start price for v5e in us-central1; known: on-demand, spot"):
        cost.estimate("v5litepod-8", 1, "flex-start", "us-central1")
    with pytest.raises(BadInput, match="no 1y price for v6e in us-central1"):
        cost.estimate("v6e-8", 1, "1y", "us-central1")
    # europe-north1 has a v5e on-demand price but no spot price.
    with pytest.raises(BadInput) as err:
        cost.estimate("v5litepod-8", 1, "spot", "europe-north1")
    assert err.value.message == "no spot price for v5e in europe-north1; known: on-demand"


def test_unknown_region() -> None:
    with pytest.raises(BadInput) as err:
        cost.estimate("v6e-8", 1, "on-demand", "mars-east1")
    assert err.value.message.startswith("no price for v6e in mars-east1; v6e is priced in: ")
    assert "us-east5" in err.value.message


def test_zone_instead_of_region_is_rejected_with_a_hint() -> None:
    with pytest.raises(BadInput) as err:
        cost.estimate("v6e-8", 1, "on-demand", "us-east5-a")
    assert "us-east5" in err.value.hint


def test_unknown_model_and_type() -> None:
    with pytest.raises(BadInput) as err:
        cost.estimate("v6e-8", 1, "preemptible", "us-east5")
    assert "flex-start, spot, on-demand, 1y, 3y" in str(err.value)
    with pytest.raises(BadInput, match="unknown TPU accelerator family"):
        cost.estimate("v7x-8", 1, "on-demand", "us-east5")


@pytest.mark.parametrize("hours", [-1, math.nan, math.inf, True, "4"])
def test_bad_hours(hours: object) -> None:
    with pytest.raises(BadInput):
        cost.estimate("v6e-8", hours, "on-demand", "us-east5")  # type: ignore[arg-type]


# ---- burn -----------------------------------------------------------------------------------------------


def test_burn_from_qr_create_time() -> None:
    b = cost.burn(_qr(), T0 + timedelta(hours=2, minutes=30))
    assert b.usd_per_hour == pytest.approx(8 * 1.08)
    assert b.hours_so_far == pytest.approx(2.5)
    assert b.usd_so_far == pytest.approx(8.64 * 2.5)
    assert b.usd_until_termination == pytest.approx(8.64 * 1.5)
    assert b.start == T0
    assert "2026-11-29" in b.price_source


def test_burn_starts_at_the_earliest_node_create_time_when_known() -> None:
    qr = _qr(nodes=(_node(T0 + timedelta(minutes=30)),))
    b = cost.burn(qr, T0 + timedelta(hours=2, minutes=30))
    assert b.start == T0 + timedelta(minutes=30)
    assert b.hours_so_far == pytest.approx(2.0)
    assert b.usd_so_far == pytest.approx(17.28)


def test_burn_counts_every_slice() -> None:
    qr = _qr(nodes=(_node(T0, "a"), _node(T0, "b")), provisioning_model="on-demand", termination_time=None)
    b = cost.burn(qr, T0 + timedelta(hours=1))
    assert b.usd_per_hour == pytest.approx(2 * 8 * 2.70)


def test_burn_spot_has_no_termination() -> None:
    b = cost.burn(_qr(provisioning_model="spot", termination_time=None), T0 + timedelta(hours=3))
    assert b.usd_until_termination is None
    assert b.usd_so_far == pytest.approx(8 * 1.08 * 3)


def test_burn_reserved_without_a_1y_price_is_bad_input() -> None:
    with pytest.raises(BadInput, match="1-year commitment") as err:
        cost.burn(_qr(provisioning_model="reserved", zone="europe-west4-a"), T0 + timedelta(hours=1))
    assert "no 1y price for v6e in europe-west4" in err.value.message


def test_burn_clamps_times() -> None:
    before = cost.burn(_qr(), T0 - timedelta(minutes=5))
    assert before.hours_so_far == 0 and before.usd_so_far == 0
    after = cost.burn(_qr(), T0 + timedelta(hours=5))
    assert after.usd_until_termination == 0
    assert after.usd_so_far == pytest.approx(8.64 * 5)


@pytest.mark.parametrize(
    "qr",
    [
        _qr(state="WAITING_FOR_RESOURCES"),
        _qr(state="SUSPENDED"),
        _qr(create_time=None),
        _qr(accelerator_type=""),
        _qr(provisioning_model="best-effort"),
        _qr(provisioning_model="flex-start"),  # no sourced flex-start price
    ],
)
def test_burn_bad_input(qr: QueuedResourceInfo) -> None:
    with pytest.raises(BadInput):
        cost.burn(qr, T0 + timedelta(hours=1))


def test_burn_needs_an_aware_now() -> None:
    with pytest.raises(BadInput):
        cost.burn(_qr(), datetime(2026, 1, 1, 12, 0))


def test_live_burn_has_a_total_and_counts_what_has_no_price() -> None:
    from types import SimpleNamespace
    from typing import Any, cast

    from bot.handlers.cost import _burn_text
    from ops.tpu_model import ZoneListing

    now = T0 + timedelta(minutes=90)
    listing = ZoneListing(
        (
            _qr(name="a", provisioning_model="spot"),
            _qr(name="b", provisioning_model="on-demand", termination_time=None),
            _qr(name="c", provisioning_model="flex-start"),
        )
    )
    services = SimpleNamespace(
        now=lambda: now,
        tpu=SimpleNamespace(list_queued_resources=lambda zones: listing),
        settings=SimpleNamespace(tpu_zones=["us-east5-a"]),
    )
    text = _burn_text(cast(Any, SimpleNamespace(services=services)))
    assert "`a` (v6e-8, spot, us-east5-a): $12.96 over 1h 30m at $8.64/h" in text
    assert "*Total* $45.36 so far, $30.24/h now (2 priced; 1 without a sourced price, not counted)" in text
    assert "`c` (v6e-8, flex-start): no flex-start price" in text


def _spend_reply(*qrs: QueuedResourceInfo) -> str:
    from types import SimpleNamespace
    from typing import Any, cast

    from bot.handlers.cost import fleet_spend
    from ops.tpu_model import ZoneListing

    now = T0 + timedelta(minutes=90)
    services = SimpleNamespace(
        now=lambda: now,
        tpu=SimpleNamespace(list_queued_resources=lambda zones: ZoneListing(qrs)),
        settings=SimpleNamespace(tpu_zones=["us-east5-a"]),
    )
    ctx = SimpleNamespace(services=services, fleet=None, deployment="default")
    reply = fleet_spend(cast(Any, ctx), T0, "today (UTC)")
    return "\n".join(str(b) for b in reply.blocks)


def test_spend_of_unpriced_resources_is_unknown_never_zero() -> None:
    text = _spend_reply(_qr(name="c", provisioning_model="flex-start"))
    assert "$0.00" not in text
    assert "*default*: unknown (not priced)" in text
    assert "*Total* unknown since" in text and "1 resource(s) not priced, none priced" in text
    # The on-demand price bounds it, labelled as the ceiling (ops.cost.quote).
    assert "`c` not priced: no flex-start price" in text and "(the on-demand price as the ceiling)" in text


def test_spend_with_some_priced_resources_counts_those_and_says_so() -> None:
    text = _spend_reply(
        _qr(name="a", provisioning_model="spot"), _qr(name="c", provisioning_model="flex-start")
    )
    assert "*default*: *$12.96* (priced resources only)" in text
    assert "*Total* $12.96 since" in text and "(priced resources only" in text
    assert "*Total* $0.00" not in _spend_reply(_qr(name="a", provisioning_model="spot"))


def test_quote_is_exact_a_labelled_ceiling_or_not_priced() -> None:
    exact = cost.quote("v6e-8", "spot", "us-east5")
    assert exact.kind == cost.EXACT and exact.usd_per_hour == pytest.approx(8.64) and not exact.why
    assert exact.ceiling_text == ""
    flex = cost.quote("v6e-8", "flex-start", "us-east5")
    assert flex.kind == cost.CEILING and flex.usd_per_hour == pytest.approx(21.60)  # on-demand, 8 chips
    assert flex.why == "no flex-start price for v6e in us-east5; known: on-demand, spot"
    assert flex.ceiling_text == "at most $21.60/h (the on-demand price as the ceiling)"
    reserved = cost.quote("v6e-8", "reserved", "europe-west4")
    assert reserved.kind == cost.CEILING and "reserved is priced as a 1-year commitment" in reserved.why
    assert cost.quote("v6e-8", "best-effort", "us-east5").why.startswith("no price mapping")
    nowhere = cost.quote("v6e-8", "flex-start", "mars-east1")
    assert nowhere.kind == cost.UNPRICED and nowhere.usd_per_hour is None and nowhere.ceiling_text == ""
    with pytest.raises(BadInput, match="malformed region"):
        cost.quote("v6e-8", "spot", "us-east5-a")
    assert cost.quote_of(_qr(accelerator_type="")).kind == cost.UNPRICED  # never raises


def test_burn_and_the_plan_take_the_same_decision_from_quote() -> None:
    from ops.spend import plan_spend

    flex = _qr(provisioning_model="flex-start")
    with pytest.raises(BadInput) as err:
        cost.burn(flex, T0 + timedelta(hours=1))  # a spend so far is a figure, never a ceiling
    assert err.value.message == cost.quote_of(flex).why
    plan = plan_spend("v6e-8", "flex-start", ["us-east5-a"], 1, 1.0)
    assert plan.ceiling and plan.usd_per_hour["us-east5-a"] == cost.quote_of(flex).usd_per_hour


def test_deployment_spend_counts_exact_prices_and_names_the_rest() -> None:
    from ops.errors import OpsError
    from ops.spend import deployment_spend, midnight
    from ops.tpu_model import ZoneListing

    now = T0 + timedelta(minutes=90)
    listing = ZoneListing(
        (
            _qr(name="a", provisioning_model="spot"),
            _qr(name="c", provisioning_model="flex-start"),
            _qr(name="w", state="WAITING_FOR_RESOURCES"),
        ),
        {"us-east5-b": OpsError("503")},
    )
    spend = deployment_spend(listing, now, midnight(now))
    assert [r.qr.name for r in spend.resources] == ["a", "c"] and spend.zones_failed == ["us-east5-b"]
    assert spend.usd == pytest.approx(8.64 * 1.5) and spend.usd_per_hour == pytest.approx(8.64)
    (unpriced,) = spend.unpriced
    assert unpriced.qr.name == "c" and unpriced.why.startswith("no flex-start price")
    failed = deployment_spend(OpsError("quota"), now, midnight(now))
    assert failed.error is not None and not failed.resources
