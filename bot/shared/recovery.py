"""Recovery of a dead queued resource, shared by `/tpu recover` and the alert scheduler's automatic recovery.

Dead means SUSPENDED, FAILED, or ACTIVE with a PREEMPTED node (`ops.tpu.recovery.dead_reason`). Recovery
deletes
it (a dead queued resource holds quota until deleted) and creates it again in its zone with the same
accelerator type and provisioning model, or with `--search` runs the capacity search over the watched zones
(TPU_ZONES). The alert of a dead primary carries Recover buttons that run this command (admin, confirmed);
automatic recovery (AUTO_RECOVER, `bot.oncall.checks.AutoRecovery`) runs `recover` through the command runner.
Both open a maintenance window, so the restart is not paged as an outage and the thread hears when vLLM
serves. Like `/tpu create` and `/tpu find`, recovery holds the name (`bot.shared.safety.one_operation`) and
its
creates carry the bot's ownership labels and are written down before they are sent (`ops.tpu.ownership`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import timedelta

from bot.commands.context import Context
from bot.oncall.maintenance import planned_work
from bot.shared.safety import create_labelled, one_operation
from bot.shared.tpu_requests import CreateArgs, create_spec
from bot.shared.zone_plan import remembering_refusals
from ops.cost import pricing as cost
from ops.cost.spend import SpendPlan, plan_spend
from ops.errors import BadInput, OpsError
from ops.tpu.capacity import CapacitySearch
from ops.tpu.model import QueuedResourceInfo, region_of
from ops.tpu.recovery import exposure_hours

OPERATION_TIMEOUT_S = 600.0
SEARCH_VALID_UNTIL = timedelta(minutes=15)  # how long recovery's capacity search waits in each zone


SEARCH_MAX_RUN = timedelta(hours=4)  # the search's flex-start max run duration when the QR had none


def recovery_request(qr: QueuedResourceInfo, *, search: bool) -> tuple[str, float | None]:
    """What a recovery of `qr` will request: (provisioning model, hours it may bill).

    A recreate keeps the QR's model (best-effort, not offered by /tpu create, becomes flex-start) and its
    max run duration (none: one day, see `ops.tpu.recovery.exposure_hours`); a search always asks for
    flex-start with the QR's max run duration, else SEARCH_MAX_RUN.
    """
    if search:
        run = qr.max_run_duration or SEARCH_MAX_RUN
        return "flex-start", run.total_seconds() / 3600
    model = qr.provisioning_model if qr.provisioning_model in cost.MODELS else "flex-start"
    if qr.provisioning_model == "reserved":
        model = "reserved"
    return model, exposure_hours(qr)


def projected_usd(qr: QueuedResourceInfo, *, search_zones: Sequence[str] = ()) -> tuple[float, SpendPlan]:
    """What the recovery of `qr` may cost at worst (USD) and the plan behind it: the hourly price of the
    model the recovery requests (`recovery_request`) in the dearest zone it may create in (`qr.zone`, or
    every zone of `search_zones` for a search, which keeps one request at a time) times the hours it may
    bill; a missing price row is bounded by the on-demand row (`ops.cost.spend`, labelled in the plan).

    Raises:
        BadInput: the accelerator type cannot be priced in any of those zones.
    """
    model, hours = recovery_request(qr, search=bool(search_zones))
    zones = list(search_zones) or [qr.zone]
    plan = plan_spend(qr.accelerator_type, model, zones, 1, hours)
    if plan.winner_usd is None:
        regions = ", ".join(dict.fromkeys(region_of(zone) for zone in zones))
        raise BadInput(f"no price for {qr.accelerator_type} in {regions}")
    return float(plan.winner_usd), plan


def recreate_args(qr: QueuedResourceInfo) -> CreateArgs:
    """/tpu create arguments giving `qr` again: same zone, accelerator type, runtime and provisioning
    model (flex-start keeps its max run duration; best-effort, not offered by /tpu create, becomes
    flex-start)."""
    model = qr.provisioning_model
    flex = model not in ("spot", "on-demand", "reserved")
    return CreateArgs(
        name=qr.name,
        type_=qr.accelerator_type or None,
        zone=qr.zone,
        flex_start=flex,
        max_run=qr.max_run_duration if flex else None,
        spot=model == "spot",
        on_demand=model == "on-demand",
        reserved=model == "reserved",
        valid_until=None,
        runtime=qr.runtime_version or None,
        model=None,
        tp=None,
        max_model_len=None,
    )


def recover(
    ctx: Context, qr: QueuedResourceInfo, *, search: bool, thread: tuple[str, str | None] | None = None
) -> str:
    """Delete the dead `qr` and create it again (or search the watched zones), inside a maintenance window.

    Args:
        ctx: the command's (or the scheduler's) context.
        qr: the dead queued resource, as listed.
        search: run the capacity search over TPU_ZONES instead of recreating in `qr.zone`.
        thread: (channel, ts) of the alert thread where "serving after" goes (None: the command's message).

    Returns:
        One line saying what was done.

    Raises:
        OperationBusy: another command holds the name.
        OpsError: the delete, the create or the search failed (the window is then closed).
    """
    tpu = ctx.services.tpu
    spec, _ = create_spec(ctx, recreate_args(qr))
    command = f"tpu recover {qr.name}"
    scope = "search" if search else qr.zone
    with (
        one_operation(ctx, scope, qr.name, command) as operation_id,
        planned_work(ctx, f"recovery of {qr.name}", thread, target=qr.name),
    ):
        tpu.delete_queued_resource(qr.name, qr.zone, force=True, wait=True)
        if not search:
            with remembering_refusals(ctx, spec):
                outcome = create_labelled(ctx, spec, operation_id=operation_id, kind="recover")
                if outcome.operation is not None:
                    tpu.wait_operation(outcome.operation, timeout_s=OPERATION_TIMEOUT_S, cancel=ctx.cancelled)
            if outcome.operation is None and outcome.resource is None:
                assert outcome.ambiguous is not None
                return (
                    f"deleted `{qr.name}`; its create answered {outcome.ambiguous.message} and it was not "
                    f"there when read back: check /tpu describe {qr.name} --zone {qr.zone}"
                )
            fresh = tpu.get_queued_resource(qr.name, [qr.zone])
            return f"deleted and recreated `{qr.name}` in `{qr.zone}`: now {fresh.state}"
        settings = ctx.services.settings
        result = CapacitySearch(
            tpu, ctx.services.store, poll_s=settings.capacity_poll_s, now=ctx.services.now
        ).run(
            qr.name,
            spec.accelerator_type,
            "flex-start",
            settings.tpu_zones,
            # One zone at a time: a recovery (automatic ones included) never has two requests that could
            # both bill; a short valid-until per zone moves on quickly from a stockout.
            parallel=1,
            runtime_version=spec.runtime_version,
            max_run_duration=spec.max_run_duration or SEARCH_MAX_RUN,
            valid_until=SEARCH_VALID_UNTIL,
            startup_script=spec.startup_script,
            labels=spec.labels,
            service_account=spec.service_account,
            ssh_keys=spec.ssh_keys,
            cancel=ctx.cancelled,
            search_id=operation_id,
            user_id=ctx.user_id,
            channel_id=ctx.channel_id,
        )
        if result.winner is None:
            why = result.error.message if result.error is not None else "no watched zone had capacity"
            raise OpsError(
                f"deleted `{qr.name}`, but the capacity search failed: {why}", "try /tpu find later"
            )
        return f"deleted `{qr.name}` and found capacity in `{result.winner.zone}`: now {result.winner.state}"
