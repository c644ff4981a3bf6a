"""Queued resources and the status dashboard as Slack text and blocks: the one-paragraph resource line (/tpu
list, /tpu status and every change's preview and outcome), /tpu describe's details, /tpu status's vLLM
section, and capacity (the /tpu zones table, a capacity search's preview, progress and result). Inputs are
the ops types; a source that failed arrives as its OpsError and shows one red line."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime

from bot.oncall.followup import pending_block
from bot.shared.diagnosis import resource_diagnosis
from bot.slack.render import (
    Block,
    Reply,
    ago,
    blocks_reply,
    cancel_button,
    context,
    divider,
    header,
    human_duration,
    section,
    utc,
)
from bot.views.findings import diagnosis_text, identity_line
from bot.views.metrics import metrics_lines
from ops.diagnosis.engine import Diagnosis
from ops.diagnosis.families import FixFacts
from ops.diagnosis.notices import can_start_early, maintenance_finding
from ops.errors import OpsError
from ops.tpu.maintenance import window_text
from ops.tpu.model import NodeInfo, QueuedResourceInfo, UpcomingMaintenance, ZoneListing, primary_among
from ops.vllm.endpoint import Endpoint
from ops.vllm.metrics import MetricsSummary
from ops.vllm.server import HealthCheck, ModelCard, ServerIdentity

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


def resource_line(qr: QueuedResourceInfo, now: datetime, *, primary: QueuedResourceInfo | None = None) -> str:
    """One queued resource as a markdown paragraph: name (marked "(primary)" when it is the deployment's
    primary `primary`, by zone and name; "(not the primary, which is in `Z`)" when it only shares its
    name), zone, state, type, model, age, nodes, time left, and the first conclusion of the fault rules
    when its state does not already say it."""
    state = f"{_icon(qr.state)} {qr.state}" + (f" (by {qr.state_initiator})" if qr.state_initiator else "")
    parts = [
        f"*{qr.name}*{_primary_mark(qr, primary)} · `{qr.zone}` · {state}",
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
        if node.maintenance is not None:
            parts.append(maintenance_line(node.maintenance, now))
    if not qr.nodes and qr.node_ids:
        parts.append("node " + ", ".join(f"`{n}`" for n in qr.node_ids) + ": not created")
    if qr.error:
        parts.append(f":warning: {qr.error}")
    if qr.preempted:
        parts.append(preempted_line(qr))
    diagnosis = resource_diagnosis(qr, FixFacts())
    if diagnosis and diagnosis.findings and qr.state != "FAILED" and not qr.preempted:  # shown above
        parts.append(f":warning: {diagnosis.findings[0].conclusion}")
    return "\n".join(parts)


def _primary_mark(qr: QueuedResourceInfo, primary: QueuedResourceInfo | None) -> str:
    if primary is None or qr.name != primary.name:
        return ""
    if qr.zone == primary.zone:
        return " (primary)"
    return f" (not the primary, which is in `{primary.zone}`)"


def preempted_line(qr: QueuedResourceInfo) -> str:
    """What a spot preemption means for `qr` and the way out (see `QueuedResourceInfo.preempted`)."""
    return (
        ":warning: spot capacity preempted by Google: the node is gone and a reset cannot bring it back; "
        f"`/tpu delete {qr.name} --zone {qr.zone}` then `/tpu create` (or `/tpu ensure` for the primary)"
    )


def maintenance_line(maintenance: UpcomingMaintenance, now: datetime) -> str:
    """One line for a node's announced host maintenance: its type, whether it is under way or how soon it
    starts, and its window (the TPU API's `upcomingMaintenance`)."""
    kind = (maintenance.kind or "host").lower()
    if maintenance.underway(now):
        when = "under way"
    elif maintenance.window_start is not None:
        when = f"in {human_duration(maintenance.window_start - now)}"
    else:
        when = maintenance.status or "announced"
    return f":construction: {kind} host maintenance {when} ({window_text(maintenance)})"


def _ips(node: NodeInfo) -> str:
    internal = ", ".join(node.internal_ips) or "-"
    external = ", ".join(node.external_ips) or "none"
    return f"IP {internal} (external {external})"


def _zone_errors(listing: ZoneListing) -> list[str]:
    return [
        f":red_circle: `{zone}`: {err.message}" + (f" ({err.hint})" if err.hint else "")
        for zone, err in sorted(listing.errors.items())
    ]


def _red(label: str, err: OpsError) -> str:
    return f":red_circle: *{label}*: {err.message}" + (f" _({err.hint})_" if err.hint else "")


def listing_blocks(
    listing: ZoneListing | OpsError, zones: list[str], now: datetime, primary: str = ""
) -> list[Block]:
    """Queued resources, the deployment's primary (TPU_PRIMARY: one resource, `primary_among` the listing)
    first and marked, the rest in the listing's order (another of the primary's name marked as not the
    primary); then one red line per zone that failed; "none" only for zones that answered."""
    if isinstance(listing, OpsError):
        return [section(_red("Queued resources", listing))]
    chosen = primary_among(listing.resources, primary, zones)
    ordered = sorted(listing.resources, key=lambda qr: qr is not chosen)  # stable: keeps (zone, name)
    blocks = [section(resource_line(qr, now, primary=chosen)) for qr in ordered]
    answered = [zone for zone in zones if zone not in listing.errors]
    if not listing.resources and answered:
        blocks.append(section(f"No queued resources in {', '.join(answered)}."))
    errors = _zone_errors(listing)
    if errors:
        blocks.append(section("\n".join(errors)))
    return blocks


def list_blocks(listing: ZoneListing, zones: list[str], now: datetime, primary: str = "") -> list[Block]:
    """/tpu list: a header naming how many zones were read, then `listing_blocks` (`primary` first)."""
    title = f"Queued resources in {len(zones)} zone{'s' if len(zones) != 1 else ''}"
    return [header(title), *listing_blocks(listing, zones, now, primary)]


def describe_blocks(qr: QueuedResourceInfo, diagnosis: Diagnosis | None, now: datetime) -> list[Block]:
    """/tpu describe: the queued resource's state data, one section per node (or why there is none), then
    the diagnosis when there is one."""
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
        if node.maintenance is not None:
            blocks.append(section(_maintenance_details(qr, node, node.maintenance, now)))
    if not qr.nodes:
        ids = ", ".join(qr.node_ids) or "none"
        blocks.append(context(f"Nodes: {ids} (no node exists in state {qr.state})."))
    if diagnosis is not None:
        blocks.append(section(diagnosis_text(diagnosis, heading="Diagnosis")))
    return blocks


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


def _maintenance_details(
    qr: QueuedResourceInfo, node: NodeInfo, maintenance: UpcomingMaintenance, now: datetime
) -> str:
    """/tpu describe's maintenance section of a node: the announced facts, then the catalogue's cause and
    fix for them (`ops.diagnosis.notices.maintenance_finding`)."""
    early = "yes" if can_start_early(node, maintenance) else "no"
    lines = [
        f"*Host maintenance* on `{node.name}`: {maintenance.kind or 'type not given'}, "
        f"{maintenance.status or 'status not given'} · {window_text(maintenance)}",
        maintenance_line(maintenance, now)
        + f" · can be started early: {early}"
        + (f" · latest start {utc(maintenance.latest_start)}" if maintenance.latest_start else ""),
    ]
    finding = maintenance_finding(qr, node)
    if finding is not None:
        lines += [finding.cause, f"*Fix:* {finding.fix}"]
    return "\n".join(lines)


@dataclass(frozen=True)
class Status:
    """What /tpu status gathered: each source's value, or the OpsError that stopped it.

    `wedged` is the serving verdict ("" when vLLM serves or was not checked); `zones` the zones listed;
    `primary` the deployment's TPU_PRIMARY (listed first); `alert_reach` the lines saying alerts cannot
    reach their channel (`bot.shared.diagnosis.refusal_lines`), shown first; `identity` who answers on the
    vLLM port (None: not checked); `departed` what became of the endpoint last used when none is found now
    (`bot.shared.fleet_status.departed_line`; "" otherwise).
    """

    listing: ZoneListing | OpsError
    zones: list[str]
    endpoint: Endpoint | OpsError
    health: HealthCheck | OpsError
    models: list[ModelCard] | OpsError
    metrics: MetricsSummary | OpsError
    wedged: str
    project: str
    now: datetime
    primary: str = ""
    alert_reach: tuple[str, ...] = ()
    identity: ServerIdentity | None = None
    departed: str = ""


def status_blocks(status: Status) -> list[Block]:
    """/tpu status: queued resources, the vLLM endpoint, /health, model and metrics, the serving verdict."""
    blocks = [header("TPU / vLLM status"), *(section(line) for line in status.alert_reach)]
    blocks += listing_blocks(status.listing, status.zones, status.now, status.primary)
    blocks.append(divider())
    vllm = _vllm_status(status.endpoint, status.health, status.models, status.metrics)
    if status.identity is not None and status.identity.other:  # the lines below are another server's
        vllm = vllm.replace("\n", f"\n{identity_line(status.identity)}\n", 1) if "\n" in vllm else vllm
    blocks.append(section(vllm))
    if status.departed:
        blocks.append(section(status.departed))
    if status.wedged:
        blocks.append(section(f":red_circle: *{status.wedged}*"))
    blocks.append(context(f"Project `{status.project}` · {utc(status.now)}"))
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


_SEARCH_ICONS = {
    "ACTIVE": ":large_green_circle:",
    "deleted": ":wastebasket:",
    "requesting": ":arrow_right:",
    "pending": ":white_circle:",
    "not": ":white_circle:",
    "cancelled": ":no_entry_sign:",
    "failed": ":red_circle:",
    "skipped": ":fast_forward:",
    "leftover": ":warning:",
    "unresolved": ":grey_question:",
}


def _search_icon(state: str) -> str:
    """An icon for a zone's search state: its first word decides; queue states get an hourglass."""
    return _SEARCH_ICONS.get(state.split(":")[0].split(" ")[0], ":hourglass:")


def zones_table(title: str, lines: list[str], quota_ids: tuple[str, str], note: str) -> Reply:
    """`/tpu zones`: a header `title`, one line per zone (mrkdwn), and the quota ids (standard, preemptible)
    the table was read from, with `note` (what it leaves out, "" when nothing)."""
    standard_id, preemptible_id = quota_ids
    return blocks_reply(
        [
            header(title),
            section("\n".join(lines)),
            context(
                "Quota ids "
                + f"`{standard_id}` / `{preemptible_id}`; flex-start and spot draw on preemptible quota, "
                "on-demand and reserved on the other. ✅ means nothing known refuses it, not that capacity "
                "is free." + note
            ),
        ]
    )


def find_preview(lines: list[str]) -> Reply:
    """`/tpu find`'s preview: what the search will request where, and its warnings, in one section."""
    return blocks_reply([section("\n".join(lines))])


def search_progress(title: str, states: Mapping[str, str], operation_id: str | None) -> Reply:
    """A running search: one line per zone with its state's icon, and a Cancel button for `operation_id`
    (None: the search ended, no button)."""
    lines = [f"{_search_icon(state)} `{zone}` {state}" for zone, state in states.items()]
    blocks = [header(title), section("\n".join(lines) or "starting…")]
    if operation_id is not None:
        blocks.append(cancel_button(operation_id))
    return blocks_reply(blocks)


def search_result(
    title: str, states: Mapping[str, str], outcome: str, unresolved: Mapping[str, str]
) -> Reply:
    """The ended search: the zones, the `outcome` in words, then one pending line per unresolved request
    (request id -> what is not known; `bot.oncall.followup.refresh` edits it later)."""
    reply = search_progress(title, states, None)
    pending = [pending_block(request_id, text) for request_id, text in unresolved.items()]
    return blocks_reply([reply.blocks[0], section(outcome), *pending, *reply.blocks[1:]])
