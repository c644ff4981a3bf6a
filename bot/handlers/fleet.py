"""`/fleet`: every deployment in one message (bot/deployments.py).

Each deployment's sources (queued resources, vLLM /health and /metrics, open alerts) are fetched at the
same time as every other deployment's, so the message takes as long as its slowest source. A source that
fails shows one red line; the rest still show.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from bot.commands import registry
from bot.context import Context
from bot.handlers.tpu import STATE_ICONS
from bot.render import (
    Block,
    Reply,
    blocks_reply,
    channel_link,
    context,
    divider,
    header,
    human_duration,
    section,
    utc,
)
from bot.services import Services
from ops.alerts import AlertLedger, LedgerRow
from ops.cost import burn
from ops.endpoint import Endpoint
from ops.errors import OpsError
from ops.metrics import MetricsSummary
from ops.tpu import QueuedResourceInfo, ZoneListing
from ops.vllm import HealthCheck

log = logging.getLogger(__name__)

# Sources per deployment fetched at once: the listing, then /health and /metrics once the endpoint is known,
# and its open alerts.
_SOURCES = 4
OPEN_ALERTS_DAYS = 7  # as `/alerts list`


@dataclass(frozen=True)
class Snapshot:
    """What `/fleet` learned of one deployment; each source is its value or the OpsError that stopped it."""

    name: str
    services: Services
    listing: ZoneListing | OpsError
    endpoint: Endpoint | OpsError
    health: HealthCheck | OpsError
    metrics: MetricsSummary | OpsError
    alerts: list[LedgerRow] | OpsError


def _value(future: Future[Any]) -> Any:
    try:
        return future.result()
    except OpsError as exc:
        return exc
    except Exception:
        log.exception("fleet source failed")
        return OpsError("internal error while fetching this source", "see the bot's logs")


def snapshot(
    pool: ThreadPoolExecutor, name: str, services: Services, now: datetime
) -> Callable[[], Snapshot]:
    """Start fetching one deployment on `pool`; returns a function that waits for its Snapshot. Its open
    alerts are those of its own ledger (`AlertLedger` of deployment `name`) over the last 7 days."""
    listing_f = pool.submit(services.tpu.list_queued_resources, services.settings.tpu_zones)
    alerts_f = pool.submit(
        lambda: AlertLedger(services.store, name).open_alerts(since=now - timedelta(days=OPEN_ALERTS_DAYS))
    )
    endpoint_f = pool.submit(services.endpoints.resolve, listing_f.result)

    def on_vllm(call: str) -> object:
        with services.vllm_at(endpoint_f.result()) as client:
            return getattr(client, call)()

    health_f = pool.submit(on_vllm, "health")
    metrics_f = pool.submit(on_vllm, "metrics")

    def wait() -> Snapshot:
        return Snapshot(
            name,
            services,
            _value(listing_f),
            _value(endpoint_f),
            _value(health_f),
            _value(metrics_f),
            _value(alerts_f),
        )

    return wait


def _red(label: str, err: OpsError) -> str:
    return f":red_circle: *{label}*: {err.message}" + (f" _({err.hint})_" if err.hint else "")


def primary_of(listing: ZoneListing, primary: str) -> QueuedResourceInfo | None:
    """The deployment's primary queued resource (TPU_PRIMARY), else its first ACTIVE one, else None."""
    by_name = next((qr for qr in listing.resources if qr.name == primary), None)
    return by_name or next((qr for qr in listing.resources if qr.state == "ACTIVE"), None)


def midnight(now: datetime) -> datetime:
    """00:00 UTC of `now`'s day."""
    return now.replace(hour=0, minute=0, second=0, microsecond=0)


def spend_since(qr: QueuedResourceInfo, now: datetime, since: datetime) -> tuple[float, float]:
    """(USD per hour, USD accrued from `since` to `now`) of an ACTIVE queued resource.

    Uses `ops.cost.burn` (its billing-start approximation and price table) over the part of the window the
    QR has been running.

    Raises:
        BadInput: as `ops.cost.burn` (not ACTIVE, no sourced price).
    """
    spend = burn(qr, now)
    start = max(spend.start or since, since)
    hours = max(0.0, (now - start).total_seconds() / 3600.0)
    return spend.usd_per_hour, spend.usd_per_hour * hours


def cost_today(qr: QueuedResourceInfo, now: datetime) -> tuple[float, float]:
    """(USD per hour, USD since 00:00 UTC today) of an ACTIVE queued resource; raises as `spend_since`."""
    return spend_since(qr, now, midnight(now))


def _unreadable(listing: ZoneListing) -> OpsError | None:
    """The first zone's error when every zone failed (nothing could be listed), else None."""
    if listing.errors and not listing.resources:
        return next(iter(listing.errors.values()))
    return None


def _resource_line(snap: Snapshot, now: datetime) -> str:
    if isinstance(snap.listing, OpsError):
        return _red("Queued resources", snap.listing)
    failed_all = _unreadable(snap.listing)
    if failed_all is not None:
        return _red("Queued resources", failed_all)
    s = snap.services.settings
    qr = primary_of(snap.listing, s.tpu_primary)
    failed = [f"`{zone}`" for zone in snap.listing.errors]
    missing = f" · :warning: zones not answering: {', '.join(failed)}" if failed else ""
    if qr is None:
        return f":white_circle: primary `{s.tpu_primary}` not found in {', '.join(s.tpu_zones)}{missing}"
    icon = STATE_ICONS.get(qr.state, ":grey_question:")
    kind = f"{qr.accelerator_type or '?'} {qr.provisioning_model}"
    parts = [f"{icon} `{qr.name}` {qr.state} · `{qr.zone}` · {kind}"]
    left = qr.time_left(now)
    if left is not None:
        parts.append(f"{human_duration(left)} left")
    elif qr.valid_until is not None and qr.state in ("WAITING_FOR_RESOURCES", "ACCEPTED"):
        parts.append(f"valid until {utc(qr.valid_until)}")
    for node in qr.nodes:
        health = f" {node.health}" if node.health else ""
        parts.append(f"node {STATE_ICONS.get(node.state, ':grey_question:')} {node.state}{health}")
    if not qr.nodes and qr.state == "ACTIVE":
        parts.append(":warning: no node")
    return " · ".join(parts) + missing


def _vllm_line(snap: Snapshot) -> str:
    model = snap.services.settings.vllm_model
    if isinstance(snap.endpoint, OpsError):
        return f"*vLLM* `{model}` · " + _red("endpoint", snap.endpoint)
    parts = [f"*vLLM* `{model}`"]
    if isinstance(snap.health, OpsError):
        parts.append(_red("/health", snap.health))
    else:
        icon = ":large_green_circle:" if snap.health.state == "ready" else ":red_circle:"
        parts.append(f"{icon} {snap.health.state} ({snap.health.latency_s * 1000:.0f} ms)")
    if isinstance(snap.metrics, OpsError):
        parts.append(_red("metrics", snap.metrics))
    else:
        m = snap.metrics
        kv = "-" if m.kv_cache_usage is None else f"{m.kv_cache_usage:.0%}"
        running = "-" if m.running is None else f"{m.running:.0f}"
        waiting = "-" if m.waiting is None else f"{m.waiting:.0f}"
        parts.append(f"running {running} · waiting {waiting} · KV cache {kv}")
    return " · ".join(parts)


def _cost_line(snap: Snapshot, now: datetime) -> str | None:
    if isinstance(snap.listing, OpsError) or _unreadable(snap.listing) is not None:
        return "*Cost* unknown: the queued resources could not be read"
    partial = " (some zones did not answer)" if snap.listing.errors else ""
    active = [qr for qr in snap.listing.resources if qr.state == "ACTIVE"]
    if not active:
        return f"*Cost* nothing ACTIVE: $0/h{partial}"
    priced: list[tuple[float, float]] = []
    unpriced: list[str] = []
    for qr in active:
        try:
            priced.append(cost_today(qr, now))
        except OpsError as exc:
            unpriced.append(f"`{qr.name}` not priced: {exc.message}")
    if not priced:  # never "$0.00/h" for a resource that bills at a price we do not know
        return " · ".join([f"*Cost* unknown{partial}", *unpriced])
    line = f"*Cost* ${sum(c[0] for c in priced):,.2f}/h · ${sum(c[1] for c in priced):,.2f} today (UTC)"
    if unpriced:
        line += " (priced resources only)"
    return " · ".join([line + partial, *unpriced])


def _alerts_line(snap: Snapshot) -> str:
    if isinstance(snap.alerts, OpsError):
        return _red("Alerts", snap.alerts)
    mine = snap.alerts
    if not mine:
        return "*Alerts* none open"
    newest = mine[-1]
    return f"*Alerts* {len(mine)} open · newest: {newest.text.splitlines()[0][:150]}"


def deployment_blocks(snap: Snapshot, now: datetime) -> list[Block]:
    """One deployment: its name, project and channels, then resource, vLLM, cost and alert lines."""
    s = snap.services.settings
    lines = [_resource_line(snap, now), _vllm_line(snap)]
    cost = _cost_line(snap, now)
    if cost:
        lines.append(cost)
    lines.append(_alerts_line(snap))
    return [section(f"*{snap.name}* · project `{s.gcp_project}`\n" + "\n".join(lines))]


@registry.command("fleet", "Every deployment: queued resource, vLLM health and load, cost today, alerts")
def fleet(ctx: Context) -> Reply:
    """All deployments' sources fetched concurrently; each failing source is one red line."""
    deployments = ctx.fleet.services if ctx.fleet is not None else {ctx.deployment: ctx.services}
    now = ctx.services.now()
    workers = _SOURCES * len(deployments)
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="fleet") as pool:
        waits = [snapshot(pool, name, services, now) for name, services in deployments.items()]
        snaps = [wait() for wait in waits]
    channels = ctx.fleet.channels if ctx.fleet is not None else {}
    blocks: list[Block] = [header(f"Fleet: {len(snaps)} deployment(s)")]
    for snap in snaps:
        blocks += deployment_blocks(snap, now)
        bound = [channel_link(channel) for channel, name in channels.items() if name == snap.name]
        if bound:
            blocks.append(context("Bound to " + ", ".join(bound)))
        blocks.append(divider())
    blocks.append(context(utc(now)))
    return blocks_reply(blocks)


def fleet_spend(ctx: Context, since: datetime, label: str) -> Reply:
    """Spend of every deployment's ACTIVE queued resources from `since` to now (USD), listed concurrently.

    Queued resources deleted before now are no longer listed by the TPU API, so their spend is not counted;
    the reply says so.
    """
    deployments = ctx.fleet.services if ctx.fleet is not None else {ctx.deployment: ctx.services}
    now = ctx.services.now()
    with ThreadPoolExecutor(max_workers=len(deployments), thread_name_prefix="spend") as pool:
        futures = {
            name: pool.submit(services.tpu.list_queued_resources, services.settings.tpu_zones)
            for name, services in deployments.items()
        }
        listings = {name: _value(future) for name, future in futures.items()}
    total = 0.0
    unpriced = False
    lines: list[str] = []
    for name, listing in listings.items():
        failed = listing if isinstance(listing, OpsError) else _unreadable(listing)
        if failed is not None:
            lines.append(_red(name, failed))
            continue
        items: list[str] = [f":warning: zone `{zone}` did not answer" for zone in listing.errors]
        subtotal = 0.0
        for qr in (qr for qr in listing.resources if qr.state == "ACTIVE"):
            try:
                per_hour, usd = spend_since(qr, now, since)
            except OpsError as exc:
                items.append(f"`{qr.name}` not priced: {exc.message}")
                unpriced = True
                continue
            subtotal += usd
            kind = f"{qr.accelerator_type} {qr.provisioning_model}"
            items.append(f"`{qr.name}` ({kind}) ${usd:,.2f} at ${per_hour:,.2f}/h")
        total += subtotal
        lines.append(
            f"*{name}*: *${subtotal:,.2f}*" + ("\n" + "\n".join(f"• {i}" for i in items) if items else "")
        )
    return blocks_reply(
        [
            header(f"TPU spend {label}"),
            section("\n".join(lines)),
            section(
                f"*Total* ${total:,.2f} since {utc(since)}"
                + (" (priced resources only: see the ones not priced above)" if unpriced else "")
            ),
            context(
                "From the ACTIVE queued resources' lifetimes and the price table (see `/tpu cost`); queued "
                "resources deleted before now are not counted."
            ),
        ]
    )
