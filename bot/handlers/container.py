"""`/vllm` commands on the TPU VM over SSH: status, logs, syslog, start, stop, restart, rm.

Every remote command comes from the fixed templates of `ops.vllm.remote_commands`; each argument from Slack is
checked here when it is parsed (so bad input gets the usage line) and again, then quoted, in
`ops.vllm.remote_commands`.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import nullcontext
from datetime import datetime
from functools import partial

from bot.commands.context import Context
from bot.commands.registry import Param, Role, registry
from bot.oncall.maintenance import planned_work
from bot.shared.diagnosis import container_diagnosis, deployment_of, plain_log
from bot.shared.identity import identify
from bot.shared.safety import check_ssh_pin, ssh_pin_text
from bot.shared.tpu_requests import VLLM_LOAD
from bot.slack.render import Reply, ago
from bot.views.container import container_change, container_status, log_excerpt
from bot.views.findings import identity_line
from ops.errors import OpsError, PermissionDenied
from ops.vllm import remote_commands
from ops.vllm.container import ContainerStatus, ReplaceOutcome, VllmContainer
from ops.vllm.server import HealthCheck, ServerIdentity

DIAGNOSE_TAIL = 400


def _remote_kind(kind: str) -> Callable[[str], str]:
    """An argument type checked by `ops.vllm.remote_commands.validate(kind, ...)`, the same check the SSH
    layer
    applies."""
    return partial(remote_commands.validate, kind)


def _health(ctx: Context) -> HealthCheck | OpsError:
    try:
        client, _ = ctx.services.vllm()
    except OpsError as exc:
        return exc
    with client:
        return client.health()


def _who_answers(
    ctx: Context, status: ContainerStatus, log: str
) -> tuple[HealthCheck | OpsError, ServerIdentity | None]:
    """`/health` at the endpoint and the identity verdict of what answers (None: no endpoint)."""
    try:
        client, endpoint = ctx.services.vllm()
    except OpsError as exc:
        return exc, None
    with client:
        health = client.health()
        return health, identify(ctx.services, client, endpoint, health, container=status, log=log)


def _describe(
    status: ContainerStatus, health: HealthCheck | OpsError | None, now: datetime, stuck_after_s: float = 1800
) -> str:
    """The container's state in words, telling a booting server ("starting", up to `stuck_after_s` seconds)
    from one whose start-up is stuck and from a dead one; with `health` None, only what docker says."""
    if not status.exists:
        return ":white_circle: no vLLM container on the VM"
    base = f"image `{status.image}` · restarts {status.restart_count}"
    if status.running:
        up = f"up {ago(status.started_at, now).removesuffix(' ago')}"
        if health is None:
            return f":large_green_circle: running ({up})\n{base}"
        if isinstance(health, OpsError):
            return f":large_yellow_circle: running ({up}); /health unknown: {health.message}\n{base}"
        if health.state == "ready":
            return f":large_green_circle: serving: running ({up}), /health ready\n{base}"
        if health.state in ("refused", "timeout") and _stuck(status, now, stuck_after_s):
            minutes = int((now - status.started_at).total_seconds() // 60) if status.started_at else 0
            return (
                f":red_circle: start-up stuck: up {minutes} min without answering on its port (loading and "
                f"compiling take about 10 minutes on TPU, up to 30 on a first compile)\n{base}"
            )
        if health.state in ("refused", "timeout"):
            return (
                f":large_blue_circle: starting: running ({up}) and vLLM is not answering yet; it loads the "
                f"weights and compiles for about 10 minutes on TPU before it listens\n{base}"
            )
        return f":red_circle: running ({up}) but /health is {health.state}: {health.detail}\n{base}"
    exited = f" with code {status.exit_code}" if status.exit_code is not None else ""
    when = f" {ago(status.finished_at, now)}" if status.finished_at else ""
    return f":red_circle: {status.state}{exited}{when}\n{base}"


def _stuck(status: ContainerStatus, now: datetime, stuck_after_s: float) -> bool:
    return status.started_at is not None and (now - status.started_at).total_seconds() > stuck_after_s


@registry.command(
    "vllm status", "The vLLM container on the TPU VM: state, image, uptime, restarts, readiness"
)
def vllm_status(ctx: Context) -> Reply:
    container, host = ctx.services.container()
    with host:
        status = container.status()
        timed = container.logs(tail=DIAGNOSE_TAIL, timestamps=True) if status.exists else ""
    log = plain_log(timed)
    # /health is asked even of a container that is not running: something else may answer on its port.
    health, identity = _who_answers(ctx, status, log)
    if not status.running:
        health = HealthCheck("refused", None, 0.0, "container not running")
    now, stuck_s = ctx.services.now(), ctx.services.settings.vllm_startup_stuck_s
    if identity is not None and identity.other:  # the answers are not this container's: docker facts only
        state = identity_line(identity) + "\n" + _describe(status, None, now, stuck_s)
    else:
        state = _describe(status, health, now, stuck_s)
    # The state line joins the log, so a stuck start-up is diagnosed like a logged failure.
    stuck = state.split("\n")[0].removeprefix(":red_circle: ") if "start-up stuck" in state else ""
    ended = status.finished_at if status.exists and not status.running else None
    diagnosis = container_diagnosis(timed, deployment_of(ctx.services), ended_at=ended, now=now, extra=stuck)
    return container_status(container.name, host.host, state, diagnosis)


@registry.command(
    "vllm logs",
    "The container's log: last lines here, the whole output as a file, known failures named",
    Param("tail", "lines (default 200)", flag="--tail", kind=_remote_kind("tail"), metavar="N"),
    Param("since", "only newer than D, e.g. 10m", flag="--since", kind=_remote_kind("since"), metavar="D"),
    Param(
        "grep",
        "only lines containing TEXT (quote spaces)",
        flag="--grep",
        kind=_remote_kind("text"),
        metavar="TEXT",
    ),
)
def vllm_logs(ctx: Context, tail: str | None, since: str | None, grep: str | None) -> Reply:
    container, host = ctx.services.container()
    with host:
        raw = container.logs(tail=int(tail or 200), since=since, grep=grep, timestamps=grep is None)
        status = container.status() if grep is None else None
    ended = status.finished_at if status is not None and status.exists and not status.running else None
    diagnosis = container_diagnosis(raw, deployment_of(ctx.services), ended_at=ended, now=ctx.services.now())
    return log_excerpt(f"`{container.name}` log", plain_log(raw), f"{container.name}.log", diagnosis)


@registry.command(
    "vllm syslog",
    "The TPU VM's system journal for a unit (default docker.service; SYSLOG_UNITS, admins: any)",
    Param(
        "unit",
        "systemd unit (default docker.service; others than SYSLOG_UNITS need the admin role)",
        flag="--unit",
        kind=remote_commands.unit_name,
        metavar="U",
    ),
    Param("tail", "lines (default 200)", flag="--tail", kind=_remote_kind("tail"), metavar="N"),
)
def vllm_syslog(ctx: Context, unit: str | None, tail: str | None) -> Reply:
    """The journal of `unit`. A unit outside SYSLOG_UNITS is for admins only: a journal may hold what
    other services log (tokens, addresses), and with SSH_SUDO it is read as root."""
    unit = unit or "docker.service"
    allowed = ctx.services.settings.syslog_units
    role = ctx.caller_role() if ctx.caller_role is not None else None
    if unit not in allowed and (role is None or role < Role.ADMIN):
        raise PermissionDenied(
            f"the journal of `{unit}` is for admins; anyone may read " + ", ".join(f"`{u}`" for u in allowed),
            "ask an admin to read it, or to add the unit to SYSLOG_UNITS",
        )
    container, host = ctx.services.container()
    with host:
        text = container.syslog(unit=unit, tail=int(tail or 200))
    diagnosis = container_diagnosis(
        text, deployment_of(ctx.services), now=ctx.services.now(), source="journal", unit=unit
    )
    return log_excerpt(f"journal of `{unit}`", text, f"{unit}.log", diagnosis)


# What each disruptive verb takes down, and for about how long (VLLM_LOAD: loading the model again).
DOWNTIME = {
    "restart": f"no answers for {VLLM_LOAD} while the new container loads the model",
    "stop": f"no answers until `/vllm start`, then {VLLM_LOAD} to load the model",
    "rm": f"no answers until `/vllm start` recreates the container, then {VLLM_LOAD}",
}


def _vm(target: dict[str, str]) -> str:
    """ " (node `X` of `Q`, created T)" for a target found from a node, else ""."""
    if not target.get("node"):
        return ""
    of = f" of `{target['resource']}`" if target.get("resource") else ""
    created = f", created {target['created']}" if target.get("created") else ""
    return f" (node `{target['node']}`{of}{created})"


def _replaced(outcome: ReplaceOutcome, name: str, host: str) -> str:
    """What `/vllm restart` did, in words: replaced, restored after a failure, or failed with nothing to
    restore; the failure's own docker or vLLM error line included."""
    if outcome.replaced:
        pulled = f" (`{outcome.status.image}` pulled first)" if outcome.pulled else ""
        old = outcome.previous_image
        previous = f"; the previous one (`{old}`) was removed" if old else ""
        return f":white_check_mark: `restart` done: a new `{name}` runs on `{host}`{pulled}{previous}."
    why = "unknown"
    if outcome.error is not None:
        why = outcome.error.message + (f" _({outcome.error.hint})_" if outcome.error.hint else "")
    if outcome.restored:
        again = " and started again (it loads the model again)" if outcome.status.running else ""
        return (
            f":x: `restart` failed: {why}\n:leftwards_arrow_with_hook: The previous container "
            f"(`{outcome.previous_image}`) is back as `{name}`{again}."
        )
    return f":x: `restart` failed: {why}\nNo container ran before, so there was nothing to restore."


def _container_command(
    verb: str,
    summary: str,
    act: Callable[[Context, VllmContainer], ContainerStatus | ReplaceOutcome | None],
) -> None:
    """Declare `/vllm VERB`: operator, confirmed, previewing the container's current state."""

    def preview(ctx: Context) -> Reply:
        target = ctx.services.ssh_target(fresh=True)
        container, host = ctx.services.container(target["host"])
        with host:
            status = container.status()
        now = ctx.services.now()
        spec = ctx.services.vllm_spec()
        where = f"`{host.host}`{_vm(target)}"
        plan = (
            f"*{verb.capitalize()}* the vLLM container `{container.name}` on {where}. Now: "
            + _describe(status, None, now).split("\n")[0]
        )
        if verb in DOWNTIME:
            plan += f"\n:warning: *Goes down* `{spec.model}` on `{host.host}`: {DOWNTIME[verb]}."
        if verb in ("start", "restart"):
            plan += (
                f"\nServes `{spec.model}` from `{spec.image}`, "
                f"tensor parallel size {spec.tensor_parallel_size}, max_model_len {spec.max_model_len}; "
                f"the HF token is read on the VM from `{spec.hf_token_secret}`."
            )
        reply = container_change(plan)
        reply.plan = ssh_pin_text(target)
        return reply

    def run(ctx: Context) -> Reply:
        # The VM previewed, and no other: a primary recreated since (another node, IP) is refused.
        target = ctx.services.ssh_target(fresh=True)
        check_ssh_pin(ctx, target, f"vllm {verb}")
        container, host = ctx.services.container(target["host"])
        # Starting vLLM is planned downtime: health alerts wait until it serves (bot/oncall/maintenance.py).
        planned = planned_work(ctx, f"vllm {verb}") if verb in ("start", "restart") else nullcontext()
        with host, planned:
            done = act(ctx, container)
            status = container.status()
        ctx.services.endpoints.forget()
        state = _describe(status, _health(ctx), ctx.services.now())
        if isinstance(done, ReplaceOutcome):
            return container_change(_replaced(done, container.name, host.host) + "\n" + state)
        return container_change(f":white_check_mark: `{verb}` done.\n" + state)

    registry.command(f"vllm {verb}", summary, role=Role.OPERATOR, changes_infra=True, preview=preview)(run)


_container_command(
    "start",
    "Start the vLLM container (docker start, or docker run if it does not exist)",
    lambda ctx, c: c.start(ctx.services.vllm_spec()),
)
_container_command("stop", "Stop the vLLM container", lambda ctx, c: c.stop())
_container_command(
    "restart",
    "Replace the vLLM container: pull the image, stop the old one, run the new one; the old one comes back "
    "if the new one fails",
    lambda ctx, c: c.restart(ctx.services.vllm_spec(), settle_s=ctx.services.settings.vllm_replace_settle_s),
)
_container_command("rm", "Remove the vLLM container", lambda ctx, c: c.rm())
