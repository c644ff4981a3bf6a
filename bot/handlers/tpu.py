"""`/tpu` read-only commands (list, describe, status) and `/fleet` (every deployment in one message, its
sources fetched at once by `bot.shared.fleet_status`). They gather the data;
`bot.views.tpu` and `bot.views.fleet` render it."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import replace
from typing import TypeVar
from urllib.parse import urlsplit

from bot.commands.context import Context
from bot.commands.registry import QUEUED_RESOURCE, ChatTool, Param, registry, zone_name
from bot.services import identify, settled
from bot.shared.diagnosis import deployment_of, needs_listing, refusal_lines, resource_diagnosis
from bot.shared.fleet_status import Snapshot, departed_line, snapshots
from bot.shared.hints import not_found_hint
from bot.shared.serving import not_serving
from bot.slack.render import Reply, blocks_reply, plural
from bot.views.fleet import fleet_view
from bot.views.tpu import Status, describe_blocks, list_blocks, status_blocks
from ops.alerts.outbox import AlertOutbox
from ops.errors import BadInput, NotFound, OpsError
from ops.tpu.model import ZoneListing
from ops.vllm.endpoint import Endpoint
from ops.vllm.metrics import MetricsSummary
from ops.vllm.server import (
    HealthCheck,
    ModelCard,
    ServerIdentity,
    VllmClient,
    serving_verdict,
)

T = TypeVar("T")
R = TypeVar("R")


@registry.command(
    "tpu list",
    "Queued resources and their nodes in the watched zones",
    Param.option("zone", "only this zone", zone_name, "Z"),
    Param.toggle("all_zones", "every zone of the project"),
    exclusive=(("zone", "all_zones"),),
    chat_tool=ChatTool(
        "list", "Queued resources and nodes in the watched zones", reads="the queued resources"
    ),
)
def tpu_list(ctx: Context, zone: str | None, all_zones: bool) -> Reply:
    """List queued resources in one zone, the watched zones, or every zone of the project.

    Raises:
        BadInput: `zone` is not a TPU location of the project (`ops.tpu.api.unknown_zone`, as every command
            refuses it).
    """
    tpu = ctx.services.tpu
    zones = [zone] if zone else tpu.list_zones() if all_zones else ctx.services.settings.tpu_zones
    listing = tpu.list_queued_resources(zones)
    if zone and isinstance(listing.errors.get(zone), BadInput):
        raise listing.errors[zone]
    primary = ctx.services.settings.tpu_primary
    return blocks_reply(list_blocks(listing, zones, ctx.services.now(), primary))


@registry.command(
    "tpu describe",
    "Everything about one queued resource: state data, nodes, health, runtime",
    QUEUED_RESOURCE,
    Param.option("zone", "zone to look in (default: the watched zones)", zone_name, "Z"),
    Param.toggle("all_zones", "search every zone of the project"),
    exclusive=(("zone", "all_zones"),),
    chat_tool=ChatTool(
        "describe", "Everything about one queued resource", params=("name",), reads="the state and error"
    ),
)
def tpu_describe(ctx: Context, name: str, zone: str | None, all_zones: bool) -> Reply:
    """Describe one queued resource found in `zone`, the watched zones (and the zones where the bot's own
    records say it made one of that name, e.g. a capacity search's winner outside TPU_ZONES), or any zone of
    the project."""
    tpu = ctx.services.tpu
    zones = [zone] if zone else tpu.list_zones() if all_zones else _watched_and_made(ctx, name)
    try:
        qr = tpu.get_queued_resource(name, zones)
    except NotFound as exc:
        if not all_zones:  # the hint from the listing just read: where it is, else every zone
            exc.hint = not_found_hint(ctx, name, "describe", zones)
        raise
    diagnosis = resource_diagnosis(qr, deployment_of(ctx.services, qr))
    if diagnosis is not None and needs_listing(diagnosis):  # e.g. quota: name what holds it
        listed = tpu.list_queued_resources(ctx.services.settings.tpu_zones).resources
        diagnosis = resource_diagnosis(qr, deployment_of(ctx.services, qr, listed))
    return blocks_reply(describe_blocks(qr, diagnosis, ctx.services.now()))


def _watched_and_made(ctx: Context, name: str) -> list[str]:
    """TPU_ZONES, then the zones where this bot created `name` and it was last known to exist (in-flight
    records "created", "kept" or "adopted", newest first)."""
    made = [
        record.zone
        for record in reversed(ctx.services.store.inflight(open_only=False))
        if record.name == name
        and record.project == ctx.services.settings.gcp_project
        and record.state in ("created", "kept", "adopted")
    ]
    return list(dict.fromkeys([*ctx.services.settings.tpu_zones, *made]))


def _result(future: Future[T]) -> T | OpsError:
    """A source's value or the OpsError that stopped it; unexpected errors become a generic OpsError."""
    return settled(future, "status source")


@registry.command(
    "tpu status",
    "Dashboard: queued resources, nodes, vLLM endpoint, health, model, metrics",
    chat_tool=ChatTool(
        "status", "Dashboard: queued resources, nodes, vLLM health, model and metrics", reads="the status"
    ),
)
def tpu_status(ctx: Context) -> Reply:
    """Fetch every source concurrently; each one that fails shows one red line and the rest still show."""
    services = ctx.services
    # The shared fan-out pool runs tasks in submission order, so a source waiting on an earlier one (the
    # endpoint on the listing) never waits on a task that has no thread.
    pool = services.fanout

    def on_vllm(call: Callable[[VllmClient], R]) -> R:
        """Run `call` on a vLLM client once the endpoint is known (its failure propagates)."""
        with services.vllm_at(endpoint_f.result()) as client:
            return call(client)

    listing_f = pool.submit(services.tpu.list_queued_resources, services.settings.tpu_zones)
    endpoint_f = pool.submit(services.endpoints.resolve, listing_f.result)
    health_f = pool.submit(on_vllm, VllmClient.health)
    models_f = pool.submit(on_vllm, VllmClient.models)
    metrics_f = pool.submit(on_vllm, VllmClient.metrics)

    def who_answers(client: VllmClient) -> ServerIdentity:
        health: HealthCheck | OpsError = _result(health_f)
        models: list[ModelCard] | OpsError = _result(models_f)
        return identify(services, client, endpoint_f.result(), health, models=models)

    identity_f = pool.submit(on_vllm, who_answers)
    listing, endpoint = _result(listing_f), _result(endpoint_f)
    health, models, metrics = _result(health_f), _result(models_f), _result(metrics_f)
    identity = _result(identity_f)
    wedged = ""
    if isinstance(endpoint, Endpoint) and isinstance(health, HealthCheck):
        if isinstance(metrics, MetricsSummary):
            with services.vllm_at(endpoint) as client:
                wedged = serving_verdict(client, ctx.services.probe, health, metrics)
        checked = _not_booting(health, endpoint, listing)
        if checked is not health:  # the other vLLM calls failed for the same reason: not "booting" either
            models, metrics = _not_ready(models), _not_ready(metrics)
        elif health.state in ("refused", "timeout"):  # the node is up: the container says which it is
            problem = not_serving(ctx)
            if problem is not None:
                hint = f" ({problem.hint})" if problem.hint else ""
                checked = replace(health, detail=f"{problem.message}{hint}")
                models, metrics = _not_ready(models, _SEE_HEALTH), _not_ready(metrics, _SEE_HEALTH)
        health = checked
    status = Status(
        listing, services.settings.tpu_zones, endpoint, health, models, metrics,
        wedged, services.settings.gcp_project, services.now(), services.settings.tpu_primary,
        tuple(refusal_lines(AlertOutbox(services.store, ctx.deployment))),
        identity if isinstance(identity, ServerIdentity) else None,
        departed_line(services) if isinstance(endpoint, OpsError) else "",
    )  # fmt: skip
    return blocks_reply(status_blocks(status))


def _not_booting(health: HealthCheck, endpoint: Endpoint, listing: ZoneListing | OpsError) -> HealthCheck:
    """A refused or timed-out /health on a node that is not READY (PREEMPTED, STOPPED, ...) is that node's
    state, never "booting"."""
    if health.state not in ("refused", "timeout") or isinstance(listing, OpsError):
        return health
    host = urlsplit(endpoint.url).hostname or ""
    for qr in listing.resources:
        for node in qr.nodes:
            if host in (*node.external_ips, *node.internal_ips) and node.state != "READY":
                detail = (
                    f"node `{node.name}` of `{qr.name}` is {node.state}, so vLLM is not booting there"
                    + (
                        ": it was preempted; /tpu ensure recreates the primary"
                        if node.state == "PREEMPTED"
                        else ""
                    )
                )
                return replace(health, detail=detail)
    return health


_SEE_HEALTH = "the container's state is above, beside /health"


def _not_ready(value: T | OpsError, hint: str = "its node is not READY (see /health above)") -> T | OpsError:
    if isinstance(value, OpsError):
        return OpsError(value.message, hint, backend=value.backend)
    return value


@registry.command("fleet", "Every deployment: queued resource, vLLM health and load, cost today, alerts")
def fleet(ctx: Context) -> Reply:
    """All deployments' sources fetched concurrently; each failing source is one red line."""
    deployments = ctx.fleet.services if ctx.fleet is not None else {ctx.deployment: ctx.services}
    now = ctx.services.now()
    snaps = snapshots(deployments, now)
    channels = ctx.fleet.channels if ctx.fleet is not None else {}
    return fleet_view(snaps, now, channels, _total_line(snaps))


def _total_line(snaps: list[Snapshot]) -> str:
    """Every deployment's cost summed: USD per hour and today (UTC), "at most" when some figure stands in
    for a missing price row; deployments that could not be listed or priced are named, never counted as $0."""
    spends = {snap.name: snap.spend for snap in snaps}
    unread = [name for name, spend in spends.items() if spend.error is not None]
    unpriced = sum(len(spend.unpriced) for spend in spends.values())
    bound = "at most " if any(spend.bounded for spend in spends.values()) else ""
    rate = sum(spend.usd_per_hour for spend in spends.values())
    today = sum(spend.usd for spend in spends.values())
    line = f"*Total* {bound}${rate:,.2f}/h · {bound}${today:,.2f} today (UTC)"
    if unpriced:
        line += f" · {plural(unpriced, 'resource')} without a price not counted"
    if unread:
        line += " · not counted (queued resources unreadable): " + ", ".join(f"`{n}`" for n in unread)
    return line
