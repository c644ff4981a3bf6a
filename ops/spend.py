"""What a request for TPUs can cost, before it is sent: the price per hour in each zone, how many requests
may run at once, and the worst case.

Cloud TPU bills while a node is READY (https://cloud.google.com/tpu/pricing); a request still waiting for
capacity costs nothing. A capacity search keeps `parallel` requests outstanding; if several zones turn
ACTIVE together, each bills until it is deleted. The worst case assumes every outstanding request became
ACTIVE and ran its whole max run duration (flex-start ends there; spot and on-demand have no end, so their
worst case is per hour).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ops import cost
from ops.errors import BadInput

__all__ = ["SpendPlan", "plan_spend"]


@dataclass(frozen=True)
class SpendPlan:
    """The money side of a create or a search.

    Attributes:
        usd_per_hour: zone -> price of one accelerator (USD per hour), None where no price is known.
        at_once: the most requests outstanding at once (min(parallel, zones)).
        max_usd_per_hour: the highest known zone price (None if no zone has one).
        run_hours: the max run duration in hours (flex-start), None for no end.
        winner_usd: one accelerator at the highest price for `run_hours` (None without both).
        worst_case_usd: `at_once` accelerators at the highest price for `run_hours` (None without both).
        worst_case_usd_per_hour: `at_once` x the highest price, USD per hour.
        source: where the prices come from ("" if none).
        ceiling: True when the model has no sourced price and `usd_per_hour` holds the on-demand price of
            the same type and region as an upper bound (Google prices flex-start and spot below on-demand:
            https://cloud.google.com/tpu/pricing), so the worst case is never understated.
    """

    usd_per_hour: dict[str, float | None]
    at_once: int
    max_usd_per_hour: float | None
    run_hours: float | None
    winner_usd: float | None
    worst_case_usd: float | None
    worst_case_usd_per_hour: float | None
    source: str
    ceiling: bool = False


def plan_spend(
    accelerator_type: str,
    provisioning_model: str,
    zones: Sequence[str],
    parallel: int,
    run_hours: float | None,
) -> SpendPlan:
    """Price a create (one zone, parallel 1) or a search.

    Args:
        accelerator_type: e.g. "v6e-8".
        provisioning_model: "flex-start" | "spot" | "on-demand" | "reserved".
        zones: zones that will be tried.
        parallel: requests outstanding at once (>= 1).
        run_hours: max run duration in hours (flex-start), None when the resource has no fixed end.

    Returns:
        A SpendPlan (prices from `ops.cost.estimate`; where the model has no sourced price, the on-demand
        price as a ceiling; a zone whose region has neither maps to None).
    """
    prices: dict[str, float | None] = {}
    source = ""
    ceiling = False
    for zone in zones:
        estimate = None
        for model in (provisioning_model, "on-demand"):
            try:
                estimate = cost.estimate(accelerator_type, 1.0, model, cost.region_of(zone))
            except BadInput:
                continue
            ceiling = ceiling or model != provisioning_model
            break
        prices[zone] = estimate.total_usd if estimate is not None else None
        if estimate is not None:
            source = source or f"{estimate.source}, {estimate.as_of}"
    known = [p for p in prices.values() if p is not None]
    top = max(known) if known else None
    at_once = max(1, min(parallel, len(zones) or 1))
    return SpendPlan(
        usd_per_hour=prices,
        at_once=at_once,
        max_usd_per_hour=top,
        run_hours=run_hours,
        winner_usd=top * run_hours if top is not None and run_hours is not None else None,
        worst_case_usd=top * run_hours * at_once if top is not None and run_hours is not None else None,
        worst_case_usd_per_hour=top * at_once if top is not None else None,
        source=source,
        ceiling=ceiling,
    )
