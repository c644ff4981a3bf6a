"""`/tpu recover [NAME] [--zone Z] [--search]`: bring a dead queued resource back.

Dead means SUSPENDED, FAILED, or ACTIVE with a PREEMPTED node (`ops.tpu.recovery.dead_reason`). The preview
shows what recovery will do and what it may cost; the confirmed command runs `bot.shared.recovery.recover`,
which
the alert scheduler also calls for automatic recovery (AUTO_RECOVER).
"""

from __future__ import annotations

from bot.commands.context import Context
from bot.commands.registry import Param, Role, registry, resource_name, zone_name
from bot.shared.hints import not_found_hint
from bot.shared.recovery import projected_usd, recover, recovery_request
from bot.shared.zone_plan import zone_warnings
from bot.slack.render import Reply
from bot.views.recovery import RecoveryPreview, recovered, recovery_preview
from ops.alerts.ledger import identity
from ops.errors import BadInput, NotFound, OpsError
from ops.tpu.model import QueuedResourceInfo
from ops.tpu.recovery import dead_reason


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
    model, hours = recovery_request(qr, search=search)
    usd: float | None = None
    unpriced = ""
    missing: list[str] = []
    try:
        usd, plan = projected_usd(qr, search=search)
        missing = list(plan.missing)
    except BadInput as exc:
        unpriced = exc.message
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
    preview = RecoveryPreview(
        qr,
        reason,
        search,
        list(ctx.services.settings.tpu_zones),
        model,
        hours,
        usd,
        unpriced,
        missing,
        warnings,
        ctx.services.now(),
    )
    reply = recovery_preview(preview)
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
    return recovered(recover(ctx, qr, search=search))
