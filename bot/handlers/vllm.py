"""`/vllm` commands: the read-only ones over HTTP (health, endpoint, models, info, metrics, with `--chart` the
deployment's metrics history as a PNG: ops/vllm/history.py, ops/charts.py) and the container on the TPU VM
over SSH (status, logs, syslog, start, stop, restart, rm)."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import nullcontext
from datetime import datetime, timedelta
from functools import partial

from bot.commands.context import Context
from bot.commands.registry import ChatTool, Param, Role, registry, window
from bot.oncall.maintenance import planned_work
from bot.services import identify
from bot.shared.diagnosis import container_diagnosis, deployment_of, plain_log
from bot.shared.safety import check_ssh_pin, ssh_pin_text
from bot.shared.serving import VLLM_LOAD, explained_when_starting
from bot.slack.render import Reply, ago, human_duration, utc
from bot.views.findings import identity_line
from bot.views.metrics import chart_reply, ms
from bot.views.vllm import (
    container_change,
    container_status,
    endpoint_found,
    log_driver_line,
    log_excerpt,
    log_route_line,
    metrics,
    no_log_match,
    served_models,
    server_info,
)
from bot.views.vllm import health as health_view
from ops.alerts.ledger import AlertLedger
from ops.charts import Event, metrics_chart_png
from ops.diagnosis.engine import diagnose
from ops.errors import BackendTimeout, BadInput, OpsError, PermissionDenied
from ops.times import shown_time
from ops.vllm import ssh
from ops.vllm.container import ContainerStatus, ReplaceOutcome, VllmContainer
from ops.vllm.history import RETENTION, History, series
from ops.vllm.metrics import MetricsSummary, summarize
from ops.vllm.server import HealthCheck, ServerIdentity, ServingSample, VllmClient, serving_problem


@registry.command("vllm health", "vLLM /health plus a one-token chat completion, with latencies")
def vllm_health(ctx: Context) -> Reply:
    """Check /health, then ask the served model for one token; each step's latency is shown. A /health
    200 with requests waiting, none running, no new tokens and a probe timing out is "wedged", not
    healthy (`ops.vllm.server.serving_problem`)."""
    client, endpoint = ctx.services.vllm()
    with client:
        health = client.health()
        identity = identify(ctx.services, client, endpoint, health)
        before = _scrape(client) if health.state == "ready" else None
        if health.state == "not-vllm":  # any OpenAI-compatible server: the completion below is its health
            lines = [f":information_source: {health.detail}"]
        else:
            icon = ":large_green_circle:" if health.state == "ready" else ":red_circle:"
            detail = "" if health.state == "ready" else f": {health.detail}"
            lines = [f"{icon} `/health`: {health.state} in {ms(health.latency_s)}{detail}"]
        started = time.monotonic()
        probe_line, timed_out = _probe(ctx)
        lines.append(probe_line)
        after = _scrape(client) if before is not None else None
    samples = [
        ServingSample(at, s.running, s.waiting, s.generation_tokens)
        for at, s in ((0.0, before), (time.monotonic() - started, after))
        if s is not None
    ]
    wedged = serving_problem(samples, health_ready=health.state == "ready", probe_timed_out=timed_out)
    if wedged:
        lines.insert(0, f":red_circle: *{wedged}*")
    if identity.other:  # every answer above came from something else
        lines.insert(0, identity_line(identity))
    diagnosis = diagnose(wedged, deployment_of(ctx.services)) if wedged else None
    return health_view(lines, diagnosis, endpoint, identity)


def _probe(ctx: Context) -> tuple[str, bool | None]:
    """A one-token chat completion: its line, and whether it timed out (None: it failed otherwise)."""
    try:
        probe = ctx.services.probe()
    except OpsError as exc:
        hint = f" _({exc.hint})_" if exc.hint else ""
        return f":red_circle: chat completion failed: {exc.message}{hint}", (
            True if isinstance(exc, BackendTimeout) else None
        )
    return (
        f":large_green_circle: one-token chat completion from `{probe.model}` in {ms(probe.latency_s)}",
        False,
    )


def _scrape(client: VllmClient) -> MetricsSummary | None:
    """One /metrics summary, or None when it cannot be read (the health answer still stands)."""
    try:
        return client.metrics()
    except OpsError:
        return None


@registry.command("vllm endpoint", "The vLLM URL in use and how it was found")
def vllm_endpoint(ctx: Context) -> Reply:
    endpoint = ctx.services.endpoints.resolve()
    return endpoint_found(endpoint)


@registry.command("vllm models", "Models the server serves, with max_model_len")
def vllm_models(ctx: Context) -> Reply:
    client, endpoint = ctx.services.vllm()
    with client, explained_when_starting(ctx):
        models = client.models()
    return served_models(endpoint, models)


@registry.command("vllm info", "vLLM version and the served model's max_model_len")
def vllm_info(ctx: Context) -> Reply:
    client, endpoint = ctx.services.vllm()
    with client, explained_when_starting(ctx):
        version = client.version()
        models = client.models()
    return server_info(endpoint, version, models)


@registry.command(
    "vllm metrics",
    "Summary of vLLM's Prometheus metrics: load, KV cache, prefix cache, TTFT/ITL/TPOT/E2E",
    Param.toggle("raw", "also attach the raw /metrics text"),
    Param.option("chart", "attach a PNG of the last SPAN of history, above 0, e.g. 6h", window, "SPAN"),
    exclusive=(("raw", "chart"),),
    chat_tool=ChatTool(
        "metrics", "vLLM metrics summary: load, KV cache, prefix cache, latencies", reads="the vLLM metrics"
    ),
)
def vllm_metrics(ctx: Context, raw: bool, chart: timedelta | None) -> Reply:
    if chart is not None:
        return _metrics_chart(ctx, chart)
    client, endpoint = ctx.services.vllm()
    with client, explained_when_starting(ctx):
        text = client.metrics_text()
    return metrics(endpoint, summarize(text), text if raw else None)


def _alert_events(ctx: Context, since: timedelta) -> list[Event]:
    """The alerts this deployment's ledger sent in the window, as chart events."""
    now = ctx.services.now()
    rows = AlertLedger(ctx.services.store, ctx.deployment).rows(since=now - since)
    return [Event(row.at, f"alert: {row.kind}") for row in rows]


def _metrics_chart(ctx: Context, span: timedelta) -> Reply:
    """The last `span` of the deployment's sampled metrics, as a PNG attached to the reply.

    Raises:
        BadInput: a span over the retention, or fewer than two samples in it.
    """
    if span > RETENTION:
        raise BadInput(f"history is kept for {human_duration(RETENTION)}", "give a shorter span, e.g. 6h")
    now = ctx.services.now()
    samples = History(ctx.services.store).window(ctx.deployment, now - span, now)
    points, restarts = series(samples)
    events = [Event(at, "vLLM restart") for at in restarts] + _alert_events(ctx, span)
    model = ctx.services.settings.vllm_model
    title = f"{ctx.deployment} · {model} · last {human_duration(span)} (to {utc(now)})"
    png = metrics_chart_png(points, events, title)
    name = f"vllm-metrics-{ctx.deployment}-{int(span.total_seconds() // 60)}m.png"
    return chart_reply(ctx.deployment, model, span, len(samples), len(restarts), len(events), name, png)


DIAGNOSE_TAIL = 400


def _remote_kind(kind: str) -> Callable[[str], str]:
    """An argument type checked by `ops.vllm.ssh.validate(kind, ...)`, the same check the SSH layer
    applies."""
    return partial(ssh.validate, kind)


_TAIL = Param.option("tail", "lines (default 200)", _remote_kind("tail"), "N")


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
                f"compiling take {VLLM_LOAD} on TPU, up to 30 on a first compile)\n{base}"
            )
        if health.state in ("refused", "timeout"):
            return (
                f":large_blue_circle: starting: running ({up}) and vLLM is not answering yet; it loads the "
                f"weights and compiles for {VLLM_LOAD} on TPU before it listens\n{base}"
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
    unlogged = log_driver_line(container.name, status, ctx.services.settings.gcp_project)
    if unlogged:  # its output is on the VM only: said each time its state is read, not once
        state += "\n" + unlogged
    # The state line joins the log, so a stuck start-up is diagnosed like a logged failure.
    stuck = state.split("\n")[0].removeprefix(":red_circle: ") if "start-up stuck" in state else ""
    ended = status.finished_at if status.exists and not status.running else None
    diagnosis = container_diagnosis(timed, deployment_of(ctx.services), ended_at=ended, now=now, extra=stuck)
    return container_status(container.name, host.host, state, diagnosis)


@registry.command(
    "vllm logs",
    "The container's log: last lines here, the whole output as a file, known failures named",
    _TAIL,
    Param.option("since", "only newer than D, e.g. 10m", _remote_kind("since"), "D"),
    Param.option("grep", "only lines containing TEXT (quote spaces)", _remote_kind("text"), "TEXT"),
)
def vllm_logs(ctx: Context, tail: str | None, since: str | None, grep: str | None) -> Reply:
    container, host = ctx.services.container()
    with host:
        raw = container.logs(tail=int(tail or 200), since=since, grep=grep, timestamps=grep is None)
        status = container.status() if grep is None else None
    if grep is not None and not raw.strip():
        return no_log_match(container.name, grep, int(tail or 200), since)
    ended = status.finished_at if status is not None and status.exists and not status.running else None
    diagnosis = container_diagnosis(raw, deployment_of(ctx.services), ended_at=ended, now=ctx.services.now())
    return log_excerpt(f"`{container.name}` log", plain_log(raw), f"{container.name}.log", diagnosis)


@registry.command(
    "vllm syslog",
    "The TPU VM's system journal for a unit (default docker.service; SYSLOG_UNITS, admins: any)",
    Param.option(
        "unit",
        "systemd unit (default docker.service; others than SYSLOG_UNITS need the admin role)",
        ssh.unit_name,
        "U",
    ),
    _TAIL,
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
    created = f", created {shown_time(target['created'])}" if target.get("created") else ""
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
        # The container this command ran, if any, and if it is the one now under the name.
        ran = not isinstance(done, ReplaceOutcome) or done.replaced
        project = ctx.services.settings.gcp_project  # said once when it ran; then by its docker state
        logging = log_route_line(container.log_route if ran else None) or log_driver_line(
            container.name, status, project
        )
        if logging:
            state += "\n" + logging
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
