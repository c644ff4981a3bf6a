"""`/tpu` commands that change infrastructure: create, delete, reset, start, stop, ensure.

Each one is declared `changes_infra`: the runner first shows its preview with a Confirm button and runs the
command only after an authorized click. Previews read the current state, so the confirmation shows exactly
what will happen (and the cost it starts).
"""

from __future__ import annotations

import hashlib
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime, timedelta

from bot.commands.context import Context
from bot.commands.registry import (
    ACCELERATOR_TYPE,
    QUEUED_RESOURCE,
    SEARCHED_ZONE,
    Param,
    Role,
    duration,
    int_range,
    model_id,
    registry,
    resource_name,
    runtime_version,
    timestamp,
    zone_name,
)
from bot.oncall.followup import watch
from bot.oncall.maintenance import planned_work
from bot.shared.hints import command_line, delete_line, has_running_nodes, not_found_hint
from bot.shared.safety import (
    check_pins,
    check_zones,
    create_labelled,
    current_pin,
    is_primary,
    now_text,
    one_operation,
    pin_of,
    pins_text,
)
from bot.shared.serving import VLLM_LOAD
from bot.shared.tpu_requests import MODEL_FLAGS, CreateArgs, create_spec, default_create_args
from bot.shared.zone_plan import (
    CapacityAsk,
    already_running,
    capacity_preview,
    remembering_refusals,
    starts_second,
)
from bot.slack.render import Reply, human_duration, utc
from bot.views.cost import create_spend_lines, per_hour, start_spend_lines, usd
from bot.views.lifecycle import change, create_unseen, created, ensure_preview, reset_requested
from bot.views.tpu import resource_line
from ops.cost import pricing as cost
from ops.errors import AlreadyExists, BadInput, NotFound, OpsError
from ops.tpu.model import LIVE_STATES, NodeInfo, QueuedResourceInfo, free_name, primary_among
from ops.vllm.endpoint import DEAD_NODE_STATES

OPERATION_TIMEOUT_S = 600.0

_CREATE_PARAMS = (
    QUEUED_RESOURCE,
    ACCELERATOR_TYPE,
    Param.option("zone", "zone (default: the first of TPU_ZONES)", zone_name, "Z"),
    Param.toggle("flex_start", "flex-start (the default): runs up to --max-run"),
    Param.option("max_run", "flex-start max run duration (default 4h, at most 7d)", duration, "D"),
    Param.toggle("spot", "spot: cheaper, may be preempted"),
    Param.toggle("on_demand", "on-demand (standard)"),
    Param.toggle("reserved", "from the project's reservation"),
    Param.option("valid_until", "give up if not provisioned within D", duration, "D"),
    Param.option("runtime", "TPU runtime version", runtime_version, "R"),
    Param.option("model", "model to serve", model_id, "M"),
    Param.option("tp", "tensor parallel size", int_range(1, 256), "N"),
    Param.option("max_model_len", "vLLM --max-model-len, tokens", int_range(256, 1 << 20), "L"),
    Param.toggle("allow_second", "go on although the primary is already ACTIVE (a second one bills too)"),
)


def _preview_create(ctx: Context, **kw: object) -> Reply:
    args = CreateArgs(**kw)  # type: ignore[arg-type]
    spec, startup = create_spec(ctx, args)
    check_zones(ctx, [spec.zone], spec.accelerator_type)
    try:
        existing = ctx.services.tpu.get_queued_resource(spec.name, [spec.zone])
    except NotFound:
        existing = None
    if existing is not None:
        raise AlreadyExists(
            f"queued resource {spec.name} already exists in {spec.zone} ({existing.state})",
            f"pick another name, or delete it first: `{delete_line(ctx, existing)}`",
        )
    hours = spec.max_run_duration.total_seconds() / 3600 if spec.max_run_duration else None
    ask = CapacityAsk(
        frozenset({spec.name}), spec.accelerator_type, spec.provisioning_model, (spec.zone,), 1, hours
    )
    preview = capacity_preview(ctx, ask, instead=f"`/tpu create {spec.name} --zone Z` with Z one of")
    twin = next((qr for qr in preview.running if qr.name == spec.name), None)
    if twin is not None:  # a name is unique per zone only: a second of it elsewhere is two of one name
        zones = list(dict.fromkeys([*ctx.services.settings.tpu_zones, spec.zone]))
        listed = ctx.services.tpu.list_queued_resources(zones, with_nodes=False).resources
        free = free_name(spec.name, {qr.name for qr in listed} | {n for qr in listed for n in qr.node_ids})
        named = command_line(ctx.registry, "tpu create", {**kw, "name": free, "allow_second": True})
        raise BadInput(
            f"`{spec.name}` is already {twin.state} in `{twin.zone}`: creating it in `{spec.zone}` would "
            "make a second queued resource of the same name",
            f"give the second one a name of its own, e.g. `{named}`",
        )
    if preview.running and not args.allow_second:
        go_on = command_line(ctx.registry, "tpu create", {**kw, "allow_second": True})
        raise already_running(ctx, preview, "this create", go_on)
    lines = [
        f"*Create* queued resource `{spec.name}` in `{spec.zone}`: "
        f"{spec.accelerator_type}, {spec.provisioning_model}"
        + (f", max run duration {human_duration(spec.max_run_duration)}" if spec.max_run_duration else "")
        + (f", valid for {human_duration(spec.valid_until)}" if spec.valid_until else ""),
        f"*Node* `{spec.node_id}`, runtime {spec.runtime_version}, external IP on",
        f"*Serves* `{startup.model}` with {startup.image}: "
        f"tensor parallel size {startup.tensor_parallel_size}, "
        f"max_model_len {startup.max_model_len}, port {startup.port}",
        f"*Hugging Face token* read on the VM from Secret Manager secret `{startup.hf_token_secret}`",
        *create_spend_lines(preview.spend, spec.provisioning_model),
        *preview.warnings,
    ]
    reply = change("\n".join(lines))
    reply.plan = pins_text([pin_of(None, spec.zone, spec.name)])
    return reply


@registry.command(
    "tpu create",
    "Create a queued resource whose node starts vLLM serving the model",
    *_CREATE_PARAMS,
    role=Role.OPERATOR,
    changes_infra=True,
    exclusive=(MODEL_FLAGS,),
    preview=_preview_create,
)
def tpu_create(ctx: Context, **kw: object) -> Reply:
    """Create the queued resource (labelled, written down first) and wait for the create operation.

    The name is held while it runs; a name taken since the preview is refused; after an ambiguous answer
    (timeout, 5xx) the resource is read back and reported by its label, never deleted by name.
    """
    spec, _ = create_spec(ctx, CreateArgs(**kw))  # type: ignore[arg-type]
    tpu = ctx.services.tpu
    with one_operation(ctx, spec.zone, spec.name, f"tpu create {spec.name}") as operation_id:
        check_pins(ctx, [current_pin(ctx, spec.name, spec.zone)], f"tpu create {spec.name}")
        with (
            _primary_work(ctx, spec.name, spec.zone, f"tpu create {spec.name}"),
            remembering_refusals(ctx, spec),
        ):
            outcome = create_labelled(ctx, spec, operation_id=operation_id, kind="create")
            if outcome.operation is not None:
                tpu.wait_operation(outcome.operation, timeout_s=OPERATION_TIMEOUT_S, cancel=ctx.cancelled)
    now = ctx.services.now()
    if outcome.operation is None and outcome.resource is None:
        assert outcome.ambiguous is not None
        settings = ctx.services.settings
        every = human_duration(timedelta(seconds=settings.reconcile_interval_s))
        watch_for = human_duration(timedelta(seconds=settings.ambiguous_create_watch_s))
        reply = create_unseen(
            spec.name, spec.zone, outcome.ambiguous.message, outcome.request_id, every, watch_for
        )
        watch(ctx, reply)
        return reply
    qr = tpu.get_queued_resource(spec.name, [spec.zone])
    return created(qr, now, outcome.ambiguous.message if outcome.ambiguous is not None else None)


def _primary_work(ctx: Context, name: str, zone: str, reason: str) -> AbstractContextManager[None]:
    """A maintenance window for work on queued resource `name` in `zone` when it is the primary (the
    deployment vLLM serves from); none otherwise. The primary is one resource, by zone and name
    (`primary_among` the watched zones and `zone`): work on another zone's resource of its name (reset) is
    not the primary's, nor is a create of one while another of its name holds or waits for capacity (that
    one, older and live, stays the primary). A zone that does not answer holds none of them here
    (`list_queued_resources` reports it instead of raising).
    """
    settings = ctx.services.settings
    if name != settings.tpu_primary:
        return nullcontext()
    zones = list(dict.fromkeys([*settings.tpu_zones, zone]))
    listing = ctx.services.tpu.list_queued_resources(zones)
    if any(qr.name == name and qr.zone == zone for qr in listing.resources):
        primary = primary_among(listing.resources, name, zones)
        ours = primary is not None and primary.zone == zone
    else:  # a create: the new resource, on its way and the newest, ranks after a live one elsewhere
        other = primary_among(listing.resources, name, zones)
        ours = other is None or other.state not in LIVE_STATES
    return planned_work(ctx, reason, target=name) if ours else nullcontext()


def _find(ctx: Context, name: str, zone: str | None, verb: str) -> QueuedResourceInfo:
    zones = [zone] if zone else list(ctx.services.settings.tpu_zones)
    try:
        return ctx.services.tpu.get_queued_resource(name, zones)
    except NotFound as exc:
        exc.hint = not_found_hint(ctx, name, verb, zones)
        raise


def _burn_line(ctx: Context, qr: QueuedResourceInfo) -> str:
    if qr.state != "ACTIVE":
        return ""
    try:
        spend = cost.burn(qr, ctx.services.now())
    except BadInput:
        return ""
    bound = spend.quote.bound or "about "
    note = f" _({spend.quote.used})_" if spend.quote.used else ""
    return f"\n*Spent so far* {bound}{usd(spend.usd_so_far)} at {bound}{per_hour(spend.usd_per_hour)}{note}"


_NAME_ZONE = (QUEUED_RESOURCE, SEARCHED_ZONE)


def _check_created(qr: QueuedResourceInfo, created: datetime | None) -> None:
    """Refuse when `--created` pins another create time than the resource has (it was recreated)."""
    if created is None:
        return
    if qr.create_time is None or abs((qr.create_time - created).total_seconds()) >= 1:
        raise BadInput(
            f"refused: `{qr.name}` in `{qr.zone}` was created {now_text(qr.create_time)}, not "
            f"{now_text(created)} as pinned: it was deleted and recreated since",
            f"look at it with /tpu describe {qr.name} --zone {qr.zone}",
        )


def _preview_delete(
    ctx: Context, name: str, zone: str | None, force: bool, created: datetime | None = None
) -> Reply:
    qr = _find(ctx, name, zone, "delete")
    _check_created(qr, created)
    if has_running_nodes(qr) and not force:
        raise BadInput(
            f"{name} has running nodes ({', '.join(n.name for n in qr.nodes)})",
            f"add --force to delete the nodes too: `{delete_line(ctx, qr)}`",
        )
    what = "the queued resource and its nodes" if qr.nodes else "the queued resource"
    now = ctx.services.now()
    text = f"*Delete* {what}:\n{resource_line(qr, now)}{_burn_line(ctx, qr)}"
    if qr.nodes:
        text += f"\n{_goes_down(ctx, qr, 'for good: getting it back is a new create')}"
    reply = change(text)
    reply.plan = pins_text([pin_of(qr)])
    return reply


def _goes_down(ctx: Context, qr: QueuedResourceInfo, how_long: str) -> str:
    """The "what goes down" line of a disruptive preview."""
    nodes = ", ".join(f"`{n.name}`" for n in qr.nodes) or "its node"
    primary = is_primary(ctx, qr)
    serving = " (the primary: the bot's vLLM endpoint)" if primary else ""
    return f":warning: *Goes down* vLLM on {nodes}{serving}, {how_long}."


@registry.command(
    "tpu delete",
    "Delete a queued resource (and with --force its nodes)",
    *_NAME_ZONE,
    Param.toggle("force", "also delete running nodes"),
    Param.option(
        "created", "only if its create time is T (pins the resource an alert was about)", timestamp, "T"
    ),
    role=Role.ADMIN,
    changes_infra=True,
    preview=_preview_delete,
)
def tpu_delete(
    ctx: Context, name: str, zone: str | None, force: bool, created: datetime | None = None
) -> Reply:
    """Delete exactly what was previewed (same create time), wait, and verify it is gone."""
    qr = _find(ctx, name, zone, "delete")
    tpu = ctx.services.tpu
    with one_operation(ctx, qr.zone, qr.name, f"tpu delete {qr.name}"):
        check_pins(ctx, [current_pin(ctx, qr.name, qr.zone)], f"tpu delete {name}")
        tpu.delete_queued_resource(qr.name, qr.zone, force=force, wait=True)
    try:
        tpu.get_queued_resource(qr.name, [qr.zone])
    except NotFound:
        return change(f":white_check_mark: Deleted queued resource `{qr.name}` in `{qr.zone}`.")
    raise OpsError(f"{qr.name} still exists after the delete operation finished", "check /tpu describe")


def reset_refusal(qr: QueuedResourceInfo, beside_running: bool) -> BadInput | None:
    """Why `qr` cannot be reset, with the way on that fits its state as just read; None when it can.
    `beside_running` (`bot.shared.zone_plan.starts_second`): a recovery or create of it would start a
    second TPU beside one running, so the `/tpu recover` and `/tpu create` offered carry --allow-second.

    The API resets only a FAILED queued resource: a SUSPENDED one (spot preemption, end of a flex-start
    run) has had its resources deleted and cannot get them back, so the way out is delete and create
    (the TPU simulator enforces the same; see sim/gcp/tpu.py `_reset_queued_resource`). One still waiting
    has no VM to reset; an ACTIVE one's VM is restarted by stopping and starting its node.
    """
    if qr.state == "FAILED":
        return None
    where = f"--zone {qr.zone}"
    second = " --allow-second" if beside_running else ""
    if qr.state in ("SUSPENDED", "SUSPENDING"):
        why = (
            "its spot capacity was preempted" if qr.preempted else f"it is {qr.state} (its VMs were deleted)"
        )
        return BadInput(
            f"`{qr.name}` cannot be reset: {why}, and only a FAILED queued resource can be reset",
            f"`/tpu recover {qr.name} {where}{second}` deletes it and creates it again "
            "(`--search` tries TPU_ZONES)",
        )
    message = f"`{qr.name}` is {qr.state}: only a FAILED queued resource can be reset"
    if qr.state == "ACTIVE":
        if qr.preempted:
            return BadInput(message, f"its node was preempted: `/tpu recover {qr.name} {where}{second}`")
        stopped = [n.name for n in qr.nodes if n.state in ("STOPPED", "STOPPING")]
        if stopped:
            return BadInput(message, f"its node is stopped: `/tpu start {stopped[0]} {where}`")
        live = [n.name for n in qr.nodes if n.state not in DEAD_NODE_STATES]
        if live:
            return BadInput(
                message,
                f"to restart its VM: `/tpu stop {live[0]} {where}`, then `/tpu start {live[0]} {where}`; to "
                "restart only vLLM: `/vllm restart`",
            )
        return BadInput(
            f"{message}; its node is gone",
            f"delete it and create it again: `/tpu delete {qr.name} {where} --force`, then "
            f"`/tpu create {qr.name} {where}{second}`",
        )
    if qr.state == "DELETING":
        return BadInput(message, f"it is being deleted: nothing to reset; `/tpu describe {qr.name} {where}`")
    until = f" (valid until {utc(qr.valid_until)})" if qr.valid_until else ""
    return BadInput(
        f"{message}; it has no VM yet: it waits for capacity{until}",
        f"nothing to reset: let it wait, or give up with `/tpu delete {qr.name} {where}`",
    )


def _preview_reset(ctx: Context, name: str, zone: str | None) -> Reply:
    qr = _find(ctx, name, zone, "reset")
    beside_running = starts_second(ctx, qr)
    refusal = reset_refusal(qr, beside_running)
    if refusal is not None:
        raise refusal
    text = "*Reset* (its nodes are recreated; data on them is lost):\n" + resource_line(
        qr, ctx.services.now()
    )
    text += "\n" + _goes_down(
        ctx, qr, f"until it is provisioned again (capacity permitting) plus {VLLM_LOAD} to load the model"
    )
    # Provisioned again, it bills again: the spend and warnings of a create of it in its zone.
    kind = (qr.accelerator_type, qr.provisioning_model)
    hours = qr.max_run_duration.total_seconds() / 3600 if qr.max_run_duration else None
    ask = CapacityAsk(frozenset({qr.name}), *kind, (qr.zone,), 1, hours, qr)
    second = " --allow-second" if beside_running else ""
    checked = capacity_preview(
        ctx, ask, instead=f"`/tpu recover {qr.name} --search{second}` (flex-start) or `/tpu create` in"
    )
    text += "\n" + "\n".join([*create_spend_lines(checked.spend, qr.provisioning_model), *checked.warnings])
    reply = change(text)
    reply.plan = pins_text([pin_of(qr)])
    return reply


@registry.command(
    "tpu reset",
    "Reset a queued resource (re-provisions it; its nodes are recreated)",
    *_NAME_ZONE,
    role=Role.ADMIN,
    changes_infra=True,
    preview=_preview_reset,
)
def tpu_reset(ctx: Context, name: str, zone: str | None) -> Reply:
    qr = _find(ctx, name, zone, "reset")
    tpu = ctx.services.tpu
    with (
        one_operation(ctx, qr.zone, qr.name, f"tpu reset {qr.name}"),
        _primary_work(ctx, qr.name, qr.zone, f"tpu reset {qr.name}"),
    ):
        check_pins(ctx, [current_pin(ctx, qr.name, qr.zone)], f"tpu reset {name}")
        operation = tpu.reset_queued_resource(qr.name, qr.zone)
        tpu.wait_operation(operation, timeout_s=OPERATION_TIMEOUT_S, cancel=ctx.cancelled)
    qr = tpu.get_queued_resource(qr.name, [qr.zone])
    return reset_requested(qr, ctx.services.now())


def _node_zone(ctx: Context, node: str, zone: str | None, verb: str) -> str:
    """The zone holding node `node`: the given one, else the first watched zone whose listing has it.

    Raises:
        NotFound: no such node in the watched zones; the hint comes from the listing just read: the node
            of a queued resource of that name, or the nodes there are.
    """
    if zone:
        return zone
    zones = ctx.services.settings.tpu_zones
    listing = ctx.services.tpu.list_queued_resources(zones)
    for qr in listing.resources:
        if any(n.name == node for n in qr.nodes):
            return qr.zone
    named = next((qr for qr in listing.resources if qr.name == node), None)
    if named is not None:
        nodes = [n.name for n in named.nodes] or list(named.node_ids)
        if named.nodes:
            line = command_line(ctx.registry, f"tpu {verb}", {"node": nodes[0], "zone": named.zone})
            hint = f"`{node}` is a queued resource; its node is `{nodes[0]}`: `{line}`"
        else:
            hint = (
                f"`{node}` is a queued resource ({named.state}) whose node{'' if len(nodes) == 1 else 's'} "
                f"{', '.join(f'`{n}`' for n in nodes) or '(none)'} do{'es' if len(nodes) == 1 else ''} not "
                "exist yet: there is no VM to start or stop"
            )
        raise NotFound(f"no node {node} in {', '.join(zones)}", hint)
    known = sorted(n.name for qr in listing.resources for n in qr.nodes)
    hint = (
        f"nodes in TPU_ZONES: {', '.join(f'`{n}`' for n in known)}"
        if known
        else "no node exists in TPU_ZONES"
    )
    raise NotFound(f"no node {node} in {', '.join(zones)}", hint + "; a node elsewhere needs --zone Z")


def _node_command(verb: str) -> None:
    """Declare `/tpu start NODE` or `/tpu stop NODE`."""

    def preview(ctx: Context, node: str, zone: str | None) -> Reply:
        where = _node_zone(ctx, node, zone, verb)
        info = ctx.services.tpu.get_node(where, node)
        _refuse_no_op(verb, info)
        text = f"*{verb.capitalize()}* node `{node}` in `{where}` (now {info.state})."
        if verb == "start":
            text += "\n" + "\n".join(_start_money(ctx, info))
        if verb == "stop":
            text += (
                f"\n:warning: *Goes down* vLLM on `{node}` until `/tpu start {node}`, then {VLLM_LOAD} to "
                "load the model again."
            )
        reply = change(text)
        reply.plan = pins_text([_node_pin(info)])
        return reply

    def run(ctx: Context, node: str, zone: str | None) -> Reply:
        where = _node_zone(ctx, node, zone, verb)
        now = ctx.services.tpu.get_node(where, node)
        check_pins(ctx, [_node_pin(now)], f"tpu {verb} {node}")
        _refuse_no_op(verb, now)
        tpu = ctx.services.tpu
        operation = tpu.start_node(where, node) if verb == "start" else tpu.stop_node(where, node)
        tpu.wait_operation(operation, timeout_s=OPERATION_TIMEOUT_S, cancel=ctx.cancelled)
        info = tpu.get_node(where, node)
        return change(f":white_check_mark: Node `{node}` is {info.state}.")

    registry.command(
        f"tpu {verb}",
        f"{verb.capitalize()} a TPU node",
        Param("node", "node id", kind=resource_name, required=True, metavar="NODE"),
        SEARCHED_ZONE,
        role=Role.OPERATOR,
        changes_infra=True,
        preview=preview,
    )(run)


# Node states (https://cloud.google.com/tpu/docs/reference/rest/v2/projects.locations.nodes#State) in which
# a start or stop has nothing to do: the node already runs (or is on its way up), or is already stopped.
_NOTHING_TO_DO = {
    "start": ({"READY", "STARTING", "RESTARTING", "CREATING"}, "it already runs or is on its way up"),
    "stop": ({"STOPPED", "STOPPING"}, "it is already stopped or stopping"),
}


def _refuse_no_op(verb: str, info: NodeInfo) -> None:
    """Refuse `/tpu start` of a running node and `/tpu stop` of a stopped one, before any confirmation.

    Raises:
        BadInput: the node's state (as just read) leaves the verb nothing to do; the hint names the
            command that does something in that state.
    """
    states, why = _NOTHING_TO_DO[verb]
    if info.state in states:
        other = "stop" if verb == "start" else "start"
        raise BadInput(
            f"node {info.name} is {info.state}: {why}, nothing to {verb}",
            f"`/tpu {other} {info.name}` {other}s it; `/tpu status` shows it",
        )


def _start_money(ctx: Context, info: NodeInfo) -> list[str]:
    """The spend and warnings of starting node `info`: a started node bills again, so its preview states
    the worst case as every capacity preview does (`capacity_preview`): the price of its queued
    resource's type and provisioning model in its zone, until the resource's termination time (no fixed
    end without one); a node no queued resource owns is priced on-demand, its model being unknown."""
    listing = ctx.services.tpu.list_queued_resources([info.zone], with_nodes=False)
    owner = next((qr for qr in listing.resources if info.name in qr.node_ids), None)
    now = ctx.services.now()
    end = owner.termination_time if owner is not None else info.termination_time
    hours = max((end - now).total_seconds() / 3600, 0.0) if end is not None else None
    model = owner.provisioning_model if owner is not None else "on-demand"
    names = frozenset({owner.name}) if owner is not None else frozenset()
    ask = CapacityAsk(names, info.accelerator_type, model, (info.zone,), 1, hours, owner)
    checked = capacity_preview(ctx, ask, instead="")
    return [*start_spend_lines(checked.spend, model, end), *checked.warnings]


def _node_pin(info: NodeInfo) -> dict[str, str]:
    created = info.create_time.isoformat() if info.create_time else ""
    return {"zone": info.zone, "name": info.name, "created": created, "state": info.state}


_node_command("start")
_node_command("stop")

_STALE_STATES = ("FAILED", "SUSPENDED")


def _ensure_plan(ctx: Context, name: str) -> tuple[list[QueuedResourceInfo], bool, list[QueuedResourceInfo]]:
    """(queued resources to delete, whether to create the primary, other live ones left alone)."""
    listing = ctx.services.tpu.list_queued_resources(ctx.services.settings.tpu_zones)
    if listing.errors:
        zone, err = next(iter(listing.errors.items()))
        raise OpsError(f"cannot plan: listing {zone} failed: {err.message}", "retry when every zone answers")
    delete = [qr for qr in listing.resources if qr.state in _STALE_STATES]
    primary = [qr for qr in listing.resources if qr.name == name and qr.state not in _STALE_STATES]
    others = [qr for qr in listing.resources if qr.name != name and qr.state not in _STALE_STATES]
    return delete, not primary, others


def _fingerprint(delete: list[QueuedResourceInfo], create: bool) -> str:
    """What ensure will do, pinned: each resource to delete with its create time, and the create."""
    items = sorted(f"{qr.zone}/{qr.name}@{qr.create_time}" for qr in delete) + (["create"] if create else [])
    return hashlib.sha256("\n".join(items).encode()).hexdigest()[:16]


def _preview_ensure(ctx: Context, name: str | None) -> Reply:
    primary = name or ctx.services.settings.tpu_primary
    delete, create, others = _ensure_plan(ctx, primary)
    create_zone = ctx.services.settings.tpu_zones[0] if create else None
    money: list[str] = []
    if create:  # the same spend and warnings as `/tpu create` of it
        spec, _ = create_spec(ctx, default_create_args(primary))
        hours = spec.max_run_duration.total_seconds() / 3600 if spec.max_run_duration else None
        kind = (spec.accelerator_type, spec.provisioning_model)
        ask = CapacityAsk(frozenset({primary}), *kind, (spec.zone,), 1, hours)
        checked = capacity_preview(ctx, ask, instead=f"`/tpu create {primary} --zone Z` with Z one of")
        money = [*create_spend_lines(checked.spend, spec.provisioning_model), *checked.warnings]
    reply = ensure_preview(primary, delete, create_zone, others, ctx.services.now(), money)
    if not reply.nothing_to_confirm:
        reply.plan = _fingerprint(delete, create)
    return reply


@registry.command(
    "tpu ensure",
    "Keep the primary queued resource: delete FAILED/SUSPENDED ones, recreate the primary if needed",
    Param("name", "primary queued resource (default TPU_PRIMARY)", kind=resource_name, metavar="NAME"),
    role=Role.ADMIN,
    changes_infra=True,
    preview=_preview_ensure,
)
def tpu_ensure(ctx: Context, name: str | None) -> Reply:
    """Carry out exactly the confirmed plan; if the world changed since, refuse and ask to look again."""
    primary = name or ctx.services.settings.tpu_primary
    delete, create, _ = _ensure_plan(ctx, primary)
    if _fingerprint(delete, create) != ctx.confirmed_plan:
        raise OpsError(
            "the queued resources changed since the confirmation", f"run /tpu ensure {primary} again"
        )
    tpu = ctx.services.tpu
    done = []
    with one_operation(ctx, "search", primary, f"tpu ensure {primary}") as operation_id:
        for qr in delete:
            tpu.delete_queued_resource(qr.name, qr.zone, force=True, wait=True)
            done.append(f"deleted `{qr.name}` ({qr.zone})")
        if create:
            spec, _ = create_spec(ctx, default_create_args(primary))
            with _primary_work(ctx, primary, spec.zone, f"tpu ensure {primary}"):
                outcome = create_labelled(ctx, spec, operation_id=operation_id, kind="ensure")
                if outcome.operation is not None:
                    tpu.wait_operation(outcome.operation, timeout_s=OPERATION_TIMEOUT_S, cancel=ctx.cancelled)
            if outcome.operation is None and outcome.resource is None:
                done.append(f"asked to create `{primary}` ({spec.zone}), not seen yet: check /tpu describe")
            else:
                done.append(f"created `{primary}` ({spec.zone})")
    return change(":white_check_mark: " + "; ".join(done) + ".")
