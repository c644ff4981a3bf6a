"""Pure logic of the zone plan: the order a capacity search tries zones in, what the zone data says will
refuse, the quota family of a type; and the /tpu list, /tpu status and preview texts built from them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from bot.shared.zone_plan import ZoneFacts, order_zones, quota_family
from bot.views.cost import create_spend_lines, spend_lines
from bot.views.metrics import metrics_lines
from bot.views.tpu import listing_blocks
from ops.cost.spend import plan_spend
from ops.store.state import ZoneFailure
from ops.tpu.model import QueuedResourceInfo, ZoneListing
from ops.vllm.metrics import MetricsSummary

NOW = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)
PRICES = {"asia-northeast1-b": 25.92, "europe-west4-a": 23.76, "us-east5-a": 21.60, "us-central2-b": None}


def test_zones_are_tried_cheapest_first_not_in_listing_order() -> None:
    zones = ["asia-northeast1-b", "europe-west4-a", "us-east5-a"]  # locations.list order
    assert order_zones(zones, [], PRICES, set()) == ["us-east5-a", "europe-west4-a", "asia-northeast1-b"]


def test_equal_prices_follow_tpu_zones_then_name_and_unpriced_and_blocked_go_last() -> None:
    prices = {
        "b-zone1-a": 10.0,
        "a-zone1-a": 10.0,
        "c-zone1-a": 10.0,
        "us-central2-b": None,
        "x-zone1-a": 1.0,
    }
    zones = list(prices)
    ordered = order_zones(zones, ["c-zone1-a", "b-zone1-a"], prices, {"x-zone1-a"})
    assert ordered == ["c-zone1-a", "b-zone1-a", "a-zone1-a", "us-central2-b", "x-zone1-a"]


def test_blockers_name_each_reason_from_the_zone_data() -> None:
    failure = ZoneFailure(
        "z-b", "v6e-8", "flex-start", "flex-start not offered: FLEX_START is not offered", NOW
    )
    facts = ZoneFacts(
        offered={"z-a": True, "z-b": True, "z-c": False, "z-d": None},
        preemptible={"z-a": 64, "z-b": 0, "z-d": None},
        remembered={"z-b": failure},
        quota_error=None,
    )
    assert facts.blockers("z-a", "v6e-8", "flex-start") == []
    reasons = facts.blockers("z-b", "v6e-8", "flex-start")
    assert len(reasons) == 2 and "preemptible v6e quota 0" in reasons[0] and "2026-12-01 02:00" in reasons[1]
    assert facts.blockers("z-b", "v6e-8", "flex-start", remembered=False) == [reasons[0]]
    assert facts.blockers("z-b", "v6e-8", "on-demand") == [reasons[1]]  # no preemptible quota needed
    assert facts.blockers("z-c", "v6e-8", "spot") == ["does not offer v6e-8 (acceleratorTypes.list)"]
    assert facts.blockers("z-d", "v6e-8", "spot") == []  # unknown is not a refusal
    # the one judgement /tpu zones and /tpu find's skipped zones show, in the same words
    assert facts.fit("z-a", "v6e-8", "flex-start") == "✅ fits"
    assert facts.fit("z-b", "v6e-8", "flex-start") == "❌ " + "; ".join(reasons)


def test_quota_family() -> None:
    assert [quota_family(t) for t in ("v6e-8", "v6e", "v5litepod-4", "v5litepod", "v5p-8", "v7x-8")] == [
        "v6e",
        "v6e",
        "v5e",
        "v5e",
        "v5p",
        "v7x",
    ]


def test_single_create_preview_does_not_use_the_search_s_words() -> None:
    plan = plan_spend("v6e-8", "flex-start", ["us-east5-a"], 1, 4.0)
    text = "\n".join(create_spend_lines(plan, "flex-start"))
    assert "*At most" not in text and "the one kept" not in text and "worst case" not in text
    assert "*Spend* up to $" in text and "4 h max run" in text
    search = "\n".join(
        spend_lines(
            plan_spend("v6e-8", "flex-start", ["us-east5-a", "asia-northeast1-b"], 2, 4.0), "flex-start"
        )
    )
    assert "*At most 2 requests at once*" in search and "the one kept" in search
    spot = "\n".join(create_spend_lines(plan_spend("v6e-8", "spot", ["us-east5-a"], 1, None), "spot"))
    assert "no fixed end" in spot and "until deleted" in spot


def _qr(name: str, zone: str) -> QueuedResourceInfo:
    return QueuedResourceInfo(
        name=name, zone=zone, state="ACTIVE", state_initiator="USER", provisioning_model="flex-start",
        accelerator_type="v6e-8", runtime_version="", create_time=NOW - timedelta(hours=1), node_ids=(),
        nodes=(), termination_time=None, valid_until=None, max_run_duration=None, error=None, labels={},
    )  # fmt: skip


def test_the_primary_is_listed_first_and_marked() -> None:
    listing = ZoneListing(
        resources=[
            _qr("gemma4-old", "asia-northeast1-b"),
            _qr("gemma4-b", "us-east5-a"),
            _qr("gemma4-qr", "us-east5-a"),
        ],
        errors={},
    )
    texts = [b["text"]["text"] for b in listing_blocks(listing, ["us-east5-a"], NOW, "gemma4-qr")]
    assert texts[0].startswith("*gemma4-qr* (primary) · `us-east5-a`")
    assert [t.split("*")[1] for t in texts] == ["gemma4-qr", "gemma4-old", "gemma4-b"]  # the rest as listed
    assert "(primary)" not in "".join(texts[1:])


def test_vllm_preemptions_say_they_are_vllm_s() -> None:
    required = (
        "engines",
        "running",
        "waiting",
        "kv_cache_usage",
        "prefix_cache_queries",
        "prefix_cache_hits",
    )
    values: dict[str, object] = {name: None for name in required} | {"engines": (), "models": ()}
    more = {
        "prefix_cache_hit_rate": None,
        "preemptions": 2.0,
        "prompt_tokens": None,
        "generation_tokens": None,
    }
    summary = MetricsSummary(**values, **more)  # type: ignore[arg-type]
    line = metrics_lines(summary)[0]
    assert "preempted by vLLM 2" in line and " preemptions 2" not in line
