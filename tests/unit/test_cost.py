"""ops.cost.pricing: the sourced price table, chip counting, estimates and live burn arithmetic."""

from __future__ import annotations

import math
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from ops.cost import pricing as cost
from ops.datafile import DataFileError
from ops.errors import BadInput
from ops.tpu.model import NodeInfo, QueuedResourceInfo

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

DEMO_REGIONS = ("us-east5", "asia-northeast1", "europe-west4")  # sim/scenarios/default.yaml's zones


def test_every_row_has_a_public_source_and_a_read_date() -> None:
    assert cost.PRICES
    for (family, model, region), row in cost.PRICES.items():
        assert (row.family, row.model, row.region) == (family, model, region)
        assert model in cost.MODELS and row.usd_per_chip_hour > 0
        assert row.url.startswith("https://") and row.source.strip()
        assert isinstance(row.as_of, date) and row.line > 0
        assert f"read {row.as_of.isoformat()}" in row.cited


@pytest.mark.parametrize("family", ["v6e-8", "v5litepod-8", "v5p-8"])
@pytest.mark.parametrize("region", DEMO_REGIONS)
@pytest.mark.parametrize("model", cost.MODELS)
def test_every_model_of_the_demo_s_regions_gets_a_figure_with_source_and_date(
    family: str, region: str, model: str
) -> None:
    quote = cost.quote(family, model, region)
    assert quote.usd_per_hour is not None and quote.usd_per_hour > 0
    assert quote.row is not None and "read 2026-" in quote.source
    if quote.kind != cost.EXACT:  # the missing row and the one standing in are both named
        assert quote.missing.startswith(f"no {model} row for {cost.family_of(family)} in {region}")
        assert "used instead: the on-demand row of " in quote.used and quote.why


@pytest.mark.parametrize(
    ("family", "model", "region", "rate", "source"),
    [
        ("v6e", "on-demand", "us-east5", 2.70, "SkyPilot"),
        ("v6e", "on-demand", "europe-west4", 2.97, "SkyPilot"),
        ("v6e", "on-demand", "asia-northeast1", 3.24, "SkyPilot"),
        ("v6e", "spot", "us-east5", 1.08, "SkyPilot"),
        ("v6e", "spot", "asia-northeast1", 1.07681, "SkyPilot"),
        ("v6e", "1y", "us-east5", 1.89, "Trillium"),
        ("v6e", "3y", "us-east5", 1.22, "Trillium"),
        ("v5e", "on-demand", "us-west4", 1.20, "SkyPilot"),
        ("v5e", "spot", "europe-west4", 0.44261, "SkyPilot"),
        ("v5p", "on-demand", "europe-west4", 4.2525, "SkyPilot"),
        ("v5p", "spot", "us-east5", 1.56009, "SkyPilot"),
        ("v4", "on-demand", "us-central2", 3.22, "SkyPilot"),
    ],
)
def test_rates_match_their_source(family: str, model: str, region: str, rate: float, source: str) -> None:
    row = cost.PRICES[(family, model, region)]
    assert row.usd_per_chip_hour == rate and source in row.source


def test_no_flex_start_row_is_invented() -> None:
    assert not [k for k in cost.PRICES if k[1] == "flex-start"]
    assert cost.DEFAULT_MODEL == "flex-start"


def _write(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "prices.yaml"
    path.write_text(body, encoding="utf-8")
    return path


_GOOD = """sources:
  s1: {url: https://example.org/p, title: a page, read: 2026-12-01}
gaps: {}
prices:
  - {family: v6e, model: spot, region: us-east5, usd_per_chip_hour: 1.0, source: s1}
"""


def test_the_price_file_schema_names_file_and_line(tmp_path: Path) -> None:
    assert cost.load_prices(_write(tmp_path, _GOOD)).rows[("v6e", "spot", "us-east5")].line == 5
    for body, line, words in [
        (_GOOD.replace("source: s1}", "source: s1, note: x}"), 5, "Extra inputs are not permitted"),
        (_GOOD.replace("region: us-east5", "region: us-east5-a"), 5, "should match pattern"),
        (_GOOD.replace("model: spot", "model: preemptible"), 5, "Input should be"),
        (_GOOD.replace("source: s1}", "source: s2}"), 5, "unknown source 's2'"),
        (_GOOD.replace("read: 2026-12-01", "read: soon"), 2, "valid date"),
        (_GOOD + "  - {family: v6e, model: spot, region: us-east5, usd_per_chip_hour: 2, source: s1}\n", 6,
         "v6e/spot/us-east5 again (first at 5)"),
    ]:  # fmt: skip
        with pytest.raises(DataFileError) as err:
            cost.load_prices(_write(tmp_path, body))
        assert f"prices.yaml:{line}:" in str(err.value) and words in str(err.value), str(err.value)


# ---- chips -----------------------------------------------------------------------------------------


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


# ---- quotes and estimates -------------------------------------------------------------------------------


def test_estimate_spot_v6e_us_east5() -> None:
    est = cost.estimate("v6e-8", 4, "spot", "us-east5")
    assert (est.accelerator_type, est.chips, est.model, est.region) == ("v6e-8", 8, "spot", "us-east5")
    assert est.usd_per_chip_hour == 1.08 and est.hours == 4.0
    assert est.total_usd == pytest.approx(8 * 1.08 * 4) and est.usd_per_hour == pytest.approx(8.64)
    assert est.quote.exact and "github.com/skypilot-org/skypilot-catalog" in est.quote.source


def test_flex_start_is_bounded_by_on_demand_and_says_so() -> None:
    est = cost.estimate("v6e-8", 4, cost.DEFAULT_MODEL, "us-east5")
    assert est.quote.kind == cost.CEILING and est.total_usd == pytest.approx(86.4)
    assert est.quote.bound == "at most "
    assert est.quote.used == (
        "no flex-start row for v6e in us-east5; used instead: the on-demand row of us-east5 "
        "($2.700 per chip-hour) as the ceiling"
    )
    assert "Dynamic Workload Scheduler" in est.quote.why
    assert [e.model for e in cost.estimates("v6e-8", 4, "us-east5")] == list(cost.MODELS)


def test_a_generation_not_offered_in_the_region_uses_its_highest_row_elsewhere() -> None:
    quote = cost.quote("v5p-8", "on-demand", "asia-northeast1")
    assert quote.kind == cost.SUBSTITUTE and quote.bound == "about "
    assert quote.row is not None and quote.row.region == "us-south1"
    assert "not a price of asia-northeast1" in quote.used


def test_estimate_on_demand_and_core_counted_types() -> None:
    assert cost.estimate("v6e-8", 1, "on-demand", "us-east5").total_usd == pytest.approx(21.6)
    v5p = cost.estimate("v5p-8", 2, "on-demand", "us-central1")
    assert v5p.chips == 4 and v5p.total_usd == pytest.approx(4 * 4.20 * 2)
    assert cost.estimate("v5litepod-4", 10, "spot", "us-west4").total_usd == pytest.approx(4 * 0.4692 * 10)
    assert cost.estimate("v6e-8", 0, "on-demand", "us-east5").total_usd == 0
    assert cost.pricing_model_of("reserved") == "1y" and cost.pricing_model_of("spot") == "spot"


def test_the_exact_row_lookup_refuses_what_is_missing() -> None:
    with pytest.raises(BadInput, match="no 3y row for v6e in europe-west4; rows: on-demand, spot"):
        cost.price("v6e-8", "3y", "europe-west4")


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


def test_quote_kinds() -> None:
    exact = cost.quote("v6e-8", "spot", "us-east5")
    assert exact.kind == cost.EXACT and exact.usd_per_hour == pytest.approx(8.64) and not exact.used
    reserved = cost.quote("v6e-8", "reserved", "europe-west4")
    assert reserved.kind == cost.CEILING and "reserved is priced as a 1-year commitment" in reserved.missing
    assert cost.quote("v6e-8", "reserved", "us-east5").usd_per_hour == pytest.approx(8 * 1.89)
    mapping = cost.quote("v6e-8", "best-effort", "us-east5")
    assert mapping.kind == cost.UNPRICED and mapping.missing.startswith("no price mapping")
    with pytest.raises(BadInput, match="malformed region"):
        cost.quote("v6e-8", "spot", "us-east5-a")
    assert cost.quote_of(_qr(accelerator_type="")).kind == cost.UNPRICED  # never raises


def test_a_price_older_than_the_set_age_is_flagged_with_its_date() -> None:
    from bot.views.cost import quote_note

    quote = cost.quote("v6e-8", "spot", "us-east5")
    assert quote.as_of is not None
    assert not quote.stale(quote.as_of + timedelta(days=90), 90)
    late = quote.as_of + timedelta(days=120)
    assert quote.stale(late, 90)
    note = quote_note(quote, late, 90)
    assert f"read {quote.as_of.isoformat()}" in note and "120 days old (over PRICE_MAX_AGE_DAYS=90)" in note
    assert "days old" not in quote_note(quote, quote.as_of, 90)


# ---- burn -----------------------------------------------------------------------------------------------


def test_burn_from_qr_create_time() -> None:
    b = cost.burn(_qr(), T0 + timedelta(hours=2, minutes=30))
    assert b.usd_per_hour == pytest.approx(8 * 1.08)
    assert b.hours_so_far == pytest.approx(2.5)
    assert b.usd_so_far == pytest.approx(8.64 * 2.5)
    assert b.usd_until_termination == pytest.approx(8.64 * 1.5)
    assert b.start == T0 and "read 2026-12-02" in b.price_source


def test_burn_starts_at_the_earliest_node_create_time_when_known() -> None:
    qr = _qr(nodes=(_node(T0 + timedelta(minutes=30)),))
    b = cost.burn(qr, T0 + timedelta(hours=2, minutes=30))
    assert b.start == T0 + timedelta(minutes=30)
    assert b.hours_so_far == pytest.approx(2.0) and b.usd_so_far == pytest.approx(17.28)


def test_burn_counts_every_slice() -> None:
    qr = _qr(nodes=(_node(T0, "a"), _node(T0, "b")), provisioning_model="on-demand", termination_time=None)
    assert cost.burn(qr, T0 + timedelta(hours=1)).usd_per_hour == pytest.approx(2 * 8 * 2.70)


def test_burn_spot_has_no_termination() -> None:
    b = cost.burn(_qr(provisioning_model="spot", termination_time=None), T0 + timedelta(hours=3))
    assert b.usd_until_termination is None and b.usd_so_far == pytest.approx(8 * 1.08 * 3)


def test_burn_of_flex_start_is_the_labelled_ceiling() -> None:
    b = cost.burn(_qr(provisioning_model="flex-start"), T0 + timedelta(hours=1))
    assert b.usd_so_far == pytest.approx(21.6) and b.quote.bound == "at most "


def test_burn_clamps_times() -> None:
    before = cost.burn(_qr(), T0 - timedelta(minutes=5))
    assert before.hours_so_far == 0 and before.usd_so_far == 0
    after = cost.burn(_qr(), T0 + timedelta(hours=5))
    assert after.usd_until_termination == 0 and after.usd_so_far == pytest.approx(8.64 * 5)


@pytest.mark.parametrize(
    "qr",
    [
        _qr(state="WAITING_FOR_RESOURCES"),
        _qr(state="SUSPENDED"),
        _qr(create_time=None),
        _qr(accelerator_type=""),
        _qr(provisioning_model="best-effort"),
    ],
)
def test_burn_bad_input(qr: QueuedResourceInfo) -> None:
    with pytest.raises(BadInput):
        cost.burn(qr, T0 + timedelta(hours=1))


def test_burn_needs_an_aware_now() -> None:
    with pytest.raises(BadInput):
        cost.burn(_qr(), datetime(2026, 1, 1, 12, 0))


def _ctx(*qrs: QueuedResourceInfo) -> Any:
    from types import SimpleNamespace

    from ops.tpu.model import ZoneListing

    now = T0 + timedelta(minutes=90)
    services = SimpleNamespace(
        now=lambda: now,
        tpu=SimpleNamespace(list_queued_resources=lambda zones: ZoneListing(qrs)),
        settings=SimpleNamespace(tpu_zones=["us-east5-a"], price_max_age_days=90),
    )
    return SimpleNamespace(services=services, fleet=None, deployment="default")


def test_live_burn_has_a_total_and_bounds_what_has_no_row() -> None:
    from bot.handlers.cost import _burn_text

    text = _burn_text(
        _ctx(
            _qr(name="a", provisioning_model="spot"),
            _qr(name="b", provisioning_model="on-demand", termination_time=None),
            _qr(name="c", provisioning_model="flex-start"),
            _qr(name="d", provisioning_model="best-effort"),
        )
    )
    assert "`a` (v6e-8, spot, us-east5-a): $12.96 over 1h 30m ($8.64/h)" in text
    assert "`c` (v6e-8, flex-start, us-east5-a): at most $32.40 over 1h 30m (at most $21.60/h)" in text
    assert "no flex-start row for v6e in us-east5" in text
    assert "*Total* at most $77.76 so far, at most $51.84/h now (3 priced; 1 without any price" in text
    assert "read 2026-12-02" in text


def _spend_reply(*qrs: QueuedResourceInfo) -> str:
    from bot.handlers.cost import fleet_spend

    reply = fleet_spend(_ctx(*qrs), T0, "today (UTC)")
    return "\n".join(str(b) for b in reply.blocks)


def test_spend_of_flex_start_is_a_labelled_total_never_blank() -> None:
    text = _spend_reply(_qr(name="c", provisioning_model="flex-start"))
    assert "$0.00" not in text and "unknown" not in text
    assert "*default*: *at most $32.40*" in text and "*Total* at most $32.40 since" in text
    assert "no flex-start row for v6e in us-east5" in text and "read 2026-12-02" in text


def test_spend_with_an_unpriceable_resource_counts_the_others_and_says_so() -> None:
    text = _spend_reply(
        _qr(name="a", provisioning_model="spot"), _qr(name="d", provisioning_model="best-effort")
    )
    assert "*default*: *$12.96* (priced resources only)" in text
    assert "*Total* $12.96 since" in text and "(priced resources only" in text
    assert "unknown (not priced)" in _spend_reply(_qr(name="d", provisioning_model="best-effort"))


def test_the_plan_and_the_burn_take_the_same_decision_from_quote() -> None:
    from ops.cost.spend import plan_spend

    flex = _qr(provisioning_model="flex-start")
    plan = plan_spend("v6e-8", "flex-start", ["us-east5-a"], 1, 1.0)
    assert plan.ceiling and plan.usd_per_hour["us-east5-a"] == cost.quote_of(flex).usd_per_hour
    assert plan.missing == [cost.quote_of(flex).used]
    assert cost.burn(flex, T0 + timedelta(hours=1)).usd_per_hour == cost.quote_of(flex).usd_per_hour


def test_deployment_spend_counts_every_priced_resource_and_names_the_rest() -> None:
    from ops.cost.spend import deployment_spend, midnight
    from ops.errors import OpsError
    from ops.tpu.model import ZoneListing

    now = T0 + timedelta(minutes=90)
    listing = ZoneListing(
        (
            _qr(name="a", provisioning_model="spot"),
            _qr(name="c", provisioning_model="flex-start"),
            _qr(name="d", provisioning_model="best-effort"),
            _qr(name="w", state="WAITING_FOR_RESOURCES"),
        ),
        {"us-east5-b": OpsError("503")},
    )
    spend = deployment_spend(listing, now, midnight(now))
    assert [r.qr.name for r in spend.resources] == ["a", "c", "d"] and spend.zones_failed == ["us-east5-b"]
    assert spend.usd == pytest.approx((8.64 + 21.6) * 1.5) and spend.bounded
    (unpriced,) = spend.unpriced
    assert unpriced.qr.name == "d" and unpriced.why.startswith("no price mapping")
    failed = deployment_spend(OpsError("quota"), now, midnight(now))
    assert failed.error is not None and not failed.resources
