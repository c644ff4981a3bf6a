"""Money: amounts, rates, price estimates with their sources and dates, and the spend lines of a preview
(/tpu cost, the create, recover and find previews, live burn, alerts and the digest).

Every figure is shown with what it is: the model's own price, "at most" (a missing row bounded by the
on-demand row of the same region) or "about" (another region's row), and where it comes from with the
date it was read; a row read longer ago than PRICE_MAX_AGE_DAYS is flagged beside its date.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date, datetime, timedelta

from bot.slack.render import (
    Attachment,
    Reply,
    blocks_reply,
    code,
    context,
    header,
    human_duration,
    plural,
    section,
    utc,
)
from ops.cost import pricing as cost
from ops.cost.spend import SpendPlan

PRICING_PAGE = cost.PRICING_DOC


def usd(amount: float) -> str:
    """US dollars with cents and thousands separators: "$1,234.56"."""
    return f"${amount:,.2f}"


def per_hour(amount: float) -> str:
    """A rate in US dollars per hour: "$21.60/h"."""
    return f"{usd(amount)}/h"


def burn_text(spend: cost.Burn) -> str:
    """What an ACTIVE queued resource has cost so far, in the one wording of `/tpu cost` and the chat's
    facts: "at most $31.91 over 1h 28m (at most $21.60/h)": the quote's bound ("at most ", "about ") before
    every figure, the time run as `human_duration`."""
    bound = spend.quote.bound
    running = human_duration(timedelta(hours=spend.hours_so_far))
    return f"{bound}{usd(spend.usd_so_far)} over {running} ({bound}{per_hour(spend.usd_per_hour)})"


def burn_total(spent: float, rate: float, bounded: bool) -> str:
    """The running resources' spend summed, as `/tpu cost` and the chat's facts say it: "at most $31.91 so
    far, at most $21.60/h now" ("at most" when a figure is a ceiling)."""
    bound = "at most " if bounded else ""
    return f"{bound}{usd(spent)} so far, {bound}{per_hour(rate)} now"


def cited(row: cost.Price, today: date | None = None, max_age_days: int | None = None) -> str:
    """ "TITLE (URL), read DATE", with ":warning: N days old" when `today` is more than `max_age_days` after
    the read date."""
    text = row.cited
    if today is not None and max_age_days is not None and (today - row.as_of).days > max_age_days:
        text += (
            f" :warning: {(today - row.as_of).days} days old (over PRICE_MAX_AGE_DAYS={max_age_days}): "
            f"check {PRICING_PAGE}"
        )
    return text


def quote_note(quote: cost.Quote, today: date | None = None, max_age_days: int | None = None) -> str:
    """One short line saying what a figure is: its source and date, and for a missing row which row is
    missing and what stands in; "" when UNPRICED (its `missing` is said instead)."""
    if quote.row is None:
        return quote.missing
    source = cited(quote.row, today, max_age_days)
    return f"{quote.used}; {source}" if quote.used else source


def _sources(quotes: Iterable[cost.Quote], today: date | None, max_age_days: int | None) -> dict[str, int]:
    """Each distinct cited source of `quotes` -> its footnote number, in first-seen order."""
    numbers: dict[str, int] = {}
    for quote in quotes:
        if quote.row is not None:
            numbers.setdefault(cited(quote.row, today, max_age_days), len(numbers) + 1)
    return numbers


def estimate_lines(
    accelerator_type: str,
    hours: float,
    model: str,
    region: str,
    today: date | None = None,
    max_age_days: int | None = None,
) -> list[str]:
    """`/tpu cost`'s estimate: the asked model's total first, then every provisioning model's figure, each
    with a footnote to its source and date; a missing row says which row is missing and what stands in.

    Raises:
        BadInput: a malformed type, hours or region (what `ops.cost.pricing.estimate` raises for them).
    """
    asked = cost.estimate(accelerator_type, hours, model, region)
    every = cost.estimates(accelerator_type, hours, region)
    notes = _sources((e.quote for e in every), today, max_age_days)

    def mark(e: cost.CostEstimate) -> str:
        return f" [{notes[cited(e.quote.row, today, max_age_days)]}]" if e.quote.row is not None else ""

    bound = asked.quote.bound
    lines = [
        f"*{asked.accelerator_type}* ({asked.chips} chips) *{model}* in {region}, {hours:g} h: "
        f"*{bound}{usd(asked.total_usd)}* ({per_hour(asked.usd_per_hour)}){mark(asked)}"
    ]
    if asked.quote.used:
        lines.append(
            f"_{asked.quote.used}: {asked.quote.why}_" if asked.quote.why else f"_{asked.quote.used}_"
        )
    lines.append(f"*Every provisioning model* ({hours:g} h):")
    for e in every:
        what = "" if e.quote.exact else f" _({e.quote.missing}: {e.quote.kind})_"
        lines.append(
            f"• {e.model}: {e.quote.bound}{usd(e.total_usd)} ({per_hour(e.usd_per_hour)}){mark(e)}{what}"
        )
    lines += [f"_[{n}] {text}_" for text, n in notes.items()]
    return lines


def spend_lines(plan: SpendPlan, provisioning_model: str) -> list[str]:
    """The cost lines of a capacity search's preview: price per zone, how many at once, the winner's cost,
    the worst case, and what stands in for each missing price row."""
    lines = [_price_line(plan, provisioning_model)]
    lines.append(
        f"*At most {plural(plan.at_once, 'request')} at once*; waiting requests cost nothing, each ACTIVE "
        "one bills"
    )
    if plan.at_once > 1 and plan.worst_case_usd_per_hour is not None:
        every = "both" if plan.at_once == 2 else f"all {plan.at_once}"
        lines.append(
            f"*Before the first winner* at most ${plan.worst_case_usd_per_hour:,.2f}/h, if {every} turn "
            "ACTIVE together (the others are then deleted and checked gone)"
        )
    if plan.worst_case_usd is not None and plan.winner_usd is not None and plan.run_hours is not None:
        lines.append(
            f"*Spend* the one kept: up to ${plan.winner_usd:,.2f} ({plan.run_hours:g} h max run); "
            f"*worst case* {plan.at_once} ACTIVE at once for the whole max run: ${plan.worst_case_usd:,.2f}"
        )
    elif plan.worst_case_usd_per_hour is not None:
        lines.append(_no_end_line(plan.worst_case_usd_per_hour, "until deleted"))
    return lines + _plan_sources(plan)


def create_spend_lines(plan: SpendPlan, provisioning_model: str) -> list[str]:
    """The cost lines of a single create's preview (one request, one zone): its price and its spend."""
    span = f"{plan.run_hours:g} h max run" if plan.run_hours is not None else None
    return _one_spend_lines(
        plan, provisioning_model, span, "billed once ACTIVE", "once ACTIVE, until deleted"
    )


def start_spend_lines(plan: SpendPlan, provisioning_model: str, ends: datetime | None) -> list[str]:
    """The cost lines of `/tpu start`'s preview: the node's price, and what it may bill once started, up to
    its queued resource's termination time `ends` (None: no fixed end, until stopped or deleted)."""
    span = (
        f"{plan.run_hours:.1f} h until it terminates at {utc(ends)}"
        if plan.run_hours is not None and ends is not None
        else None
    )
    return _one_spend_lines(
        plan, provisioning_model, span, "billed again once started", "once started, until stopped or deleted"
    )


def _one_spend_lines(
    plan: SpendPlan, provisioning_model: str, span: str | None, billed: str, no_end: str
) -> list[str]:
    """The price line, then the spend over `span` (e.g. "4 h max run"; None: no fixed end, the hourly
    ceiling `no_end` instead), then the price sources: one request in one zone."""
    lines = [_price_line(plan, provisioning_model)]
    if plan.winner_usd is not None and span is not None:
        lines.append(f"*Spend* up to ${plan.winner_usd:,.2f} ({span}), {billed}")
    elif plan.max_usd_per_hour is not None:
        lines.append(_no_end_line(plan.max_usd_per_hour, no_end))
    return lines + _plan_sources(plan)


def _plan_sources(plan: SpendPlan) -> list[str]:
    lines = [f"_{text}_" for text in plan.missing]
    if plan.source:
        lines.append(f"_Prices: {plan.source}._")
    return lines


def _no_end_line(usd_per_hour: float, until: str) -> str:
    return f"*Spend* no fixed end: up to ${usd_per_hour:,.2f}/h (${usd_per_hour * 24:,.2f} a day) {until}"


def _price_line(plan: SpendPlan, provisioning_model: str) -> str:
    """ "*Price* MODEL: `zone` $X/h, ..." with "at most" where the figure is a ceiling and the unpriced
    zones said."""
    priced = [
        f"`{zone}` {plan.quotes[zone].bound if zone in plan.quotes else ''}${rate:,.2f}/h"
        for zone, rate in plan.usd_per_hour.items()
        if rate is not None
    ]
    unpriced = [f"`{zone}`" for zone, rate in plan.usd_per_hour.items() if rate is None]
    line = f"*Price* {provisioning_model}: " + (", ".join(priced) or "no known price")
    if plan.ceiling:
        line += " (the spend below is an upper bound: see the missing rows)"
    if unpriced:
        line += f"; no price known for {', '.join(unpriced)}"
    return line


def cost_estimate(lines: list[str], burn: str) -> Reply:
    """`/tpu cost`: the estimate's lines (`estimate_lines`) and what the fleet burns now (`burn`, mrkdwn)."""
    return blocks_reply([header("TPU cost"), section("\n".join(lines)), section(burn)])


def spend_report(label: str, deployment_lines: list[str], total: str, sources: str) -> Reply:
    """`/tpu cost --today` or `--week`: one paragraph per deployment, the total, and the price sources.

    Args:
        label: the period, e.g. "today (UTC)". deployment_lines: each deployment's spend, mrkdwn.
        total: the total line, mrkdwn. sources: the price tables used ("" when none).
    """
    return blocks_reply(
        [
            header(f"TPU spend {label}"),
            section("\n".join(deployment_lines)),
            section(total),
            context(
                "From the ACTIVE queued resources' lifetimes and the price table (see `/tpu cost`); queued "
                "resources deleted before now are not counted." + (f" Prices: {sources}." if sources else "")
            ),
        ]
    )


def deploy_file(body: str, filename: str, secret: str, *, beside: tuple[str, str] | None = None) -> Reply:
    """A generated deployment file shown as code and attached as `filename`, with a note that the Hugging
    Face token stays in the Secret Manager secret `secret`.

    Args:
        beside: (filename, body) of a file `body` reads from its own directory (the gcloud command's
            `startup.sh`): attached too, and named in the note, so the command runs as given.
    """
    note = f"The Hugging Face token stays in Secret Manager (`{secret}`); nothing here contains it."
    files = [(filename, body)]
    if beside is not None:
        files.append(beside)
        note = f"`{filename}` reads `{beside[0]}` from the directory it runs in: both are attached. {note}"
    reply = blocks_reply([section(code(body)), context(note)])
    reply.files += [Attachment(name, content, name) for name, content in files]
    return reply
