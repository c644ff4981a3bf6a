"""`/tpu recover [NAME] [--zone Z] [--search]`: bring a dead queued resource back.

Dead means SUSPENDED, FAILED, or ACTIVE with a PREEMPTED node (`ops.recovery.dead_reason`). The preview
shows what recovery will do and what it may cost; the confirmed command runs `bot.recovery.recover`, which
the alert scheduler also calls for automatic recovery (AUTO_RECOVER).
"""

from __future__ import annotations

from bot.commands import Param, Role, registry, resource_name, zone_name
from bot.context import Context
from bot.hints import not_found_hint
from bot.recovery import projected_usd, recover, recovery_request
from bot.render import Reply, blocks_reply, section
from bot.views.tpu import resource_line
from bot.zone_plan import zone_warnings
from ops.alerts import identity
from ops.errors import BadInput, NotFound, OpsError
from ops.recovery import dead_reason
from ops.tpu_model import QueuedResourceInfo


def _dead(ctx: Context, name: str | None, zone: str | None) -> tuple[QueuedResourceInfo, str]:
    settings = ctx.services.settings
    target = name or settings.tpu_primary
    zones = [zone] if zone else list(settings.tpu_zones)
    try:
        qr = ctx.services.tpu.get_queued_resource(target, zones)
    except NotFound as exc:
        exc.hint = not_found_hint(ctx, target, "recover", zones)
        raise
    reason = dead_reason(qr)
    if reason is None:
        raise BadInput(
            f"nothing to recover: `{qr.name}` is {qr.state} and its nodes are not preempted",
            f"see it with `/tpu describe {qr.name} --zone {qr.zone}`",
        )
    return qr, reason


def _preview_recover(ctx: Context, name: str | None, zone: str | None, search: bool) -> Reply:
    qr, reason = _dead(ctx, name, zone)
    zones = ", ".join(f"`{z}`" for z in ctx.services.settings.tpu_zones)
    then = (
        f"then *search for capacity* in {zones} (flex-start), keeping the first zone that becomes ACTIVE"
        if search
        else f"then *create it again* in `{qr.zone}` ({qr.accelerator_type}, {qr.provisioning_model})"
    )
    model, hours = recovery_request(qr, search=search)
    try:
        usd, plan = projected_usd(qr, search=search)
    except BadInput as exc:
        spend = f"\n*Projected spend* unknown: {exc.message}"
    else:
        where = f"`{qr.zone}` prices" if search else f"`{qr.zone}`"
        spend = f"\n*Projected spend* {model}, up to ${usd:,.2f} ({hours:g} h at {where})" + "".join(
            f"\n_{text}_" for text in plan.missing
        )
    warnings = (
        []
        if search
        else zone_warnings(
            ctx,
            qr.zone,
            qr.accelerator_type,
            qr.provisioning_model,
            f"`/tpu recover {qr.name} --search` (flex-start) or `/tpu create` in",
        )
    )
    now = ctx.services.now()
    text = f"*Recover* ({reason}): *delete* it, {then}:\n{resource_line(qr, now)}{spend}"
    reply = blocks_reply([section("\n".join([text, *warnings]))])
    reply.plan = f"{identity(qr)}|{reason}|{search}"
    return reply


@registry.command(
    "tpu recover",
    "Recover a dead queued resource: delete it and create it again (or search the watched zones)",
    Param("name", "queued resource (default TPU_PRIMARY)", kind=resource_name, metavar="NAME"),
    Param("zone", "zone (default: search TPU_ZONES)", flag="--zone", kind=zone_name, metavar="Z"),
    Param("search", "run the capacity search over TPU_ZONES instead", flag="--search", switch=True),
    role=Role.ADMIN,
    changes_infra=True,
    preview=_preview_recover,
)
def tpu_recover(ctx: Context, name: str | None, zone: str | None, search: bool) -> Reply:
    """Carry out the confirmed recovery; refuse if the resource changed since the confirmation."""
    qr, reason = _dead(ctx, name, zone)
    if f"{identity(qr)}|{reason}|{search}" != ctx.confirmed_plan:
        raise OpsError(f"`{qr.name}` changed since the confirmation", f"run /tpu recover {qr.name} again")
    done = recover(ctx, qr, search=search)
    return blocks_reply(
        [
            section(
                f":white_check_mark: Recovery: {done}. vLLM needs about 10 minutes to load; "
                "this thread hears when it serves."
            )
        ]
    )
