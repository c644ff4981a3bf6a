"""Is vLLM there to take a command? Commands that need a serving vLLM (benchmarks, completions, the model
list, metrics) ask here before (or instead of) showing a tool's raw connection error: while the server
loads they say it is starting and when it is expected to answer, from the container's start time read over
SSH and the /health answer, the state as the bot just read it.

vLLM on TPU downloads the weights and compiles before it listens. How long that takes depends on the model,
the network, the TPU type and whether a compilation cache is warm; the bot does not measure it. LOAD_TIME
(10 minutes) is the bot's own estimate for Gemma 4 31B on a v6e-8, not a published or measured figure, and
every answer that uses it says it is an estimate; VLLM_STARTUP_STUCK_S (1800 s by default) is when the bot
calls a start-up stuck, the room it leaves a first compile. The demo's simulated vLLM answers within
seconds: a fast start there is the simulator's, not a measurement.

The container as an answer reads it (`container_now`): running since when, or stopped, why, and what its
log's tail shows (diagnosed as `/vllm status` diagnoses it), the present cause of what a chat question asks.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.chat.asks import outcomes
from bot.commands.context import Context
from bot.services import Services
from bot.shared.diagnosis import container_diagnosis, deployment_of, plain_log
from bot.slack.render import utc
from bot.views.findings import unmatched_fact
from llm.grounding import Fact
from ops.diagnosis.engine import Diagnosis
from ops.errors import BackendTimeout, BackendUnavailable, OpsError
from ops.vllm.container import ContainerStatus

AUDIT_LINES = 200
"""How many of the newest audit lines are read for the `/vllm stop` that stopped a container."""

__all__ = [
    "CONTAINER_LOG_TAIL",
    "LOAD_TIME",
    "VLLM_LOAD",
    "ContainerNow",
    "container_now",
    "counted_names",
    "explained_when_starting",
    "not_serving",
    "require_serving",
    "stopped_text",
]

LOAD_TIME = timedelta(minutes=10)
"""The bot's estimate of a start-up (weights download, then XLA compilation), not a measurement of this
server: the module docstring says what it is based on. Every answer that uses it says it is an estimate."""
ESTIMATE_BASIS = "the bot's estimate for a 31B model on TPU (weights download, then XLA compilation)"
"""What an expected answer time rests on, said beside it."""
VLLM_LOAD = f"about {LOAD_TIME.seconds // 60} minutes (the bot's estimate)"
"""How long vLLM takes to serve again once its TPU VM is up (download and compile the model), as previews and
results say it: LOAD_TIME, marked as the bot's estimate; docs/deploy.md describes the steps."""


def not_serving(ctx: Context) -> OpsError | None:
    """Why vLLM cannot take a command now, or None when its /health is ready (or nothing can be read).

    Reads /health of the deployment's endpoint; when it is not ready, the container over SSH: running for
    less than VLLM_STARTUP_STUCK_S is "starting" with the expected time (its start + LOAD_TIME, the bot's
    estimate, said so with what it rests on: ESTIMATE_BASIS; later
    "any minute, a first compile takes up to ..."), longer is "start-up stuck", not running is "not running"
    with the command that starts it. A failing SSH keeps the /health answer as the reason.

    Returns:
        A BackendUnavailable whose message says the state and whose hint says what to do and when, or None.
    """
    services = ctx.services
    try:
        client, endpoint = services.vllm()
    except OpsError as exc:
        return exc
    with client:
        health = client.health()
    if health.state in ("ready", "not-vllm"):
        return None
    try:
        container, host = services.container()
        with host:
            status = container.status()
    except OpsError as exc:
        return BackendUnavailable(
            f"vLLM at {endpoint.url} is not answering ({health.state}: {health.detail}); its container could "
            f"not be read: {exc.message}",
            "see /vllm status",
            backend="vllm",
        )
    now = services.now()
    name = f"`{container.name}`"
    if not status.running:
        return BackendUnavailable(
            f"vLLM is not running: container {name} {stopped_text(ctx, status)}",
            f"start it with /vllm start (it then loads for about {_minutes(LOAD_TIME)}: {ESTIMATE_BASIS}); "
            "/vllm status says why it stopped",
            backend="vllm",
        )
    started = status.started_at
    if started is None:
        return BackendUnavailable(
            f"vLLM is starting: container {name} runs, not answering yet", "see /vllm status", backend="vllm"
        )
    up = now - started
    stuck_after = timedelta(seconds=services.settings.vllm_startup_stuck_s)
    if up > stuck_after:
        return BackendUnavailable(
            f"vLLM start-up looks stuck: container {name} up {_minutes(up)} without answering on its port",
            "/vllm status and /vllm logs show why (known failures are named); /vllm restart starts it again",
            backend="vllm",
        )
    expected = started + LOAD_TIME
    when = (
        f"expected to answer around {_clock(expected)}, {_minutes(expected - now)} from now: "
        f"{ESTIMATE_BASIS}, usually about {_minutes(LOAD_TIME)}, longer on a first compile"
        if expected > now
        else f"it usually answers by now ({ESTIMATE_BASIS}); a first compile can take until "
        f"{_clock(started + stuck_after)}"
    )
    return BackendUnavailable(
        f"vLLM is starting: container {name} up {_minutes(up)}, loading the model and compiling ({when})",
        "run the command again once it answers; /vllm status follows the start-up",
        backend="vllm",
    )


def stopped_text(ctx: Context, status: ContainerStatus) -> str:
    """What became of a container that does not run, as read: "exited with code 0 at 08:03 UTC, stopped by
    <@U1> with `/vllm stop` (from the audit trail)" (docker's State.ExitCode and State.FinishedAt; the
    newest `/vllm stop` that succeeded, when it ended after the container did, within a minute), else "is
    STATE". An audit trail that cannot be read leaves docker's words alone."""
    if status.state != "exited" or status.exit_code is None:
        return f"is {status.state}"
    text = f"exited with code {status.exit_code}"
    if status.finished_at is None:
        return text
    text += f" at {_clock(status.finished_at)}"
    try:
        runs = outcomes(list(reversed(ctx.services.store.audit(last=AUDIT_LINES))))
    except Exception:  # the audit store failing leaves what docker said
        return text
    for run in runs:  # newest first
        if run.state == "succeeded" and run.command.split()[:2] == ["vllm", "stop"]:
            if timedelta(0) <= run.ended_at - status.finished_at <= timedelta(minutes=1):
                text += f", stopped by <@{run.user_id}> with `/{run.command}` (from the audit trail)"
            break
    return text


def require_serving(ctx: Context) -> None:
    """Raise `not_serving`'s reason when vLLM cannot take a command now.

    Raises:
        OpsError: vLLM is starting, stuck, stopped, or has no endpoint.
    """
    problem = not_serving(ctx)
    if problem is not None:
        raise problem


@contextmanager
def explained_when_starting(ctx: Context) -> Iterator[None]:
    """Run a body that talks to vLLM; if it fails to reach it (BackendUnavailable, BackendTimeout), raise
    `not_serving`'s reason instead when there is one (starting, stuck, stopped), else the body's error."""
    try:
        yield
    except (BackendUnavailable, BackendTimeout) as exc:
        problem = not_serving(ctx)
        if problem is None:
            raise
        raise problem from exc


def _minutes(delta: timedelta) -> str:
    minutes = max(0, round(delta.total_seconds() / 60))
    return f"{minutes} min" if minutes < 120 else f"{minutes // 60} h {minutes % 60} min"


def _clock(moment: datetime) -> str:
    return utc(moment)


CONTAINER_LOG_TAIL = 400
"""Lines of a stopped container's log read for its diagnosis, as `/vllm status` reads."""


@dataclass(frozen=True)
class ContainerNow:
    """The vLLM container as chat reads it.

    Attributes:
        fact: its state now (docker inspect over SSH), with what its log says when nothing runs in it.
        down: when nothing runs in it, why, as a phrase ("`vllm` exited at 04:55 UTC (exit code 137)");
            None when it runs or cannot be read.
        diagnosis: for a stopped container, its log tail diagnosed as `/vllm status` diagnoses it
            (`bot.shared.diagnosis.container_diagnosis`): the present cause; None otherwise.
        stopped_at: when a stopped container exited (docker's `State.FinishedAt`, UTC); None otherwise.
    """

    fact: Fact
    down: str | None = None
    diagnosis: Diagnosis | None = None
    stopped_at: datetime | None = None


def container_now(services: Services, about: tuple[str, ...], departed: str = "") -> ContainerNow:
    """The vLLM container of a deployment (`services`) now, and for one that does not run, why and what its
    log says; its facts are `about` the queued resource it runs on. With `departed` (what became of the
    endpoint the deployment last used, said as `/tpu status` says it) the deployment has no endpoint in the
    state just read: a container at the old address is not its own, and is not read."""
    now = services.now()
    if departed:
        said = f"not read: no vLLM endpoint of this deployment in the state just read; {departed}"
        return ContainerNow(Fact("vLLM container", said, at=now, about=about))
    try:
        container, host = services.container()
        with host:
            status = container.status()
            stopped = status.exists and not status.running
            timed = container.logs(tail=CONTAINER_LOG_TAIL, timestamps=True) if stopped else ""
    except OpsError as exc:
        return ContainerNow(
            Fact("vLLM container", f"could not be read now: {exc.message}", at=now, about=about)
        )
    name = f"`{container.name}`"
    if status.running:
        since = f" since {status.started_at:%H:%M} UTC" if status.started_at else ""
        restarts = f", {status.restart_count} restarts" if status.restart_count else ""
        running = f"{name} is running{since}{restarts}"
        return ContainerNow(Fact("vLLM container", running, at=now, about=about))
    if not status.exists:
        down = f"no container {name} exists on the node"
        gone = Fact("vLLM container", f"{down}: nothing serves from it now", at=now, about=about)
        return ContainerNow(gone, down)
    ended = f" at {status.finished_at:%H:%M} UTC" if status.finished_at else ""
    code = f" (exit code {status.exit_code})" if status.exit_code is not None else ""
    down = f"{name} {status.state}{ended}{code}"
    diagnosis = container_diagnosis(
        timed, deployment_of(services), ended_at=status.finished_at, now=now, source="container"
    )
    said = ", ".join(counted_names(f.name for f in diagnosis.findings))
    if said:
        told = f"; its log shows: {said}"
    elif diagnosis.unmatched is not None:
        told = f"; its log: {unmatched_fact(diagnosis.unmatched)}"
    else:
        told = "; its log shows no error line"
    text = f"{down}: nothing serves from it now{told}"
    fact = Fact("vLLM container", text, plain_log(timed), at=now, about=about, logged=True)
    return ContainerNow(fact, down, diagnosis, status.finished_at)


def counted_names(names: Iterable[str]) -> list[str]:
    """Each name once, in first-seen order, with how many distinct findings it had when more than one
    (e.g. "request-too-long (2 variants)")."""
    counts = Counter(names)
    return [name if n == 1 else f"{name} ({n} variants)" for name, n in counts.items()]
