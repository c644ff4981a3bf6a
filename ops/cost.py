"""TPU cost estimates: a sourced price table (USD per chip-hour), chip counting and live burn.

Every price row carries a public source and the date that source was read. Nothing is extrapolated: a
(generation, model, region) combination without a sourced figure is *absent*, and looking it up raises
`BadInput` naming what is known instead of guessing. The figures, their source and what is deliberately
left out are described in docs/google-apis.md §2; compare them with the official page before relying on
them: https://cloud.google.com/tpu/pricing

Units: prices are USD per chip-hour; durations are hours (float); totals are USD.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime

from ops.errors import BadInput
from ops.linear import linear
from ops.tpu_model import QueuedResourceInfo

__all__ = [
    "DEFAULT_MODEL",
    "MODELS",
    "PRICES",
    "Burn",
    "CostEstimate",
    "Price",
    "Quote",
    "burn",
    "chips",
    "estimate",
    "family_of",
    "price",
    "pricing_model_of",
    "quote",
    "quote_of",
    "region_of",
    "sourced_estimates",
]

PRICING_DOC = "https://cloud.google.com/tpu/pricing"

#: Pricing models the table knows about. "1y"/"3y" are committed-use (CUD) chip-hour rates.
MODELS: tuple[str, ...] = ("flex-start", "spot", "on-demand", "1y", "3y")

#: The pricing model `/tpu create` uses when none is given, and so `/tpu cost`'s default.
DEFAULT_MODEL = "flex-start"

# The SkyPilot catalog at a pinned commit: machine-derived from the GCP Billing Catalog (spot prices are
# point-in-time). The date is when this commit was read, as the catalog rows carry no date of their own.
_SRC_A = (
    "SkyPilot catalog vms.csv @ 017e2502fb63c7a28757acd94002b2d6099d3e3d "
    "(https://github.com/skypilot-org/skypilot-catalog/blob/017e2502fb63c7a28757acd94002b2d6099d3e3d/"
    "catalogs/v7/gcp/vms.csv)"
)
_ASOF_A = "2026-11-29"


@dataclass(frozen=True)
class Price:
    """One row of the price table.

    Attributes:
        family: TPU generation key: "v6e", "v5e" (accelerator types v5litepod-N), "v5p", "v4".
        model: one of `MODELS`.
        region: GCP region, e.g. "us-east5".
        usd_per_chip_hour: the rate in USD per chip-hour.
        source: where the figure comes from (URL or description).
        as_of: ISO date the source describes.
    """

    family: str
    model: str
    region: str
    usd_per_chip_hour: float
    source: str
    as_of: str


def _rows(family: str, model: str, rate: float, regions: Iterable[str], src: str, as_of: str) -> list[Price]:
    return [Price(family, model, region, rate, src, as_of) for region in regions]


# fmt: off
_TABLE: list[Price] = [
    # ---- v6e (Trillium), Source A ----------------------------------------------------------------------
    *_rows("v6e", "on-demand", 2.70, ["us-central1", "us-east1", "us-east4", "us-east5", "us-south1",
                                      "us-west1"], _SRC_A, _ASOF_A),
    *_rows("v6e", "on-demand", 2.97, ["europe-west4", "asia-southeast1"], _SRC_A, _ASOF_A),
    *_rows("v6e", "on-demand", 3.24, ["asia-northeast1", "asia-south1"], _SRC_A, _ASOF_A),
    *_rows("v6e", "spot", 1.08, ["us-east5"], _SRC_A, _ASOF_A),
    *_rows("v6e", "spot", 0.648, ["us-central1", "us-east1", "us-west1"], _SRC_A, _ASOF_A),
    *_rows("v6e", "spot", 0.858, ["us-east4"], _SRC_A, _ASOF_A),
    *_rows("v6e", "spot", 1.89, ["us-south1"], _SRC_A, _ASOF_A),
    *_rows("v6e", "spot", 0.713, ["europe-west4"], _SRC_A, _ASOF_A),
    *_rows("v6e", "spot", 0.730, ["asia-southeast1"], _SRC_A, _ASOF_A),
    *_rows("v6e", "spot", 1.077, ["asia-northeast1"], _SRC_A, _ASOF_A),
    *_rows("v6e", "spot", 2.27, ["asia-south1"], _SRC_A, _ASOF_A),
    # ---- v5e (v5litepod), Source A ---------------------------------------------------------------------
    *_rows("v5e", "on-demand", 1.20, ["us-central1", "us-east1", "us-east5", "us-west1", "us-west4"],
           _SRC_A, _ASOF_A),
    *_rows("v5e", "on-demand", 1.416, ["us-south1"], _SRC_A, _ASOF_A),
    *_rows("v5e", "on-demand", 1.321, ["europe-west1", "europe-north1"], _SRC_A, _ASOF_A),
    *_rows("v5e", "on-demand", 1.389, ["asia-east1"], _SRC_A, _ASOF_A),
    *_rows("v5e", "on-demand", 1.56, ["europe-west4", "asia-southeast1"], _SRC_A, _ASOF_A),
    *_rows("v5e", "spot", 0.213, ["us-central1", "us-east1", "us-west1"], _SRC_A, _ASOF_A),
    *_rows("v5e", "spot", 0.60, ["us-east5"], _SRC_A, _ASOF_A),
    *_rows("v5e", "spot", 0.469, ["us-west4"], _SRC_A, _ASOF_A),
    *_rows("v5e", "spot", 0.443, ["europe-west4"], _SRC_A, _ASOF_A),
    *_rows("v5e", "spot", 0.566, ["us-south1"], _SRC_A, _ASOF_A),
    *_rows("v5e", "spot", 0.661, ["europe-west1"], _SRC_A, _ASOF_A),
    *_rows("v5e", "spot", 0.695, ["asia-east1"], _SRC_A, _ASOF_A),
    *_rows("v5e", "spot", 0.78, ["asia-southeast1"], _SRC_A, _ASOF_A),
    # ---- v5p, Source A -----------------------------------------------------------------------------------
    *_rows("v5p", "on-demand", 4.20, ["us-central1", "us-east1", "us-east5"], _SRC_A, _ASOF_A),
    *_rows("v5p", "on-demand", 4.2525, ["europe-west4"], _SRC_A, _ASOF_A),
    *_rows("v5p", "on-demand", 4.459, ["europe-west1"], _SRC_A, _ASOF_A),
    *_rows("v5p", "on-demand", 4.779, ["us-south1"], _SRC_A, _ASOF_A),
    *_rows("v5p", "spot", 1.68, ["us-central1", "us-east1"], _SRC_A, _ASOF_A),
    *_rows("v5p", "spot", 1.56, ["us-east5"], _SRC_A, _ASOF_A),
    *_rows("v5p", "spot", 1.348, ["europe-west4"], _SRC_A, _ASOF_A),
    *_rows("v5p", "spot", 1.784, ["europe-west1"], _SRC_A, _ASOF_A),
    *_rows("v5p", "spot", 2.395, ["us-south1"], _SRC_A, _ASOF_A),
    # ---- v4, Source A (offered in us-central2-b only) ----------------------------------------------------
    *_rows("v4", "on-demand", 3.22, ["us-central2"], _SRC_A, _ASOF_A),
    *_rows("v4", "spot", 0.9215, ["us-central2"], _SRC_A, _ASOF_A),
    # Deliberately absent, for want of a public source with a date (docs/google-apis.md §2): flex-start,
    # every 1- and 3-year commitment, and v7 (Ironwood). Asking for them is refused, never guessed.
]
# fmt: on

#: (family, model, region) -> Price. Read-only by convention.
PRICES: dict[tuple[str, str, str], Price] = {(p.family, p.model, p.region): p for p in _TABLE}
if len(PRICES) != len(_TABLE):  # pragma: no cover - guards edits of the table
    raise RuntimeError("duplicate rows in the TPU price table")

# accelerator-type prefix -> (price-table family, accelerator-type units per chip).
# Chip counts (docs/google-apis.md §2): v4-N and v5p-N count TensorCores (2 per chip); v5litepod-N and
# v6e-N count chips. Doc: https://cloud.google.com/tpu/docs/system-architecture-tpu-vm
_FAMILIES: dict[str, tuple[str, int]] = {
    "v4": ("v4", 2),
    "v5p": ("v5p", 2),
    "v5litepod": ("v5e", 1),
    "v6e": ("v6e", 1),
}
_ACCEL = linear(r"^(?P<prefix>[a-z0-9]+)-(?P<n>[0-9]+)$")
_ZONE = linear(r"^(?P<region>[a-z]+-[a-z]+[0-9]+)-[a-z]$")
_REGION = linear(r"^[a-z]+-[a-z]+[0-9]+$")

# QueuedResourceInfo.provisioning_model -> price model. "reserved" is priced as a 1-year commitment.
_QR_MODELS = {"flex-start": "flex-start", "spot": "spot", "on-demand": "on-demand", "reserved": "1y"}


@dataclass(frozen=True)
class CostEstimate:
    """What running an accelerator for some hours costs under one pricing model.

    Attributes:
        accelerator_type: e.g. "v6e-8".
        chips: chips in that type (see `chips`).
        model: pricing model, one of `MODELS`.
        region: GCP region, e.g. "us-east5".
        usd_per_chip_hour: rate in USD per chip-hour.
        hours: duration in hours.
        total_usd: chips * usd_per_chip_hour * hours, in USD.
        source: where the rate comes from.
        as_of: ISO date the source describes.
    """

    accelerator_type: str
    chips: int
    model: str
    region: str
    usd_per_chip_hour: float
    hours: float
    total_usd: float
    source: str
    as_of: str

    @property
    def usd_per_hour(self) -> float:
        """USD per hour for the whole accelerator (chips * usd_per_chip_hour)."""
        return self.chips * self.usd_per_chip_hour


@dataclass(frozen=True)
class Burn:
    """Live spend of an ACTIVE queued resource.

    Attributes:
        usd_so_far: USD accrued from `start` to now.
        usd_until_termination: USD still to accrue from now until `termination_time` (0 once past), or None
            when no termination time is known (on-demand, spot, reserved without an end).
        usd_per_hour: USD per hour for all the QR's chips.
        hours_so_far: hours from `start` to now (0 if `start` is in the future).
        price_source: "<source> (as of <date>)" of the rate used.
        start: the instant billing is assumed to have started (see `burn`).
    """

    usd_so_far: float
    usd_until_termination: float | None
    usd_per_hour: float
    hours_so_far: float
    price_source: str
    start: datetime | None = None


def family_of(accelerator_type: str) -> str:
    """The price-table family of an accelerator type.

    Args:
        accelerator_type: e.g. "v6e-8", "v5litepod-4", "v5p-8", "v4-8".

    Returns:
        "v6e", "v5e", "v5p" or "v4".

    Raises:
        BadInput: the type is malformed or its family is not one of v4, v5p, v5litepod, v6e.
    """
    return _parse(accelerator_type)[0]


def _parse(accelerator_type: str) -> tuple[str, int]:
    text = accelerator_type.strip().lower() if isinstance(accelerator_type, str) else ""
    match = _ACCEL.match(text)
    known = ", ".join(f"{p}-N" for p in _FAMILIES)
    if not match:
        raise BadInput(
            f"malformed TPU accelerator type {accelerator_type!r}",
            f"expected one of {known}, e.g. v6e-8",
        )
    prefix, n = match.group("prefix"), int(match.group("n"))
    if prefix not in _FAMILIES:
        raise BadInput(
            f"unknown TPU accelerator family {prefix!r} in {accelerator_type!r}", f"known: {known}"
        )
    family, per_chip = _FAMILIES[prefix]
    if n <= 0 or n % per_chip:
        unit = "TensorCores (2 per chip), so it must be even" if per_chip == 2 else "chips"
        raise BadInput(
            f"invalid TPU accelerator type {accelerator_type!r}", f"the {prefix} suffix counts {unit}"
        )
    return family, n // per_chip


def chips(accelerator_type: str) -> int:
    """Number of TPU chips in an accelerator type.

    v5litepod-N and v6e-N name N chips; v4-N and v5p-N name N TensorCores, 2 per chip, so v4-8 and v5p-8 are
    4 chips (https://cloud.google.com/tpu/docs/system-architecture-tpu-vm).

    Args:
        accelerator_type: e.g. "v6e-8" (case and surrounding spaces are ignored).

    Returns:
        The chip count, >= 1.

    Raises:
        BadInput: malformed type, unknown family (anything but v4, v5p, v5litepod, v6e), a zero suffix, or an
            odd TensorCore count for v4/v5p.
    """
    return _parse(accelerator_type)[1]


def region_of(zone: str) -> str:
    """The region of a zone: "us-east5-a" -> "us-east5".

    Args:
        zone: a GCP zone name.

    Returns:
        The region name.

    Raises:
        BadInput: `zone` is not of the form <area>-<location><digits>-<letter>.
    """
    match = _ZONE.match(zone.strip()) if isinstance(zone, str) else None
    if not match:
        raise BadInput(f"malformed zone {zone!r}", "expected e.g. us-east5-a")
    return match.group("region")


def _known(family: str, region: str) -> list[str]:
    return sorted(m for m in MODELS if (family, m, region) in PRICES)


def price(accelerator_type: str, model: str, region: str) -> Price:
    """Look up the sourced rate for an accelerator type under a pricing model in a region.

    Args:
        accelerator_type: e.g. "v6e-8" (only the family matters for the rate).
        model: one of `MODELS`: "flex-start", "spot", "on-demand", "1y", "3y".
        region: GCP region, e.g. "us-east5" (not a zone; see `region_of`).

    Returns:
        The `Price` row (USD per chip-hour, source, as-of date).

    Raises:
        BadInput: unknown type family or model, malformed region, or no sourced price for that combination;
            the message lists the models known for that family and region (or the regions known for that
            family and model). Sources: docs/google-apis.md §2; official page
            https://cloud.google.com/tpu/pricing.
    """
    family = family_of(accelerator_type)
    if model not in MODELS:
        raise BadInput(f"unknown pricing model {model!r}", f"known: {', '.join(MODELS)}")
    if not isinstance(region, str) or not _REGION.match(region):
        hint = "pass a region such as us-east5"
        if isinstance(region, str) and _ZONE.match(region):
            hint = f"{region!r} is a zone; pass its region {region_of(region)!r}"
        raise BadInput(f"malformed region {region!r}", hint)
    row = PRICES.get((family, model, region))
    if row is not None:
        return row
    known = _known(family, region)
    regions = sorted(r for (f, m, r) in PRICES if f == family and m == model)
    where = (
        f"{model} for {family} is sourced only in: {', '.join(regions)}"
        if regions
        else f"no sourced {model} price for {family} in any region"
    )
    if known:
        hint = f"{where}; unsourced figures are left out, see {PRICING_DOC}"
        raise BadInput(f"no {model} price for {family} in {region}; known: {', '.join(known)}", hint)
    family_regions = ", ".join(sorted({r for (f, _, r) in PRICES if f == family}))
    raise BadInput(
        f"no price for {family} in {region}; {family} is priced in: {family_regions}", f"see {PRICING_DOC}"
    )


def estimate(accelerator_type: str, hours: float, model: str, region: str) -> CostEstimate:
    """Estimate the cost of running an accelerator for `hours` under a pricing model.

    For "1y"/"3y" this is the committed chip-hour rate times `hours`; a real commitment is billed for its
    whole term whether used or not.

    Args:
        accelerator_type: e.g. "v6e-8".
        hours: duration in hours, finite and >= 0.
        model: one of `MODELS`.
        region: GCP region, e.g. "us-east5".

    Returns:
        A `CostEstimate` with total_usd = chips * usd_per_chip_hour * hours (USD).

    Raises:
        BadInput: invalid hours, or anything `price` / `chips` raise (e.g. "no flex-start price for v6e in
            europe-west4; known: on-demand, spot").
    """
    if isinstance(hours, bool) or not isinstance(hours, int | float) or not math.isfinite(hours) or hours < 0:
        raise BadInput(f"invalid duration {hours!r} hours", "give a finite number of hours >= 0")
    n = chips(accelerator_type)
    row = price(accelerator_type, model, region)
    return CostEstimate(
        accelerator_type=accelerator_type.strip().lower(),
        chips=n,
        model=model,
        region=region,
        usd_per_chip_hour=row.usd_per_chip_hour,
        hours=float(hours),
        total_usd=n * row.usd_per_chip_hour * float(hours),
        source=row.source,
        as_of=row.as_of,
    )


def pricing_model_of(provisioning_model: str) -> str:
    """The price-table model of a queued resource's provisioning model ("reserved" is priced as "1y");
    a provisioning model without a mapping (e.g. "best-effort") is returned as is, and `price` refuses it."""
    return _QR_MODELS.get(provisioning_model, provisioning_model)


def sourced_estimates(accelerator_type: str, hours: float, region: str) -> list[CostEstimate]:
    """An estimate for every pricing model with a sourced price for this type in this region, in `MODELS`
    order (what to show when the model asked for has none).

    Raises:
        BadInput: what `estimate` raises for the type, hours or region (not for a missing model).
    """
    family = family_of(accelerator_type)
    return [estimate(accelerator_type, hours, m, region) for m in MODELS if (family, m, region) in PRICES]


EXACT, CEILING, UNPRICED = "exact", "ceiling", "unpriced"

#: What a ceiling is bounded by (Google prices flex-start and spot below on-demand:
#: https://cloud.google.com/tpu/pricing), so a ceiling never understates the spend.
CEILING_MODEL = "on-demand"


@dataclass(frozen=True)
class Quote:
    """The hourly price of one accelerator under a provisioning model in a region: the one place that
    decides between an exact price, a labelled ceiling and "not priced".

    Attributes:
        kind: EXACT (a sourced price of that model), CEILING (no sourced price of that model; the
            on-demand price of the same type and region bounds it) or UNPRICED (neither is sourced).
        usd_per_hour: USD per hour for the accelerator's chips (None when UNPRICED).
        why: why there is no exact price ("" when EXACT), e.g. "no flex-start price for v6e in us-east5;
            known: on-demand, spot"; hint: what to try (may be "").
        source: "<source> (as of <date>)" of the rate used ("" when UNPRICED).
    """

    kind: str
    usd_per_hour: float | None
    why: str = ""
    hint: str = ""
    source: str = ""

    @property
    def ceiling_text(self) -> str:
        """A CEILING labelled as such, "at most $21.60/h (the on-demand price as the ceiling)"; else ""."""
        if self.kind != CEILING or self.usd_per_hour is None:
            return ""
        return f"at most ${self.usd_per_hour:,.2f}/h (the {CEILING_MODEL} price as the ceiling)"


def quote(accelerator_type: str, provisioning_model: str, region: str) -> Quote:
    """Price one accelerator per hour under a queued resource's provisioning model (flex-start, spot,
    on-demand, reserved as the 1-year commitment, or a price-table model such as "1y"), or bound it.

    Args:
        accelerator_type: e.g. "v6e-8".
        provisioning_model: a `QueuedResourceInfo.provisioning_model` or one of `MODELS`.
        region: GCP region, e.g. "us-east5".

    Returns:
        A Quote: EXACT from the price table; else CEILING from the on-demand row; else UNPRICED. Its `why`
        keeps the reason the exact price was refused (what `burn` raises).

    Raises:
        BadInput: a malformed accelerator type or region (what `price` raises for them).
    """
    n = chips(accelerator_type)
    if not isinstance(region, str) or not _REGION.match(region):
        raise BadInput(f"malformed region {region!r}", "pass a region such as us-east5")
    model = _QR_MODELS.get(provisioning_model, provisioning_model)
    try:
        if model not in MODELS:
            raise BadInput(
                f"no price mapping for provisioning model {provisioning_model!r}",
                f"priced models: {', '.join(_QR_MODELS)}",
            )
        row = price(accelerator_type, model, region)
        return Quote(EXACT, n * row.usd_per_chip_hour, source=f"{row.source} (as of {row.as_of})")
    except BadInput as exc:
        why, hint = exc.message, exc.hint
        if provisioning_model == "reserved":
            why = f"reserved is priced as a 1-year commitment: {why}"
    if (family_of(accelerator_type), CEILING_MODEL, region) not in PRICES:
        return Quote(UNPRICED, None, why, hint)
    bound = price(accelerator_type, CEILING_MODEL, region)
    return Quote(CEILING, n * bound.usd_per_chip_hour, why, hint, f"{bound.source} (as of {bound.as_of})")


def quote_of(qr: QueuedResourceInfo) -> Quote:
    """`quote` for one accelerator of a queued resource in its zone's region; never raises: a QR without
    a well-formed accelerator type or zone is UNPRICED, saying why."""
    try:
        return quote(qr.accelerator_type, qr.provisioning_model, region_of(qr.zone))
    except BadInput as exc:
        return Quote(UNPRICED, None, exc.message, exc.hint)


def burn(qr: QueuedResourceInfo, now: datetime) -> Burn:
    """Live spend of an ACTIVE queued resource.

    Arithmetic: usd_per_hour = chips(accelerator_type) * slices * rate (USD per chip-hour), where slices is
    the number of nodes the QR has (1 if none were fetched); usd_so_far = usd_per_hour * hours since `start`;
    usd_until_termination = usd_per_hour * hours from `now` to `qr.termination_time` (None if unknown).

    Approximation: Cloud TPU bills while the node is READY (https://cloud.google.com/tpu/pricing). The API
    gives no READY-since timestamp, so `start` is the earliest
    node `create_time` when nodes are known, else the QR `create_time`. Both overestimate slightly (node
    creation precedes READY by minutes); the QR create time also includes any time spent queued
    (WAITING_FOR_RESOURCES), so it can overestimate a flex-start QR that waited long.

    Pricing model: `quote` decides (`qr.provisioning_model` "flex-start", "spot" and "on-demand" map to
    the same-named price; "reserved" maps to the 1-year commitment ("1y") price where one is sourced (none
    is, today); "best-effort" has no price). Only an EXACT quote gives a burn: spend so far is a figure,
    never a ceiling. The region is `region_of(qr.zone)`.

    Args:
        qr: the queued resource; must be ACTIVE with an accelerator type, zone and create time.
        now: the current time, timezone-aware.

    Returns:
        A `Burn` (USD, hours).

    Raises:
        BadInput: the QR is not ACTIVE, lacks a create time or accelerator type, `now` is naive, the
            provisioning model has no price mapping, or there is no sourced price (see `price`).
    """
    if qr.state != "ACTIVE":
        raise BadInput(
            f"{qr.name} is {qr.state}, not ACTIVE", "only ACTIVE queued resources accrue TPU charges"
        )
    if now.tzinfo is None:
        raise BadInput("burn() needs a timezone-aware 'now'", "use datetime.now(UTC)")
    if not qr.accelerator_type:
        raise BadInput(f"{qr.name} has no accelerator type", "describe the queued resource again")
    node_starts = [n.create_time for n in qr.nodes if n.create_time is not None]
    start = min(node_starts) if node_starts else qr.create_time
    if start is None:
        raise BadInput(f"{qr.name} has no create time", "cannot tell how long it has been running")
    rate = quote(qr.accelerator_type, qr.provisioning_model, region_of(qr.zone))
    if rate.kind != EXACT or rate.usd_per_hour is None:  # a ceiling is no figure of what was spent
        raise BadInput(rate.why, rate.hint)
    slices = max(1, len(qr.nodes))
    per_hour = slices * rate.usd_per_hour
    hours = max(0.0, (now - start).total_seconds() / 3600.0)
    until: float | None = None
    if qr.termination_time is not None:
        until = per_hour * max(0.0, (qr.termination_time - now).total_seconds() / 3600.0)
    return Burn(
        usd_so_far=per_hour * hours,
        usd_until_termination=until,
        usd_per_hour=per_hour,
        hours_so_far=hours,
        price_source=rate.source,
        start=start,
    )
