"""TPU cost: the price table (`ops/cost/prices.yaml`, USD per chip-hour, each row with its public source and
the
date it was read), chip counting, quotes and live burn.

Nothing is estimated. A (generation, provisioning model, region) with a row is EXACT. One without a row is
said to be missing, and the quote names the row used instead: the on-demand price of the same type and
region as the CEILING (Google prices flex-start, spot and commitments below on-demand:
https://cloud.google.com/tpu/pricing, https://cloud.google.com/kubernetes-engine/docs/concepts/dws), or, where
the generation has no row in that region at all, its highest on-demand price in another region as a
SUBSTITUTE. So every known accelerator type gets a figure, and every figure carries a source and a date; a
reader sees "at most" or "instead" beside a figure that is not the model's own price.

Units: prices are USD per chip-hour; durations are hours (float); totals are USD.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from ops.datafile import DataFileError, line_of, load
from ops.errors import BadInput
from ops.linear import linear
from ops.tpu.model import REGION_PATTERN, QueuedResourceInfo, is_region, is_zone, region_of

__all__ = [
    "CEILING",
    "DEFAULT_MODEL",
    "EXACT",
    "MODELS",
    "PRICES",
    "PRICES_PATH",
    "PRICING_DOC",
    "SUBSTITUTE",
    "UNPRICED",
    "Burn",
    "CostEstimate",
    "Price",
    "Quote",
    "burn",
    "chips",
    "estimate",
    "estimates",
    "family_of",
    "load_prices",
    "price",
    "pricing_model_of",
    "quote",
    "quote_of",
]

PRICING_DOC = "https://cloud.google.com/tpu/pricing"
PRICES_PATH = Path(__file__).with_name("prices.yaml")

#: Pricing models of the table. "1y"/"3y" are committed-use chip-hour rates.
MODELS: tuple[str, ...] = ("flex-start", "spot", "on-demand", "1y", "3y")

#: The pricing model `/tpu create` uses when none is given, and so `/tpu cost`'s default.
DEFAULT_MODEL = "flex-start"

#: What a missing row falls back to in the same region: on-demand is the highest of the models.
CEILING_MODEL = "on-demand"

EXACT, CEILING, SUBSTITUTE, UNPRICED = "exact", "ceiling", "substitute", "unpriced"

_ACCEL = linear(r"^(?P<prefix>[a-z0-9]+)-(?P<n>[0-9]+)$")

# accelerator-type prefix -> (price-table family, accelerator-type units per chip).
# v4-N and v5p-N count TensorCores (2 per chip); v5litepod-N and v6e-N count chips:
# https://cloud.google.com/tpu/docs/system-architecture-tpu-vm
_FAMILIES: dict[str, tuple[str, int]] = {
    "v4": ("v4", 2),
    "v5p": ("v5p", 2),
    "v5litepod": ("v5e", 1),
    "v6e": ("v6e", 1),
}

# QueuedResourceInfo.provisioning_model -> price model. "reserved" is priced as a 1-year commitment.
_QR_MODELS = {"flex-start": "flex-start", "spot": "spot", "on-demand": "on-demand", "reserved": "1y"}

ModelName = Literal["flex-start", "spot", "on-demand", "1y", "3y"]


# ---- the data file ----------------------------------------------------------------------------------------


class _Source(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    url: str = Field(pattern=r"^https://\S+$")
    title: str = Field(min_length=3)
    read: date
    note: str = ""


class _Row(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    family: Literal["v6e", "v5e", "v5p", "v4"]
    model: ModelName
    region: str = Field(pattern=f"^{REGION_PATTERN}$")
    usd_per_chip_hour: float = Field(gt=0, lt=1000)
    source: str


class _PriceFile(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)
    sources: dict[str, _Source]
    gaps: dict[ModelName, str]
    prices: list[_Row] = Field(min_length=1)


@dataclass(frozen=True)
class Price:
    """One row of the price table.

    Attributes:
        family: "v6e", "v5e" (accelerator types v5litepod-N), "v5p", "v4".
        model: one of `MODELS`.
        region: GCP region, e.g. "us-east5".
        usd_per_chip_hour: the rate, USD per chip-hour.
        source: the title of the page it comes from; url: that page.
        as_of: the date the page was read.
        line: the row's line in the data file.
    """

    family: str
    model: str
    region: str
    usd_per_chip_hour: float
    source: str
    url: str
    as_of: date
    line: int = 0

    @property
    def cited(self) -> str:
        """ "TITLE (URL), read YYYY-MM-DD"."""
        return f"{self.source} ({self.url}), read {self.as_of.isoformat()}"


@dataclass(frozen=True)
class PriceTable:
    """The loaded data file: rows by (family, model, region) and the reason text of each model's gaps."""

    rows: Mapping[tuple[str, str, str], Price]
    gaps: Mapping[str, str]


def load_prices(path: str | Path = PRICES_PATH) -> PriceTable:
    """Read and check a price file (format: the header of `ops/cost/prices.yaml`).

    Raises:
        DataFileError: a schema violation, a row naming an unknown source, or two rows for the same
            (family, model, region); each problem as "FILE:LINE: where: what".
    """
    data, root = load(path, _PriceFile)
    rows: dict[tuple[str, str, str], Price] = {}
    problems = []
    for index, row in enumerate(data.prices):
        line = line_of(root, ("prices", index))
        source = data.sources.get(row.source)
        if source is None:
            known = ", ".join(sorted(data.sources))
            problems.append(f"{path}:{line}: prices[{index}].source: unknown source {row.source!r} ({known})")
            continue
        key = (row.family, row.model, row.region)
        if key in rows:
            problems.append(
                f"{path}:{line}: prices[{index}]: {'/'.join(key)} again (first at {rows[key].line})"
            )
            continue
        rows[key] = Price(*key, row.usd_per_chip_hour, source.title, source.url, source.read, line)
    if problems:
        raise DataFileError("\n".join(problems))
    return PriceTable(rows, {str(model): text for model, text in data.gaps.items()})


_TABLE = load_prices()

#: (family, model, region) -> Price. Read-only by convention.
PRICES: Mapping[tuple[str, str, str], Price] = _TABLE.rows


# ---- accelerator types, zones, regions --------------------------------------------------------------------


def _parse(accelerator_type: str) -> tuple[str, int]:
    text = accelerator_type.strip().lower() if isinstance(accelerator_type, str) else ""
    match = _ACCEL.match(text)
    known = ", ".join(f"{p}-N" for p in _FAMILIES)
    if not match:
        raise BadInput(
            f"malformed TPU accelerator type {accelerator_type!r}", f"expected one of {known}, e.g. v6e-8"
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


def family_of(accelerator_type: str) -> str:
    """The price-table family of an accelerator type: "v6e-8" -> "v6e", "v5litepod-4" -> "v5e".

    Raises:
        BadInput: the type is malformed or its family is not one of v4, v5p, v5litepod, v6e.
    """
    return _parse(accelerator_type)[0]


def chips(accelerator_type: str) -> int:
    """Number of TPU chips in an accelerator type (v5litepod-N and v6e-N: N; v4-N and v5p-N: N/2, as the
    suffix counts TensorCores, https://cloud.google.com/tpu/docs/system-architecture-tpu-vm).

    Raises:
        BadInput: malformed type, unknown family, a zero suffix, or an odd TensorCore count for v4/v5p.
    """
    return _parse(accelerator_type)[1]


def _check_region(region: str) -> None:
    if not is_region(region):
        hint = "pass a region such as us-east5"
        if is_zone(region):
            hint = f"{region!r} is a zone; pass its region {region_of(region)!r}"
        raise BadInput(f"malformed region {region!r}", hint)


def pricing_model_of(provisioning_model: str) -> str:
    """The price-table model of a queued resource's provisioning model ("reserved" is priced as "1y"); a
    provisioning model without a mapping (e.g. "best-effort") is returned as is, and `quote` refuses it."""
    return _QR_MODELS.get(provisioning_model, provisioning_model)


def price(accelerator_type: str, model: str, region: str) -> Price:
    """The table's own row for this type's family, `model` and `region`.

    Raises:
        BadInput: unknown type family or model, malformed region, or no such row (the message names the
            models the region has).
    """
    family = family_of(accelerator_type)
    if model not in MODELS:
        raise BadInput(f"unknown pricing model {model!r}", f"known: {', '.join(MODELS)}")
    _check_region(region)
    row = PRICES.get((family, model, region))
    if row is None:
        known = sorted(m for m in MODELS if (family, m, region) in PRICES)
        raise BadInput(
            f"no {model} row for {family} in {region}" + (f"; rows: {', '.join(known)}" if known else ""),
            f"see {PRICING_DOC}",
        )
    return row


# ---- quotes -----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Quote:
    """The hourly price of one accelerator under a pricing model in a region: the one place that decides
    between the model's own price, a labelled ceiling, a labelled substitute and "not priced".

    Attributes:
        kind: EXACT (the table's row), CEILING (no row: the on-demand row of the same type and region bounds
            it), SUBSTITUTE (the generation has no row in the region: its highest on-demand row elsewhere)
            or UNPRICED (no row of the generation at all, or a model without a price mapping).
        model: the pricing model asked for (one of `MODELS`, or what was given); region: the region asked.
        family: the price-table family; chips: chips of the accelerator type.
        usd_per_hour: USD per hour for the accelerator's chips (None when UNPRICED).
        row: the row the figure comes from (None when UNPRICED).
        missing: which row is missing, e.g. "no flex-start row for v6e in us-east5" ("" when EXACT).
        why: why it is missing and what is used instead (the data file's `gaps` text), "" when EXACT.
    """

    kind: str
    model: str
    region: str
    family: str
    chips: int
    usd_per_hour: float | None
    row: Price | None = None
    missing: str = ""
    why: str = ""

    @property
    def exact(self) -> bool:
        """True when the figure is the model's own price."""
        return self.kind == EXACT

    @property
    def bound(self) -> str:
        """ "at most " for a ceiling, "about " for a substitute, "" otherwise: put before a total."""
        return {CEILING: "at most ", SUBSTITUTE: "about "}.get(self.kind, "")

    @property
    def source(self) -> str:
        """ "TITLE (URL), read DATE" of the row used ("" when UNPRICED)."""
        return self.row.cited if self.row is not None else ""

    @property
    def as_of(self) -> date | None:
        """The date the row used was read (None when UNPRICED)."""
        return self.row.as_of if self.row is not None else None

    @property
    def used(self) -> str:
        """What stands in for a missing row, e.g. "no flex-start row for v6e in us-east5; used instead: the
        on-demand row ($2.70 per chip-hour) as the ceiling"; "" when EXACT."""
        if self.kind == EXACT:
            return ""
        if self.row is None:
            return f"{self.missing}; {self.why}" if self.why else self.missing
        rate = f"${self.row.usd_per_chip_hour:,.3f} per chip-hour"
        what = (
            f"the {self.row.model} row of {self.row.region} ({rate}) as the ceiling"
            if self.kind == CEILING
            else f"the {self.row.model} row of {self.row.region} ({rate}), not a price of {self.region}"
        )
        return f"{self.missing}; used instead: {what}"

    def stale(self, today: date, max_age_days: int) -> bool:
        """True when the row used was read more than `max_age_days` before `today`."""
        return self.as_of is not None and (today - self.as_of).days > max_age_days


def quote(accelerator_type: str, model: str, region: str) -> Quote:
    """Price one accelerator per hour under a queued resource's provisioning model (flex-start, spot,
    on-demand, reserved as the 1-year commitment) or a price-table model ("1y", "3y") in a region.

    Args:
        accelerator_type: e.g. "v6e-8".
        model: a `QueuedResourceInfo.provisioning_model` or one of `MODELS`.
        region: GCP region, e.g. "us-east5".

    Returns:
        A Quote: EXACT from the table; else CEILING from the same region's on-demand row; else SUBSTITUTE
        from the generation's highest on-demand row elsewhere; else UNPRICED.

    Raises:
        BadInput: a malformed accelerator type or region.
    """
    family, n = _parse(accelerator_type)
    _check_region(region)
    table_model = pricing_model_of(model)
    if table_model not in MODELS:
        missing = f"no price mapping for provisioning model {model!r}"
        return Quote(
            UNPRICED, model, region, family, n, None, missing=missing, why=f"priced: {', '.join(_QR_MODELS)}"
        )
    row = PRICES.get((family, table_model, region))
    if row is not None:
        return Quote(EXACT, table_model, region, family, n, n * row.usd_per_chip_hour, row)
    missing = f"no {table_model} row for {family} in {region}"
    if model == "reserved":
        missing = f"reserved is priced as a 1-year commitment: {missing}"
    ceiling = PRICES.get((family, CEILING_MODEL, region))
    if ceiling is not None:
        why = _TABLE.gaps.get(table_model, "")
        return Quote(
            CEILING, table_model, region, family, n, n * ceiling.usd_per_chip_hour, ceiling, missing, why
        )
    elsewhere = [r for (f, m, _), r in PRICES.items() if f == family and m == CEILING_MODEL]
    if not elsewhere:
        return Quote(UNPRICED, table_model, region, family, n, None, missing=f"no row for {family} at all")
    top = max(elsewhere, key=lambda r: (r.usd_per_chip_hour, r.region))
    why = _TABLE.gaps.get(CEILING_MODEL, "")
    return Quote(SUBSTITUTE, table_model, region, family, n, n * top.usd_per_chip_hour, top, missing, why)


def quote_of(qr: QueuedResourceInfo) -> Quote:
    """`quote` for one accelerator of a queued resource in its zone's region; never raises: a QR without a
    well-formed accelerator type or zone is UNPRICED, saying why."""
    return _quote_in_zone(qr.accelerator_type, qr.provisioning_model, qr.zone)


@functools.lru_cache(maxsize=1024)
def _quote_in_zone(accelerator_type: str, provisioning_model: str, zone: str) -> Quote:
    """`quote_of`'s answer, the same for every queued resource of that type, model and zone (the price table
    is read once, at import): parsing the type and the zone again for each of 50 resources took 1.2 ms of
    CPU, 0.02 ms cached, on every /fleet."""
    try:
        return quote(accelerator_type, provisioning_model, region_of(zone))
    except BadInput as exc:
        return Quote(UNPRICED, provisioning_model, "", "", 0, None, missing=exc.message)


# ---- estimates --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class CostEstimate:
    """What running an accelerator for some hours costs under one pricing model.

    Attributes:
        accelerator_type: e.g. "v6e-8"; chips: chips in that type.
        hours: duration in hours.
        quote: the price decision (`quote`); its `usd_per_hour` is not None.
        total_usd: quote.usd_per_hour * hours, USD ("at most" for a CEILING, see `Quote.bound`).
    """

    accelerator_type: str
    chips: int
    hours: float
    quote: Quote
    total_usd: float

    @property
    def model(self) -> str:
        return self.quote.model

    @property
    def region(self) -> str:
        return self.quote.region

    @property
    def usd_per_hour(self) -> float:
        """USD per hour for the whole accelerator."""
        return float(self.quote.usd_per_hour or 0.0)

    @property
    def usd_per_chip_hour(self) -> float:
        return self.quote.row.usd_per_chip_hour if self.quote.row is not None else 0.0


def estimate(accelerator_type: str, hours: float, model: str, region: str) -> CostEstimate:
    """Estimate the cost of running an accelerator for `hours` under a pricing model.

    For "1y"/"3y" this is the committed chip-hour rate times `hours`; a real commitment is billed for its
    whole term whether used or not.

    Args:
        accelerator_type: e.g. "v6e-8"; hours: finite and >= 0; model: one of `MODELS`.
        region: e.g. "us-east5".

    Returns:
        A CostEstimate (USD); its quote says when the figure is a ceiling or a substitute.

    Raises:
        BadInput: invalid hours, unknown model, malformed type or region, or a generation without any row.
    """
    if isinstance(hours, bool) or not isinstance(hours, int | float) or not math.isfinite(hours) or hours < 0:
        raise BadInput(f"invalid duration {hours!r} hours", "give a finite number of hours >= 0")
    if model not in MODELS:
        raise BadInput(f"unknown pricing model {model!r}", f"known: {', '.join(MODELS)}")
    found = quote(accelerator_type, model, region)
    if found.usd_per_hour is None:
        raise BadInput(found.missing, f"see {PRICING_DOC}")
    return CostEstimate(
        accelerator_type.strip().lower(), found.chips, float(hours), found, found.usd_per_hour * hours
    )


def estimates(accelerator_type: str, hours: float, region: str) -> list[CostEstimate]:
    """An estimate for every pricing model, in `MODELS` order.

    Raises:
        BadInput: what `estimate` raises for the type, hours or region.
    """
    return [estimate(accelerator_type, hours, model, region) for model in MODELS]


# ---- live burn --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Burn:
    """Live spend of an ACTIVE queued resource.

    Attributes:
        usd_so_far: USD accrued from `start` to now.
        usd_until_termination: USD still to accrue from now until `termination_time` (0 once past), or None
            when no termination time is known (on-demand, spot, reserved without an end).
        usd_per_hour: USD per hour for all the QR's chips.
        hours_so_far: hours from `start` to now (0 if `start` is in the future).
        quote: the price decision: its `bound` ("at most ", "about ") goes before every figure here.
        start: the instant billing is assumed to have started (see `burn`).
    """

    usd_so_far: float
    usd_until_termination: float | None
    usd_per_hour: float
    hours_so_far: float
    quote: Quote = field(repr=False)
    start: datetime | None = None

    @property
    def price_source(self) -> str:
        """ "TITLE (URL), read DATE" of the row used."""
        return self.quote.source


def burn(qr: QueuedResourceInfo, now: datetime) -> Burn:
    """Live spend of an ACTIVE queued resource.

    Arithmetic: usd_per_hour = slices * `quote_of(qr).usd_per_hour`, where slices is the number of nodes the
    QR has (1 if none were fetched); usd_so_far = usd_per_hour * hours since `start`; usd_until_termination
    = usd_per_hour * hours from `now` to `qr.termination_time` (None if unknown).

    Approximation: Cloud TPU bills while the node is READY (https://cloud.google.com/tpu/pricing). The API
    gives no READY-since timestamp, so `start` is the earliest node `create_time` when nodes are known, else
    the QR `create_time`. Both overestimate slightly; the QR create time also includes time spent queued.

    Args:
        qr: the queued resource; must be ACTIVE with an accelerator type, zone and create time.
        now: the current time, timezone-aware.

    Returns:
        A `Burn` (USD, hours); a missing price row gives the quote's ceiling or substitute, labelled.

    Raises:
        BadInput: the QR is not ACTIVE, lacks a create time or accelerator type, `now` is naive, or the
            quote is UNPRICED (its `missing` text).
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
    rate = quote_of(qr)
    if rate.usd_per_hour is None:
        raise BadInput(rate.missing, rate.why)
    per_hour = max(1, len(qr.nodes)) * rate.usd_per_hour
    hours = max(0.0, (now - start).total_seconds() / 3600.0)
    until: float | None = None
    if qr.termination_time is not None:
        until = per_hour * max(0.0, (qr.termination_time - now).total_seconds() / 3600.0)
    return Burn(per_hour * hours, until, per_hour, hours, rate, start)
