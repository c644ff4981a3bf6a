"""What TPUs cost: before a request is sent (the price per hour in each zone, how many requests may run
at once, and the worst case), and what the running ones spent since a moment (`/tpu cost --today`,
`/fleet`), all priced by `ops.cost.pricing.quote`.

Cloud TPU bills while a node is READY (https://cloud.google.com/tpu/pricing); a request still waiting for
capacity costs nothing. A capacity search keeps `parallel` requests outstanding; if several zones turn
ACTIVE together, each bills until it is deleted. The worst case assumes every outstanding request became
ACTIVE and ran its whole max run duration (flex-start ends there; spot and on-demand have no end, so their
worst case is per hour).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from ops.cost import pricing as cost
from ops.errors import BadInput, OpsError
from ops.tpu.model import QueuedResourceInfo, ZoneListing, region_of

__all__ = [
    "DeploymentSpend",
    "ResourceSpend",
    "SpendPlan",
    "deployment_spend",
    "midnight",
    "plan_spend",
    "spend_since",
    "unreadable",
]


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
        ceiling: True when the model has no row of its own in some zone's region and `usd_per_hour` holds
            the on-demand price of the same type and region as an upper bound (Google prices flex-start and
            spot below on-demand: https://cloud.google.com/tpu/pricing), so the worst case is never
            understated.
        quotes: zone -> the price decision (`ops.cost.pricing.quote`) behind `usd_per_hour`.
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
    quotes: dict[str, cost.Quote] = field(default_factory=dict)

    @property
    def missing(self) -> list[str]:
        """What stands in for each missing row, once per distinct text (see `ops.cost.pricing.Quote.used`)."""
        return list(dict.fromkeys(q.used for q in self.quotes.values() if q.used))


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
        A SpendPlan (prices from `ops.cost.pricing.quote`: exact, else the on-demand price as a ceiling, else
        a
        labelled substitute; a zone that cannot be priced at all maps to None).
    """
    prices: dict[str, float | None] = {}
    quotes: dict[str, cost.Quote] = {}
    for zone in zones:
        try:
            rate = cost.quote(accelerator_type, provisioning_model, region_of(zone))
        except BadInput as exc:
            rate = cost.Quote(cost.UNPRICED, provisioning_model, "", "", 0, None, missing=exc.message)
        prices[zone] = rate.usd_per_hour
        quotes[zone] = rate
    ceiling = any(q.kind in (cost.CEILING, cost.SUBSTITUTE) for q in quotes.values())
    source = "; ".join(dict.fromkeys(q.source for q in quotes.values() if q.source))
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
        quotes=quotes,
    )


def midnight(now: datetime) -> datetime:
    """00:00 UTC of `now`'s day (`now` timezone-aware UTC)."""
    return now.replace(hour=0, minute=0, second=0, microsecond=0)


def spend_since(qr: QueuedResourceInfo, now: datetime, since: datetime) -> tuple[float, float, cost.Quote]:
    """(USD per hour, USD accrued from `since` to `now`, the price decision) of an ACTIVE queued resource.

    Uses `ops.cost.pricing.burn` (its billing-start approximation and its quote: a missing row gives the
    labelled
    ceiling or substitute) over the part of the window the QR has been running.

    Raises:
        BadInput: as `ops.cost.pricing.burn` (not ACTIVE, not priced at all).
    """
    spend = cost.burn(qr, now)
    start = max(spend.start or since, since)
    hours = max(0.0, (now - start).total_seconds() / 3600.0)
    return spend.usd_per_hour, spend.usd_per_hour * hours, spend.quote


def unreadable(listing: ZoneListing) -> OpsError | None:
    """The first zone's error when every zone failed (nothing could be listed), else None."""
    if listing.errors and not listing.resources:
        return next(iter(listing.errors.values()))
    return None


@dataclass(frozen=True)
class ResourceSpend:
    """One ACTIVE queued resource's spend over a window: `usd_per_hour` and `usd` (USD; "at most" or
    "about" when `quote` is not EXACT, see `ops.cost.pricing.Quote.bound`), or None with `why` it is not
    priced."""

    qr: QueuedResourceInfo
    usd_per_hour: float | None
    usd: float | None
    why: str = ""
    quote: cost.Quote | None = None


@dataclass(frozen=True)
class DeploymentSpend:
    """One deployment's spend from `since` to now.

    Attributes:
        resources: its ACTIVE queued resources, priced or not.
        zones_failed: zones that did not answer (their resources are not counted).
        error: what stopped the listing altogether (then `resources` is empty).
    """

    resources: list[ResourceSpend] = field(default_factory=list)
    zones_failed: list[str] = field(default_factory=list)
    error: OpsError | None = None

    @property
    def usd(self) -> float:
        """USD of the priced resources."""
        return sum(r.usd or 0.0 for r in self.resources)

    @property
    def usd_per_hour(self) -> float:
        """USD per hour of the priced resources."""
        return sum(r.usd_per_hour or 0.0 for r in self.resources)

    @property
    def unpriced(self) -> list[ResourceSpend]:
        """The resources without any price."""
        return [r for r in self.resources if r.usd is None]

    @property
    def bounded(self) -> bool:
        """True when some priced resource's figure is a ceiling or substitute, not its model's own price."""
        return any(r.quote is not None and not r.quote.exact for r in self.resources if r.usd is not None)


def deployment_spend(listing: ZoneListing | OpsError, now: datetime, since: datetime) -> DeploymentSpend:
    """The spend of a deployment's listing from `since` to `now` (see `spend_since`); never raises.

    Queued resources deleted before now are no longer listed by the TPU API, so they are not counted.
    """
    failed = listing if isinstance(listing, OpsError) else unreadable(listing)
    if failed is not None or isinstance(listing, OpsError):
        return DeploymentSpend(error=failed)
    resources: list[ResourceSpend] = []
    for qr in (qr for qr in listing.resources if qr.state == "ACTIVE"):
        try:
            per_hour, usd, rate = spend_since(qr, now, since)
        except BadInput as exc:
            resources.append(ResourceSpend(qr, None, None, exc.message))
            continue
        resources.append(ResourceSpend(qr, per_hour, usd, rate.used, rate))
    return DeploymentSpend(resources, list(listing.errors))
