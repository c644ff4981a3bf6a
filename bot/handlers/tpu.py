"""`/tpu` read-only commands: list, describe, status."""

from __future__ import annotations

import logging
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import replace
from datetime import datetime
from typing import Any, TypeVar
from urllib.parse import urlsplit

from bot.commands import ChatTool, Param, registry, resource_name, zone_name
from bot.context import Context
from bot.diagnosis import (
    deployment_of,
    diagnosis_text,
    needs_listing,
    resource_diagnosis,
    serving_verdict,
)
from bot.handlers.formats import metrics_lines
from bot.render import Reply, ago, blocks_reply, context, divider, header, human_duration, section, utc
from bot.services import Services
from ops.endpoint import Endpoint
from ops.errors import OpsError
from ops.faults import Deployment
from ops.metrics import MetricsSummary
from ops.tpu import NodeInfo, QueuedResourceInfo, ZoneListing
from ops.vllm import HealthCheck, ModelCard, VllmClient

log = logging.getLogger(__name__)
T = TypeVar("T")

STATE_ICONS = {
    "ACTIVE": ":large_green_circle:",
    "READY": ":large_green_circle:",
    "PROVISIONING": ":large_blue_circle:",
    "CREATING": ":large_blue_circle:",
    "ACCEPTED": ":hourglass:",
    "WAITING_FOR_RESOURCES": ":hourglass:",
    "FAILED": ":red_circle:",
    "SUSPENDING": ":large_orange_circle:",
    "SUSPENDED": ":large_orange_circle:",
    "PREEMPTED": ":large_orange_circle:",
    "DELETING": ":white_circle:",
    "STOPPED": ":white_circle:",
}


def _icon(state: str) -> str:
    return STATE_ICONS.get(state, ":grey_question:")


def resource_line(qr: QueuedResourceInfo, now: datetime) -> str:
    """One queued resource as a markdown paragraph: name, zone, state, type, model, age, nodes, time left."""
    state = f"{_icon(qr.state)} {qr.state}" + (f" (by {qr.state_initiator})" if qr.state_initiator else "")
    parts = [
        f"*{qr.name}* · `{qr.zone}` · {state}",
        f"{qr.accelerator_type or '?'} · {qr.provisioning_model} · created {ago(qr.create_time, now)}",
    ]
    left = qr.time_left(now)
    if left is not None:
        parts.append(f"terminates in {human_duration(left)} ({utc(qr.termination_time)})")
    elif qr.valid_until is not None and qr.state in ("WAITING_FOR_RESOURCES", "ACCEPTED"):
        parts.append(
            f"request valid until {utc(qr.valid_until)} ({human_duration(qr.valid_until - now)} left)"
        )
    for node in qr.nodes:
        parts.append(f"node `{node.name}` {_icon(node.state)} {node.state} · {_ips(node)}")
    if not qr.nodes and qr.node_ids:
        parts.append("node " + ", ".join(f"`{n}`" for n in qr.node_ids) + ": not created")
    if qr.error:
        parts.append(f":warning: {qr.error}")
    if qr.preempted:
        parts.append(preempted_line(qr))
    diagnosis = resource_diagnosis(qr, Deployment())
    if diagnosis and diagnosis.findings and qr.state != "FAILED" and not qr.preempted:  # shown above
        parts.append(f":warning: {diagnosis.findings[0].conclusion}")
    return "\n".join(parts)


def preempted_line(qr: QueuedResourceInfo) -> str:
    """What a spot preemption means for `qr` and the way out (see `QueuedResourceInfo.preempted`)."""
    return (
        ":warning: spot capacity preempted by Google: the node is gone and a reset cannot bring it back; "
        f"`/tpu delete {qr.name} --zone {qr.zone}` then `/tpu create` (or `/tpu ensure` for the primary)"
    )


def _ips(node: NodeInfo) -> str:
    internal = ", ".join(node.internal_ips) or "-"
    external = ", ".join(node.external_ips) or "none"
    return f"IP {internal} (external {external})"


def _zone_errors(listing: ZoneListing) -> list[str]:
    return [
        f":red_circle: `{zone}`: {err.message}" + (f" ({err.hint})" if err.hint else "")
        for zone, err in sorted(listing.errors.items())
    ]


@registry.command(
    "tpu list",
    "Queued resources and their nodes in the watched zones",
    Param("zone", "only this zone", flag="--zone", kind=zone_name, metavar="Z"),
    Param("all_zones", "every zone of the project", flag="--all-zones", switch=True),
    exclusive=(("zone", "all_zones"),),
    chat_tool=ChatTool("list", "Queued resources and nodes in the watched zones"),
)
def tpu_list(ctx: Context, zone: str | None, all_zones: bool) -> Reply:
    """List queued resources in one zone, the watched zones, or every zone of the project."""
    tpu = ctx.services.tpu
    zones = [zone] if zone else tpu.list_zones() if all_zones else ctx.services.settings.tpu_zones
    listing = tpu.list_queued_resources(zones)
    now = ctx.services.now()
    title = f"Queued resources in {len(zones)} zone{'s' if len(zones) != 1 else ''}"
    return blocks_reply([header(title), *_listing_blocks(listing, zones, now)])


@registry.command(
    "tpu describe",
    "Everything about one queued resource: state data, nodes, health, runtime",
    Param("name", "queued resource name", kind=resource_name, required=True, metavar="NAME"),
    Param("zone", "zone to look in (default: the watched zones)", flag="--zone", kind=zone_name, metavar="Z"),
    Param("all_zones", "search every zone of the project", flag="--all-zones", switch=True),
    exclusive=(("zone", "all_zones"),),
    chat_tool=ChatTool("describe", "Everything about one queued resource", params=("name",)),
)
def tpu_describe(ctx: Context, name: str, zone: str | None, all_zones: bool) -> Reply:
    """Describe one queued resource found in `zone`, the watched zones, or any zone of the project."""
    tpu = ctx.services.tpu
    zones = [zone] if zone else tpu.list_zones() if all_zones else ctx.services.settings.tpu_zones
    qr = tpu.get_queued_resource(name, zones)
    now = ctx.services.now()
    lines = [
        f"*State* {_icon(qr.state)} {qr.state}"
        + (f", initiated by {qr.state_initiator}" if qr.state_initiator else ""),
        f"*Zone* `{qr.zone}` · *accelerator* {qr.accelerator_type} · *runtime* {qr.runtime_version or '-'}",
        f"*Provisioning* {qr.provisioning_model}"
        + (f", max run duration {human_duration(qr.max_run_duration)}" if qr.max_run_duration else ""),
        f"*Created* {utc(qr.create_time)} ({ago(qr.create_time, now)})",
    ]
    if qr.termination_time:
        lines.append(f"*Terminates* {utc(qr.termination_time)} (in {human_duration(qr.time_left(now))})")
    if qr.valid_until:
        lines.append(f"*Valid until* {utc(qr.valid_until)}")
    if qr.error:
        lines.append(f"*Error* {qr.error}")
    if qr.preempted:
        lines.append(preempted_line(qr))
    blocks = [header(f"Queued resource {qr.name}"), section("\n".join(lines))]
    for node in qr.nodes:
        blocks.append(section(_node_details(node, now)))
    if not qr.nodes:
        ids = ", ".join(qr.node_ids) or "none"
        blocks.append(context(f"Nodes: {ids} (no node exists in state {qr.state})."))
    diagnosis = resource_diagnosis(qr, deployment_of(ctx.services, qr))
    if diagnosis is not None and needs_listing(diagnosis):  # e.g. quota: name what holds it
        listed = tpu.list_queued_resources(ctx.services.settings.tpu_zones).resources
        diagnosis = resource_diagnosis(qr, deployment_of(ctx.services, qr, listed))
    if diagnosis is not None:
        blocks.append(section(diagnosis_text(diagnosis, heading="Diagnosis")))
    return blocks_reply(blocks)


def _node_details(node: NodeInfo, now: datetime) -> str:
    health = node.health or "unknown"
    if node.health_description:
        health += f": {node.health_description}"
    lines = [
        f"*Node* `{node.name}` {_icon(node.state)} {node.state} · health {health}",
        f"{node.accelerator_type} · runtime {node.runtime_version} · {_ips(node)}",
        f"created {utc(node.create_time)} ({ago(node.create_time, now)})",
    ]
    if node.termination_time:
        lines.append(f"terminates {utc(node.termination_time)}")
    return "\n".join(lines)


def _result(future: Future[T]) -> T | OpsError:
    """A source's value or the OpsError that stopped it; unexpected errors become a generic OpsError."""
    try:
        return future.result()
    except OpsError as exc:
        return exc
    except Exception:
        log.exception("status source failed")
        return OpsError("internal error while fetching this source", "see the bot's logs")


def _red(label: str, err: OpsError) -> str:
    return f":red_circle: *{label}*: {err.message}" + (f" _({err.hint})_" if err.hint else "")


@registry.command(
    "tpu status",
    "Dashboard: queued resources, nodes, vLLM endpoint, health, model, metrics",
    chat_tool=ChatTool("status", "Dashboard: queued resources, nodes, vLLM health, model and metrics"),
)
def tpu_status(ctx: Context) -> Reply:
    """Fetch every source concurrently; each one that fails shows one red line and the rest still show."""
    services = ctx.services
    # The shared fan-out pool runs tasks in submission order, so a source waiting on an earlier one (the
    # endpoint on the listing) never waits on a task that has no thread.
    pool = services.fanout
    listing_f = pool.submit(services.tpu.list_queued_resources, services.settings.tpu_zones)
    endpoint_f = pool.submit(services.endpoints.resolve, listing_f.result)
    health_f = pool.submit(_after, services, endpoint_f, VllmClient.health)
    models_f = pool.submit(_after, services, endpoint_f, VllmClient.models)
    metrics_f = pool.submit(_after, services, endpoint_f, VllmClient.metrics)
    listing, endpoint = _result(listing_f), _result(endpoint_f)
    health, models, metrics = _result(health_f), _result(models_f), _result(metrics_f)
    wedged = ""
    if isinstance(endpoint, Endpoint) and isinstance(health, HealthCheck):
        if isinstance(metrics, MetricsSummary):
            with services.vllm_at(endpoint) as client:
                wedged = serving_verdict(services, client, health, metrics)
        checked = _not_booting(health, endpoint, listing)
        if checked is not health:  # the other vLLM calls failed for the same reason: not "booting" either
            models, metrics = _not_ready(models), _not_ready(metrics)
        health = checked
    now = services.now()
    blocks = [header("TPU / vLLM status")]
    blocks += _listing_blocks(listing, services.settings.tpu_zones, now)
    blocks.append(divider())
    blocks.append(section(_vllm_status(endpoint, health, models, metrics)))
    if wedged:
        blocks.append(section(f":red_circle: *{wedged}*"))
    blocks.append(context(f"Project `{services.settings.gcp_project}` · {utc(now)}"))
    return blocks_reply(blocks)


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


def _not_ready(value: T | OpsError) -> T | OpsError:
    if isinstance(value, OpsError):
        return OpsError(value.message, "its node is not READY (see /health above)", backend=value.backend)
    return value


def _after(services: Services, endpoint_f: Future[Endpoint], call: Callable[[VllmClient], T]) -> T:
    """Run `call` on a vLLM client once the endpoint is known (its failure propagates)."""
    with services.vllm_at(endpoint_f.result()) as client:
        return call(client)


def _listing_blocks(listing: ZoneListing | OpsError, zones: list[str], now: datetime) -> list[dict[str, Any]]:
    """Queued resources, then one red line per zone that failed; "none" only for zones that answered."""
    if isinstance(listing, OpsError):
        return [section(_red("Queued resources", listing))]
    blocks = [section(resource_line(qr, now)) for qr in listing.resources]
    answered = [zone for zone in zones if zone not in listing.errors]
    if not listing.resources and answered:
        blocks.append(section(f"No queued resources in {', '.join(answered)}."))
    errors = _zone_errors(listing)
    if errors:
        blocks.append(section("\n".join(errors)))
    return blocks


def _vllm_status(
    endpoint: Endpoint | OpsError,
    health: HealthCheck | OpsError,
    models: list[ModelCard] | OpsError,
    metrics: MetricsSummary | OpsError,
) -> str:
    if isinstance(endpoint, OpsError):
        return _red("vLLM endpoint", endpoint)
    lines = [f"*vLLM* `{endpoint.url}` _({endpoint.source})_"]
    if isinstance(health, OpsError):
        lines.append(_red("/health", health))
    else:
        icon = {"ready": ":large_green_circle:", "not-vllm": ":information_source:"}.get(
            health.state, ":red_circle:"
        )
        detail = "" if health.state == "ready" else f": {health.detail}"
        lines.append(f"{icon} /health {health.state} ({health.latency_s * 1000:.0f} ms){detail}")
    if isinstance(models, OpsError):
        lines.append(_red("models", models))
    else:
        lines.append("*Model* " + ", ".join(f"`{m.id}` (max_model_len {m.max_model_len})" for m in models))
    not_vllm = not isinstance(health, OpsError) and health.state == "not-vllm"
    if isinstance(metrics, OpsError):
        if not not_vllm:  # /metrics is vLLM's own: its absence is said once, in the /health line
            lines.append(_red("metrics", metrics))
    else:
        lines += metrics_lines(metrics)
    return "\n".join(lines)
