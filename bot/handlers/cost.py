"""`/tpu cost` (estimates and live burn) and `/tpu config` (equivalent gcloud, GKE and startup configs)."""

from __future__ import annotations

from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta

from bot.commands.context import Context
from bot.commands.registry import ACCELERATOR_TYPE, ChatTool, Param, registry
from bot.services import settled
from bot.shared.tpu_requests import startup_config
from bot.slack.render import Reply, human_duration, plural, utc
from bot.views.cost import (
    burn_text,
    burn_total,
    cost_estimate,
    deploy_file,
    estimate_lines,
    per_hour,
    spend_report,
    usd,
)
from ops.cost import pricing as cost
from ops.cost.spend import DeploymentSpend, deployment_spend, midnight
from ops.errors import BadInput, OpsError
from ops.linear import linear
from ops.tpu.model import region_of
from ops.vllm import deploy

_REGION = linear(r"^[a-z]+-[a-z]+\d+$")


def region_name(word: str) -> str:
    """A Google Cloud region such as us-east5."""
    if not _REGION.match(word):
        raise ValueError(f"{word!r} is not a region (e.g. us-east5)")
    return word


def pricing_model(word: str) -> str:
    """One of flex-start, spot, on-demand, 1y, 3y."""
    if word not in cost.MODELS:
        raise ValueError(f"{word!r} is not a pricing model ({', '.join(cost.MODELS)})")
    return word


def hours_value(word: str) -> float:
    """A number of hours above 0 and at most a year (8,760 h); raises ValueError naming the bounds."""
    try:
        hours = float(word)
    except ValueError:
        raise ValueError(f"{word!r} is not a number of hours") from None
    if not 0 < hours <= 8760:
        raise ValueError(f"{word!r}: give more than 0 hours and at most 8760 (a year)")
    return hours


@registry.command(
    "tpu cost",
    "Cost estimate from the price table, and the live burn of running queued resources",
    ACCELERATOR_TYPE,
    Param.option("hours", "hours to estimate (default 1)", hours_value, "N"),
    Param.option(
        "model",
        f"flex-start, spot, on-demand, 1y or 3y (default {cost.DEFAULT_MODEL}, as /tpu create); every "
        "model's figure is shown after it",
        pricing_model,
        "M",
    ),
    Param.option("region", "region (default: that of the first watched zone)", region_name, "R"),
    Param.toggle("today", "spend of every deployment since 00:00 UTC"),
    Param.toggle("week", "spend of every deployment over the last 7 days"),
    exclusive=(("today", "week"),),
    chat_tool=ChatTool(
        "cost", "Cost estimate and the live burn of running queued resources", reads="the cost and live burn"
    ),
)
def tpu_cost(
    ctx: Context,
    type_: str | None,
    hours: float | None,
    model: str | None,
    region: str | None,
    today: bool = False,
    week: bool = False,
) -> Reply:
    """Estimate in USD from the price table for the same default pricing model as `/tpu create`, then
    every provisioning model's figure, each with its source and read date (a missing row says which row is
    missing and what stands in), then the live burn of the ACTIVE queued resources with its total. An
    unknown type or region is an error naming what is known."""
    if today or week:
        now = ctx.services.now()
        since = midnight(now) if today else now - timedelta(days=7)
        return fleet_spend(ctx, since, "today (UTC)" if today else "over the last 7 days")
    settings = ctx.services.settings
    accelerator = type_ or settings.tpu_accelerator_type
    where = region or region_of(settings.tpu_zones[0])
    lines = estimate_lines(
        accelerator,
        hours or 1.0,
        model or cost.DEFAULT_MODEL,
        where,
        ctx.services.now().date(),
        settings.price_max_age_days,
    )
    return cost_estimate(lines, _burn_text(ctx))


def _bounded(amount: float, quote: cost.Quote | None) -> str:
    """ "$1.23", "at most $1.23" (a ceiling) or "about $1.23" (another region's row)."""
    return f"{quote.bound if quote is not None else ''}{usd(amount)}"


def _spend_lines(name: str, spend: DeploymentSpend) -> str:
    """One deployment's subtotal and its resources (USD; a figure from a missing row says "at most" and
    which row it is). A subtotal of resources none of which is priced is "unknown", never "$0.00"."""
    if spend.error is not None:
        hint = f" _({spend.error.hint})_" if spend.error.hint else ""
        return f":red_circle: *{name}*: {spend.error.message}{hint}"
    items = [f":warning: zone `{zone}` did not answer" for zone in spend.zones_failed]
    for r in spend.resources:
        if r.usd is None or r.usd_per_hour is None:
            items.append(f"`{r.qr.name}` not priced: {r.why}")
            continue
        kind = f"{r.qr.accelerator_type} {r.qr.provisioning_model}"
        line = f"`{r.qr.name}` ({kind}) {_bounded(r.usd, r.quote)} ({per_hour(r.usd_per_hour)})"
        items.append(line + (f" _({r.why})_" if r.why else ""))
    if spend.resources and len(spend.unpriced) == len(spend.resources):
        subtotal = "unknown (not priced)"
    else:
        bound = "at most " if spend.bounded else ""
        subtotal = f"*{bound}{usd(spend.usd)}*" + (" (priced resources only)" if spend.unpriced else "")
    return f"*{name}*: {subtotal}" + ("\n" + "\n".join(f"• {i}" for i in items) if items else "")


def fleet_spend(ctx: Context, since: datetime, label: str) -> Reply:
    """Spend of every deployment's ACTIVE queued resources from `since` to now (USD), listed concurrently
    (`ops.cost.spend.deployment_spend`). Queued resources deleted before now are no longer listed by the TPU
    API, so their spend is not counted; the reply says so."""
    deployments = ctx.fleet.services if ctx.fleet is not None else {ctx.deployment: ctx.services}
    now = ctx.services.now()
    with ThreadPoolExecutor(max_workers=len(deployments), thread_name_prefix="spend") as pool:
        listings = {
            name: pool.submit(services.tpu.list_queued_resources, services.settings.tpu_zones)
            for name, services in deployments.items()
        }
        spends = {}
        for name, future in listings.items():
            listing = settled(future, "spend listing")
            spends[name] = deployment_spend(listing, now, since)
    unpriced = sum(len(spend.unpriced) for spend in spends.values())
    priced = sum(len(spend.resources) for spend in spends.values()) - unpriced
    bound = "at most " if any(spend.bounded for spend in spends.values()) else ""
    if unpriced and not priced:  # never "$0.00" for resources billing at an unknown price
        total = f"*Total* unknown since {utc(since)}: {plural(unpriced, 'resource')} not priced, none priced"
    else:
        total = f"*Total* {bound}{usd(sum(spend.usd for spend in spends.values()))} since {utc(since)}" + (
            " (priced resources only: see the ones not priced above)" if unpriced else ""
        )
    sources = _sources_of(r.quote for spend in spends.values() for r in spend.resources)
    return spend_report(label, [_spend_lines(name, spend) for name, spend in spends.items()], total, sources)


def _sources_of(quotes: Iterable[cost.Quote | None]) -> str:
    """The distinct sources (with read dates) of `quotes`, joined."""
    return "; ".join(dict.fromkeys(q.source for q in quotes if q is not None and q.source))


def _burn_text(ctx: Context) -> str:
    now = ctx.services.now()
    try:
        listing = ctx.services.tpu.list_queued_resources(ctx.services.settings.tpu_zones)
    except OpsError as exc:
        return f":red_circle: live burn unavailable: {exc.message}"
    lines = ["*Live burn* (ACTIVE queued resources)"]
    spent = rate = 0.0
    priced = unpriced = 0
    bounded = False
    quotes: list[cost.Quote] = []
    for qr in listing.resources:
        if qr.state != "ACTIVE":
            continue
        try:
            spend = cost.burn(qr, now)
        except BadInput as exc:
            unpriced += 1
            lines.append(f"• `{qr.name}` ({qr.accelerator_type}, {qr.provisioning_model}): {exc.message}")
            continue
        priced += 1
        spent += spend.usd_so_far
        rate += spend.usd_per_hour
        bounded = bounded or not spend.quote.exact
        quotes.append(spend.quote)
        rest = ""
        if spend.usd_until_termination is not None:
            left = human_duration(qr.time_left(now))
            rest = f", {_bounded(spend.usd_until_termination, spend.quote)} more until termination in {left}"
        lines.append(
            f"• `{qr.name}` ({qr.accelerator_type}, {qr.provisioning_model}, {qr.zone}): "
            f"{burn_text(spend)}{rest}" + (f" _({spend.quote.used})_" if spend.quote.used else "")
        )
    without = f"{unpriced} without any price, not counted" if unpriced else ""
    if priced + unpriced == 0:
        lines.append("none running")
    elif priced == 0:
        lines.append(f"*Total* unknown: {without}")
    else:
        lines.append(
            f"*Total* {burn_total(spent, rate, bounded)}"
            + (f" ({priced} priced; {without})" if without else "")
        )
    lines += [f":red_circle: `{zone}`: {err.message}" for zone, err in sorted(listing.errors.items())]
    if quotes:
        lines.append(f"_Prices: {_sources_of(quotes)}._")
    return "\n".join(lines)


def config_kind(word: str) -> str:
    """gcloud, gke or startup."""
    if word not in ("gcloud", "gke", "startup"):
        raise ValueError(f"{word!r} is not one of gcloud, gke, startup")
    return word


@registry.command(
    "tpu config",
    "The equivalent gcloud command, GKE manifest or startup script for the current settings",
    Param("kind", "gcloud, gke or startup", kind=config_kind, required=True, metavar="gcloud|gke|startup"),
)
def tpu_config(ctx: Context, kind: str) -> Reply:
    """Configs for the current settings; secrets appear only as names (Secret Manager, Kubernetes Secret)."""
    s = ctx.services.settings
    startup = startup_config(s)
    if kind == "gcloud":
        text = deploy.gcloud_command(
            s.tpu_primary,
            s.tpu_zones[0],
            s.gcp_project,
            s.tpu_accelerator_type,
            s.tpu_runtime_version,
            "flex-start",
            timedelta(hours=4),
        )
        # The command's --metadata-from-file names startup.sh: it goes with it.
        script = ("startup.sh", deploy.startup_script(startup))
        return deploy_file(text, "create.sh", s.hf_token_secret, beside=script)
    if kind == "gke":
        body, filename = deploy.gke_manifest(startup, s.tpu_accelerator_type), "vllm-gke.yaml"
    else:
        body, filename = deploy.startup_script(startup), "startup.sh"
    return deploy_file(body, filename, s.hf_token_secret)
