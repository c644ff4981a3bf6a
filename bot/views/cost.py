"""Money: amounts, rates, price estimates and their sources, and the spend lines of a preview (/tpu cost,
the create, delete and find previews, alerts and the digest)."""

from __future__ import annotations

from ops import cost
from ops.errors import BadInput
from ops.spend import SpendPlan

PRICING_PAGE = "https://cloud.google.com/tpu/pricing"


def usd(amount: float) -> str:
    """US dollars with cents and thousands separators: "$1,234.56"."""
    return f"${amount:,.2f}"


def per_hour(amount: float) -> str:
    """A rate in US dollars per hour: "$21.60/h"."""
    return f"{usd(amount)}/h"


def estimate_line(e: cost.CostEstimate) -> str:
    """One estimate: "*v6e-8* (8 chips) on-demand in us-east5: $2.700 per chip-hour = *$21.60/h*; 4 h =
    *$86.40*" (its source goes in `sources_line`)."""
    return (
        f"*{e.accelerator_type}* ({e.chips} chips) {e.model} in {e.region}: "
        f"${e.usd_per_chip_hour:,.3f} per chip-hour = *{per_hour(e.usd_per_hour)}*; "
        f"{e.hours:g} h = *{usd(e.total_usd)}*"
    )


def sources_line(estimates: list[cost.CostEstimate]) -> str:
    """ "_Price source: SOURCE, as of DATE._" once for every distinct source of `estimates`."""
    sources = dict.fromkeys(f"{e.source}, as of {e.as_of}" for e in estimates)
    return "_Price source: " + "; ".join(sources) + "._"


def estimate_lines(accelerator_type: str, hours: float, model: str, region: str) -> list[str]:
    """The estimate for `model` and its source; when `model` has no sourced price, the refusal and the
    estimates of the models that have one (never a guessed figure).

    Raises:
        BadInput: a malformed type, hours or region (what `ops.cost.estimate` raises for them).
    """
    try:
        estimate = cost.estimate(accelerator_type, hours, model, region)
    except BadInput as refused:
        known = cost.sourced_estimates(accelerator_type, hours, region)
        if not known:
            raise
        lines = [f":no_entry: {refused.message} (no public, dated source: refused, not guessed)."]
        lines.append("Sourced prices for comparison:")
        lines += [f"• {estimate_line(e)}" for e in known]
        lines.append(sources_line(known))
        lines.append(f"_Check {PRICING_PAGE} for {model}._")
        return lines
    return [estimate_line(estimate), sources_line([estimate])]


def spend_lines(plan: SpendPlan, provisioning_model: str) -> list[str]:
    """The cost lines of a capacity search's preview: price per zone, how many at once, the winner's cost,
    the worst case."""
    lines = [_price_line(plan, provisioning_model)]
    lines.append(
        f"*At most {plan.at_once} request(s) at once*; waiting requests cost nothing, each ACTIVE one bills"
    )
    if plan.at_once > 1 and plan.worst_case_usd_per_hour is not None:
        lines.append(
            f"*Before the first winner* at most ${plan.worst_case_usd_per_hour:,.2f}/h, if all "
            f"{plan.at_once} turn ACTIVE together (the others are then deleted and checked gone)"
        )
    if plan.worst_case_usd is not None and plan.winner_usd is not None and plan.run_hours is not None:
        lines.append(
            f"*Spend* the one kept: up to ${plan.winner_usd:,.2f} ({plan.run_hours:g} h max run); "
            f"*worst case* {plan.at_once} ACTIVE at once for the whole max run: ${plan.worst_case_usd:,.2f}"
        )
    elif plan.worst_case_usd_per_hour is not None:
        lines.append(_no_end_line(plan.worst_case_usd_per_hour, "until deleted"))
    if plan.source:
        lines.append(f"_Prices: {plan.source}._")
    return lines


def create_spend_lines(plan: SpendPlan, provisioning_model: str) -> list[str]:
    """The cost lines of a single create's preview (one request, one zone): its price and its spend."""
    lines = [_price_line(plan, provisioning_model)]
    if plan.winner_usd is not None and plan.run_hours is not None:
        lines.append(
            f"*Spend* up to ${plan.winner_usd:,.2f} ({plan.run_hours:g} h max run), billed once ACTIVE"
        )
    elif plan.max_usd_per_hour is not None:
        lines.append(_no_end_line(plan.max_usd_per_hour, "once ACTIVE, until deleted"))
    if plan.source:
        lines.append(f"_Prices: {plan.source}._")
    return lines


def _no_end_line(usd_per_hour: float, until: str) -> str:
    return f"*Spend* no fixed end: up to ${usd_per_hour:,.2f}/h (${usd_per_hour * 24:,.2f} a day) {until}"


def _price_line(plan: SpendPlan, provisioning_model: str) -> str:
    """ "*Price* MODEL: `zone` $X/h, ..." with the ceiling and the unpriced zones said."""
    bound = "at most " if plan.ceiling else ""
    priced = [
        f"`{zone}` {bound}${rate:,.2f}/h" for zone, rate in plan.usd_per_hour.items() if rate is not None
    ]
    unpriced = [f"`{zone}`" for zone, rate in plan.usd_per_hour.items() if rate is None]
    line = f"*Price* {provisioning_model}: " + (", ".join(priced) or "no known price")
    if plan.ceiling:
        line += (
            f" (no sourced {provisioning_model} price: the on-demand price is the ceiling, so the spend below"
            " is an upper bound)"
        )
    if unpriced:
        line += f"; no price known for {', '.join(unpriced)}"
    return line
