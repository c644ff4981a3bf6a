"""The vLLM container on the TPU VM: status/start/stop/restart/rm/logs/syslog/bench, over SSH.

`VllmContainer` is the facade the bot uses. It runs only the templates of `ops.vllm.ssh.TEMPLATES` through
`ops.vllm.ssh.RemoteHost` (the startup script's docker run flags, command and log options:
`ops.vllm.dockerrun`). A restart replaces, it does not remove first (`replace`, docs/vllm.md §4.3): the image
is checked and pulled while the old container still serves; only then is the old one stopped (one process
may own the TPU) and renamed aside, and it comes back if the new one fails to start. A container the bot
runs sends its output to Cloud Logging as the startup script's does (`LogRoute`, docs/vllm.md §4.4).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from ops.diagnosis.engine import diagnose
from ops.diagnosis.wordings import wording
from ops.errors import (
    AlreadyExists,
    BackendUnavailable,
    BadInput,
    NotFound,
    OpsError,
    PermissionDenied,
    QuotaExceeded,
)
from ops.gcp.cloudlogs import NODE_LABEL, WORKER_LABEL
from ops.linear import linear
from ops.times import parse_rfc3339
from ops.vllm.dockerrun import UNKNOWN_NODE, tpu_env_values
from ops.vllm.ssh import CommandResult, RemoteHost, validate

__all__ = [
    "BenchParams",
    "ContainerStatus",
    "LogRoute",
    "ReplaceOutcome",
    "VllmContainer",
    "VllmSpec",
    "docker_error_line",
    "exit_reason",
    "log_error_line",
    "served_names",
    "timed_lines",
]


# -- the vLLM container ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class VllmSpec:
    """How to run the vLLM container (defaults: Gemma 4 31B on v6e-8, docs/vllm.md §4.1).

    Attributes:
        image: the vllm-tpu image, e.g. "vllm/vllm-tpu:gemma4".
        model: Hugging Face model id served.
        tensor_parallel_size: chips to shard over (8 on v6e-8; 4 is the stated minimum for 31B).
        max_model_len: context window in tokens (the recipes use 16384).
        port: the port vLLM listens on (host network).
        hf_token_secret: Secret Manager secret holding the Hugging Face token, read on the VM.
        api_key_secret: Secret Manager secret holding the vLLM API key, read on the VM (None: no key).
        project: the GCP project whose Cloud Logging gets the container's output through Docker's gcplogs
            driver (the deployment's GCP_PROJECT, as the startup script's `--log-opt gcp-project`); None:
            Docker's default log driver, the output reaches `docker logs` only.
    """

    image: str = "vllm/vllm-tpu:gemma4"
    model: str = "google/gemma-4-31B-it"
    tensor_parallel_size: int = 8
    max_model_len: int = 16384
    port: int = 8000
    hf_token_secret: str = "hf-token"  # noqa: S105 - the secret's name, not a secret
    api_key_secret: str | None = None
    project: str | None = None


@dataclass(frozen=True)
class LogRoute:
    """Where the output of a container the bot ran goes (`VllmContainer.log_route`).

    Attributes:
        project: the project whose Cloud Logging it was sent to (log `gcplogs-docker-driver`).
        node, worker: the labels its entries carry (`tpu_node`, `tpu_worker_id`): the TPU node and worker
            the VM's tpu-env metadata attribute names; node `UNKNOWN_NODE` when it names none (not a TPU
            VM), as the startup script labels it then.
        refused: None when Docker's gcplogs driver took the output; else docker's error line for the
            refused driver: the container runs with Docker's default driver and its output reaches
            `docker logs` only, not Cloud Logging.
    """

    project: str
    node: str
    worker: int
    refused: str | None = None

    @property
    def cloud_logging(self) -> bool:
        """The output reaches Cloud Logging."""
        return self.refused is None


@dataclass(frozen=True)
class BenchParams:
    """Arguments of `vllm bench serve` (defaults from the tpu-recipes Trillium README, docs/vllm.md §3.1).

    Attributes:
        model: model id (as served).
        num_prompts: requests to send.
        input_len, output_len: random-dataset prompt and output lengths in tokens.
        max_concurrency: requests in flight at most.
        port: the vLLM port inside the container's (host) network.
    """

    model: str = "google/gemma-4-31B-it"
    num_prompts: int = 100
    input_len: int = 1024
    output_len: int = 128
    max_concurrency: int = 16
    port: int = 8000


@dataclass(frozen=True)
class ContainerStatus:
    """State of the container from `docker inspect`.

    Attributes:
        exists: False if docker knows no container of that name.
        state: docker's State.Status ("created", "running", "paused", "restarting", "removing", "exited",
            "dead"), or "absent".
        image: the image reference it was created from (Config.Image), or None.
        started_at: State.StartedAt (UTC), None if never started.
        restart_count: docker's RestartCount.
        running: State.Running.
        exit_code: State.ExitCode (meaningful when exited), or None.
        finished_at: State.FinishedAt (UTC), None if never finished.
        error: State.Error ("" when none).
        command: the command it runs (Config.Cmd, e.g. ("vllm", "serve", MODEL, "--port", "8000", ...)),
            () when docker does not say.
        log_driver: its log driver (HostConfig.LogConfig.Type: "gcplogs" sends its output to Cloud Logging,
            "json-file" and the other drivers keep it on the VM), None when docker does not say.
    """

    exists: bool
    state: str
    image: str | None
    started_at: datetime | None
    restart_count: int
    running: bool
    exit_code: int | None = None
    finished_at: datetime | None = None
    error: str = ""
    command: tuple[str, ...] = ()
    log_driver: str | None = None

    def flag(self, name: str) -> str | None:
        """The value of `--name VALUE` or `--name=VALUE` in `command` (the last one given), or None."""
        value = None
        for i, word in enumerate(self.command):
            if word == name and i + 1 < len(self.command):
                value = self.command[i + 1]
            elif word.startswith(name + "="):
                value = word.split("=", 1)[1]
        return value


def served_names(command: tuple[str, ...]) -> tuple[str, ...]:
    """The model names a `vllm serve` command serves under: its `--served-model-name` values, else the
    model (the positional after `serve`, or `--model`); () when it is not such a command.

    vLLM lists these as the ids of `/v1/models` (`--served-model-name` "the model name(s) used in the API;
    if not specified, the model name will be the same as the --model argument",
    https://docs.vllm.ai/en/latest/configuration/serve_args.html).
    """
    words = list(command)
    if "serve" not in words:
        return ()
    rest = words[words.index("serve") + 1 :]
    names: list[str] = []
    for i, word in enumerate(rest):
        if word == "--served-model-name":  # nargs="+": the words up to the next flag
            for value in rest[i + 1 :]:
                if value.startswith("-"):
                    break
                names.append(value)
        elif word.startswith("--served-model-name="):
            names.append(word.split("=", 1)[1])
    if names:
        return tuple(names)
    if rest and not rest[0].startswith("-"):
        return (rest[0],)
    model = ContainerStatus(True, "", None, None, 0, False, command=tuple(rest)).flag("--model")
    return (model,) if model else ()


@dataclass(frozen=True)
class ReplaceOutcome:
    """What `VllmContainer.replace` did.

    Attributes:
        status: the container now under the name (the new one, or the old one restored).
        pulled: the image was pulled (it was not on the VM yet).
        replaced: the new container runs and the previous one was removed.
        restored: the new one failed to start and the previous one is back under its name (started again
            if it was running).
        error: why the new one failed: the real docker or vLLM error line (None when it runs).
        previous_image: the image the previous container ran, None when there was none.
    """

    status: ContainerStatus
    pulled: bool
    replaced: bool
    restored: bool = False
    error: OpsError | None = None
    previous_image: str | None = None


_ABSENT = ContainerStatus(False, "absent", None, None, 0, False)


def _docker_time(value: Any) -> datetime | None:
    """Docker's RFC 3339 timestamps (nanoseconds); "0001-01-01T00:00:00Z" means never."""
    if not isinstance(value, str) or not value or value.startswith("0001-"):
        return None
    return parse_rfc3339(value)


def timed_lines(text: str) -> list[tuple[datetime | None, str]]:
    """The lines of `docker logs --timestamps` output, each split into its time and its text.

    Docker puts the entry's RFC3339Nano time and one space before every line it prints
    (https://docs.docker.com/reference/cli/docker/container/logs/). A line without one (output of a docker
    that ignored the flag, or a line of the message that spans several) keeps its text and gets None.

    Args:
        text: the command's output.

    Returns:
        (aware UTC time or None, the line without the time), in order.
    """
    out: list[tuple[datetime | None, str]] = []
    for line in text.splitlines():
        stamp, _, rest = line.partition(" ")
        when = _docker_time(stamp)
        out.append((when, rest) if when is not None else (None, line))
    return out


class VllmContainer:
    """The vLLM container on the TPU VM, driven over `RemoteHost` with the allowed templates only.

    Args:
        remote: the SSH host.
        name: the container name (validated like every argument): the deployment's VLLM_CONTAINER, the
            name the startup script gives the container it runs.
        stop_timeout_s: seconds docker waits for vLLM to exit before SIGKILL on stop.
        bench_timeout_s: seconds a `vllm bench serve` may run.

    Attributes:
        log_route: where the output of the container this object last ran (`docker run`: `start` of a
            missing container, `replace`) goes; None before a run, or for a spec without a project.
    """

    def __init__(
        self,
        remote: RemoteHost,
        name: str,
        *,
        stop_timeout_s: int = 30,
        bench_timeout_s: float = 3600,
    ) -> None:
        self.remote = remote
        self.name = validate("container", name)
        self.stop_timeout_s = stop_timeout_s
        self.bench_timeout_s = bench_timeout_s
        self.log_route: LogRoute | None = None

    def __repr__(self) -> str:
        return f"VllmContainer({self.name!r} on {self.remote.display})"

    def status(self) -> ContainerStatus:
        """`docker inspect` the container.

        Returns:
            ContainerStatus; `exists=False, state="absent"` when there is no such container.

        Raises:
            The errors of `RemoteHost.run`; the docker errors of `_check` (e.g. PermissionDenied for the
            docker socket); BackendUnavailable for output that is not docker's JSON.
        """
        result = self.remote.run("docker_inspect", container=self.name)
        if result.exit_status != 0 and wording("docker-no-such-object").search(result.stderr + result.stdout):
            return _ABSENT
        self._check(result, "inspect")
        try:
            data = json.loads(result.stdout)
            item = data[0]
            state = item["State"]
        except (ValueError, LookupError, TypeError) as exc:
            raise BackendUnavailable(
                f"docker inspect {self.name} on {self.remote.host} returned unexpected output",
                "check the docker version on the VM",
                backend="ssh",
            ) from exc
        config = item.get("Config") or {}
        logger = (item.get("HostConfig") or {}).get("LogConfig") or {}
        exit_code = state.get("ExitCode")
        command = config.get("Cmd") or [item.get("Path"), *(item.get("Args") or [])]
        return ContainerStatus(
            exists=True,
            state=str(state.get("Status", "unknown")),
            image=config.get("Image") if isinstance(config.get("Image"), str) else None,
            started_at=_docker_time(state.get("StartedAt")),
            restart_count=int(item.get("RestartCount") or 0),
            running=bool(state.get("Running")),
            exit_code=exit_code if isinstance(exit_code, int) else None,
            finished_at=_docker_time(state.get("FinishedAt")),
            error=str(state.get("Error") or ""),
            command=tuple(str(word) for word in command if isinstance(word, str)),
            log_driver=logger.get("Type") if isinstance(logger.get("Type"), str) else None,
        )

    def start(self, spec: VllmSpec) -> ContainerStatus:
        """Start the container: `docker start` if it exists (its original flags are kept), else `docker run`.

        Does NOT remove a dead container holding the TPU; use `restart` for that (docs/vllm.md §4.3).

        Args:
            spec: used only when the container must be created.

        Returns:
            The status after the command (vLLM itself needs about 10 minutes to become ready on TPU).

        Raises:
            BadInput (invalid spec), the errors of `RemoteHost.run` and of `_check`.
        """
        if self.status().exists:
            self._check(self.remote.run("docker_start", container=self.name), "start")
        else:
            self._run(spec)
        return self.status()

    def stop(self) -> ContainerStatus:
        """`docker stop --time stop_timeout_s`. Raises NotFound if there is no such container."""
        result = self.remote.run(
            "docker_stop",
            container=self.name,
            stop_timeout_s=self.stop_timeout_s,
            timeout_s=self.remote.command_timeout_s + self.stop_timeout_s,
        )
        self._check(result, "stop")
        return self.status()

    def restart(self, spec: VllmSpec, *, settle_s: float = 30.0) -> ReplaceOutcome:
        """Recreate the container with `spec`, keeping the old one until the new one runs: see `replace`."""
        return self.replace(spec, settle_s=settle_s)

    def replace(
        self,
        spec: VllmSpec,
        *,
        settle_s: float = 30.0,
        poll_s: float = 1.0,
        sleep: Callable[[float], None] = time.sleep,
    ) -> ReplaceOutcome:
        """Replace the container by one running `spec`, and put the old one back if the new one fails.

        1. The image: `docker image inspect`, and `docker pull` when it is not on the VM, while the old
           container still serves. A pull refused (no such tag, access denied, rate limit, disk full)
           raises before anything is touched.
        2. The old container (if any) is stopped (one process may own the TPU, and the port) and renamed
           to NAME-previous.
        3. `docker run` of the new one under NAME; it must still run `settle_s` seconds later (vLLM binds
           its port and reads its arguments in its first seconds, so "address already in use", a bad flag
           or a refused model download end it within that time; loading the weights takes minutes more).
        4. Success: NAME-previous is removed. Failure: the new container is removed, NAME-previous renamed
           back and started again if it was running, and the outcome carries the new one's error.

        Args:
            spec: the new container's image, model and flags.
            settle_s: seconds the new container must keep running, checked every `poll_s`.
            sleep: the wait between checks (tests pass a fake).

        Returns:
            ReplaceOutcome.

        Raises:
            OpsError (QuotaExceeded, NotFound, PermissionDenied, ...): the image could not be pulled, or the
                old container could not be stopped or renamed aside (it is left as it was).
            BadInput: NAME-previous is not a valid container name (NAME too long).
        """
        aside = validate("container", f"{self.name}-previous")
        try:
            pulled = self.ensure_image(spec.image)
            old = self.status()
        except OpsError as exc:
            raise _untouched(exc, f"{self.name} was not touched") from exc
        if old.exists:
            self._set_aside(old, aside)
        failure = self._start_new(spec, settle_s, poll_s, sleep)
        if failure is None:
            if old.exists:
                self._check(self.remote.run("docker_rm_force", container=aside), "rm -f")
            return ReplaceOutcome(self.status(), pulled, replaced=True, previous_image=old.image)
        if not old.exists:
            return ReplaceOutcome(self.status(), pulled, replaced=False, error=failure)
        self.rm()
        self._check(self.remote.run("docker_rename", container=aside, new_name=self.name), "rename")
        if old.running:
            self._check(self.remote.run("docker_start", container=self.name), "start")
        return ReplaceOutcome(
            self.status(), pulled, replaced=False, restored=True, error=failure, previous_image=old.image
        )

    def _set_aside(self, old: ContainerStatus, aside: str) -> None:
        """Stop the old container and rename it to `aside`; on a failure it is started again (if it ran)
        and the error says so."""
        try:
            if self._status_of(aside).exists:  # left by an interrupted replace: NAME is the newer one
                self._check(self.remote.run("docker_rm_force", container=aside), "rm -f")
            if old.running:
                self.stop()
            self._check(self.remote.run("docker_rename", container=self.name, new_name=aside), "rename")
        except OpsError as exc:
            if old.running and not self.status().running:
                self._check(self.remote.run("docker_start", container=self.name), "start")
            kept = f"{self.name} was kept" + (" and started again" if old.running else "")
            raise _untouched(exc, kept) from exc

    def ensure_image(self, image: str) -> bool:
        """Make sure `image` is on the VM: `docker image inspect`, then `docker pull` if it is missing.

        Returns:
            True if it was pulled, False if it was already there.

        Raises:
            The errors of `_check` for a refused pull, with docker's own error line ("manifest unknown",
            "pull access denied", "toomanyrequests", "no space left on device").
        """
        found = self.remote.run("docker_image_inspect", image=image)
        if found.exit_status == 0:
            return False
        if not wording("docker-no-such-image").search(found.stderr + found.stdout):
            self._check(found, f"image inspect {image}", subject=False)
        pulled = self.remote.run(
            "docker_pull", image=image, timeout_s=max(self.remote.command_timeout_s, 900.0)
        )  # a multi-GB image
        self._check(pulled, f"pull {image}", subject=False)
        return True

    def _start_new(
        self, spec: VllmSpec, settle_s: float, poll_s: float, sleep: Callable[[float], None]
    ) -> OpsError | None:
        """`docker run` the new container and watch it for `settle_s`; its error, or None if it runs."""
        try:
            self._run(spec)
        except OpsError as exc:
            return exc
        waited = 0.0
        while True:
            status = self.status()
            if not status.running:
                return self._exited_error(status)
            if waited >= settle_s:
                return None
            step = min(poll_s, settle_s - waited)
            sleep(step)
            waited += step

    def _exited_error(self, status: ContainerStatus) -> OpsError:
        """The error of a new container that stopped: its state, the error line of its log, and the
        catalogue's finding over the log's last 200 lines (the container is removed after this, so its log
        is read here or never)."""
        code = f" with code {status.exit_code}" if status.exit_code is not None else ""
        try:
            log = self.logs(tail=200)
        except OpsError:
            log = ""
        detail = log_error_line(log)
        message = f"the new container {self.name} on {self.remote.host} {status.state}{code} at once"
        known = diagnose(log).top if log else None
        if known:
            hint = f"{known.conclusion}: {known.fix}"
        else:
            hint = "the line above is the last error of its log" if detail else "its log shows no error line"
        return OpsError(message + (f": {detail}" if detail else ""), hint, backend="ssh")

    def _status_of(self, name: str) -> ContainerStatus:
        return VllmContainer(self.remote, name, stop_timeout_s=self.stop_timeout_s).status()

    def rm(self) -> None:
        """`docker rm -f`. Idempotent: a missing container is not an error."""
        result = self.remote.run("docker_rm_force", container=self.name)
        if result.exit_status != 0 and wording("docker-no-such-container").search(result.stderr):
            return
        self._check(result, "rm -f")

    def logs(
        self, tail: int = 200, since: str | None = None, grep: str | None = None, *, timestamps: bool = False
    ) -> str:
        """The container's log (stdout and stderr merged), optionally filtered on the VM.

        Args:
            tail: last lines, 1..10000.
            since: only lines newer than this Go duration ("10m", "2h").
            grep: keep lines containing this literal text (`grep -F`), printable, at most 200 chars.
            timestamps: each line starts with its RFC 3339 time (`docker logs --timestamps`; split them off
                with `timed_lines`); not with `grep`.

        Returns:
            The log text ("" when grep matched nothing).

        Raises:
            BadInput, NotFound (no such container), and the errors of `RemoteHost.run`.
        """
        args: dict[str, Any] = {"container": self.name, "tail": tail}
        name = "docker_logs"
        if since is not None:
            args["since"] = since
            name += "_since"
        if grep is not None:
            if timestamps:
                raise ValueError("timestamps and grep are not combined")
            args["text"] = grep
            name += "_grep"
            # grep hides docker's "No such container" (it goes through the pipe): check existence first.
            self.remote.render(name, **args)  # BadInput before anything is sent
            if not self.status().exists:
                raise self._not_found()
        if timestamps:
            name += "_timed"
        result = self.remote.run(name, **args)
        if grep is not None and result.exit_status == 1 and not result.stdout:
            return ""  # grep: no line matched
        self._check(result, "logs")
        return result.stdout

    def syslog(self, unit: str = "docker.service", tail: int = 200) -> str:
        """`journalctl -u UNIT -n TAIL --no-pager` on the VM (system log of a unit).

        Returns:
            The journal text ("-- No entries --" when the unit logged nothing).
        """
        result = self.remote.run("journalctl", unit=unit, tail=tail)
        self._check(result, "journalctl", tool="journalctl")
        return result.stdout

    def bench(self, params: BenchParams) -> str:
        """Run `vllm bench serve` inside the container (docs/vllm.md §3.1) and return its raw stdout.

        Parse it with `ops.vllm.bench.parse_bench_serve`.

        Raises:
            BackendTimeout after `bench_timeout_s`; the errors of `_check` when the benchmark fails.
        """
        result = self.remote.run(
            "vllm_bench_serve",
            container=self.name,
            model=params.model,
            num_prompts=params.num_prompts,
            input_len=params.input_len,
            output_len=params.output_len,
            max_concurrency=params.max_concurrency,
            port=params.port,
            timeout_s=self.bench_timeout_s,
        )
        self._check(result, "exec vllm bench serve")
        return result.stdout

    # -- helpers ---------------------------------------------------------------------------------------------

    def _run(self, spec: VllmSpec) -> None:
        """`docker run` the container; with a project, with Docker's gcplogs driver, as the startup script
        does (`ops.vllm.deploy`), else with Docker's default driver. Sets `log_route`.

        Docker refuses the gcplogs driver when the VM's service account may not write logs (the driver
        fails to start, leaving the container "created") or is older than 20.10 (`cache-disabled` is an
        unknown option), and says so (the catalogue's `docker-log-driver-refused`, moby's messages): only
        then is the run made again without the log options, as the startup script does, and
        `log_route.refused` says why (serving never depends on logging). Any other failure (a tag that does
        not exist, a denied pull, a full disk) is reported as `_check` diagnoses it: without the log options
        it would fail the same way. A pull the registry rate-limited is not run again: the registry refuses
        until its window has passed (Docker Hub's is 6 hours), and the catalogue's fix says when to try.

        Raises:
            BadInput (invalid spec), NotFound / PermissionDenied (a secret the VM cannot read), the errors of
            `RemoteHost.run` and of `_check` (QuotaExceeded for a rate-limited pull).
        """
        self.log_route = None
        route = self._labels(spec.project) if spec.project is not None else None
        result = self._run_template(spec, route)
        if route is not None and result.exit_status not in (0, 3, 4) and _driver_refused(result):
            if self.status().state == "created":  # made by this run, whose log driver did not start
                self.rm()
            refused = docker_error_line(result.stderr or result.stdout) or f"exit {result.exit_status}"
            result = self._run_template(spec, None)
            route = replace(route, refused=refused)
        if result.exit_status in (3, 4):
            text = result.stderr
            secret = spec.hf_token_secret if result.exit_status == 3 else str(spec.api_key_secret)
            message = f"cannot read secret {secret} from Secret Manager on {self.remote.host}"
            hint = (
                "grant the VM's service account roles/secretmanager.secretAccessor on "
                f"{secret} and give the VM the cloud-platform scope"
            )
            if wording("secret-not-found").search(text):
                raise NotFound(
                    message + ": no such secret", "create it: gcloud secrets create ...", backend="ssh"
                )
            if wording("secret-permission-denied").search(text):
                raise PermissionDenied(message + ": permission denied", hint, backend="ssh")
            raise OpsError(message + f": {docker_error_line(text)}", hint, backend="ssh")
        self._check(result, "run")
        self.log_route = route

    def _labels(self, project: str) -> LogRoute:
        """The route of a container's output to `project`'s Cloud Logging, labelled with the TPU node and
        worker the VM's tpu-env metadata attribute names, read on the VM.

        That attribute is where the startup script reads the labels of the container it runs, so a
        container the bot runs carries the same labels, and `/logs --node`, the diagnosis and the alerts
        find it as they find the startup script's. The node the bot connects to is not used: with SSH_HOST
        set it knows none, and no API field says which worker of a slice answers on an address; the VM says
        both. A value that is not a node id (or a worker number) is labelled as the startup script labels
        it: `UNKNOWN_NODE` (worker 0).

        Raises:
            BadInput: `project` is not a project id. The errors of `RemoteHost.run`.
        """
        validate("project", project)
        read = self.remote.run("tpu_env")
        values = tpu_env_values(read.stdout) if read.exit_status == 0 else {}
        try:
            node = validate("node", values.get("NODE_ID"))
        except BadInput:
            node = UNKNOWN_NODE
        try:
            worker = int(validate("worker", values.get("WORKER_ID")))
        except BadInput:
            worker = 0
        return LogRoute(project, node, worker)

    def _run_template(self, spec: VllmSpec, route: LogRoute | None) -> CommandResult:
        """The `docker run` of `spec`: with the gcplogs options and `route`'s labels, or without (None)."""
        keyed: dict[str, Any] = {"api_key_secret": spec.api_key_secret} if spec.api_key_secret else {}
        name = "docker_run_vllm" + ("_api_key" if keyed else "")
        if route is not None:  # the placeholders of ops.vllm.dockerrun.GCPLOGS_OPTIONS
            name += "_gcplogs"
            keyed |= {"project": route.project, "node_label": NODE_LABEL, "worker_label": WORKER_LABEL}
            keyed |= {"node": route.node, "worker": route.worker}
        return self.remote.run(
            name,
            secret=spec.hf_token_secret,
            container=self.name,
            image=spec.image,
            model=spec.model,
            tensor_parallel_size=spec.tensor_parallel_size,
            max_model_len=spec.max_model_len,
            port=spec.port,
            timeout_s=max(self.remote.command_timeout_s, 900.0),  # a first run pulls a large image
            **keyed,
        )

    def _not_found(self) -> NotFound:
        return NotFound(
            f"no container {self.name} on {self.remote.host}", "start it with /vllm start", backend="ssh"
        )

    def _check(
        self, result: CommandResult, action: str, *, tool: str = "docker", subject: bool = True
    ) -> None:
        """Raise the typed error for a failed command (exit status != 0), with docker's own error line.

        Args:
            action: the command's words after the tool ("run", "pull IMAGE").
            subject: name the container after `action` (False for image commands).
        """
        if result.exit_status == 0:
            return
        text = result.stderr or result.stdout
        target = f" {self.name}" if subject else ""
        message = f"{tool} {action}{target} on {self.remote.host} failed (exit {result.exit_status})"
        detail = docker_error_line(text)
        if detail:
            message += f": {detail}"
        if wording("docker-no-such-container").search(text):
            raise self._not_found()
        if result.exit_status == 127:
            raise BackendUnavailable(message, f"is {tool} installed on the VM?", backend="ssh")
        known = diagnose(text).top
        if known is not None and known.name == "docker-socket-denied":
            raise PermissionDenied(message, known.fix, backend="ssh")
        if wording("sudo-password-required").search(text):
            raise PermissionDenied(message, "allow passwordless sudo for the SSH user", backend="ssh")
        if known is not None and known.name == "docker-container-name-in-use":  # not a busy TPU
            raise AlreadyExists(message, "remove it first (/vllm restart recreates it)", backend="ssh")
        if known is None:
            raise OpsError(message, "see /vllm logs", backend="ssh")
        if known.name == "docker-pull-rate-limit":
            raise QuotaExceeded(message, f"{known.conclusion}: {known.fix}", backend="ssh")
        raise OpsError(message, f"{known.conclusion}: {known.fix}", backend="ssh")


def _driver_refused(result: CommandResult) -> bool:
    """Whether a failed `docker run` is the daemon refusing the container's log driver (its own error, not
    one of the image or the container: a pull refused, a name in use)."""
    return wording("docker-log-driver-refused").search(result.stderr + result.stdout) is not None


def _untouched(error: OpsError, kept: str) -> OpsError:
    """`error` (same type) with what was kept said at the end of its message."""
    return type(error)(f"{error.message}; {kept}", error.hint, backend=error.backend)


# Lines of docker's output that say nothing about the cause: usage hints, pull progress.
_DOCKER_NOISE = linear(
    r"^(?:See 'docker [\w -]+--help'\.?|Unable to find image .* locally|Run 'docker [\w -]+--help'.*"
    r"|[\w.-]+: Pulling from .*|[0-9a-f]{12}: (?:Pulling fs layer|Waiting|Downloading|Verifying Checksum"
    r"|Download complete|Extracting|Pull complete|Already exists).*|Digest: sha256:.*|Status: .*)$"
)
_ERRORS_OCCURRED = linear(r":?\s*\d+ errors? occurred:?$")  # the heading of docker's multi-error list


def docker_error_line(text: str, limit: int = 300) -> str:
    """The line of a docker command's output that names the cause, without docker's "docker: " prefix.

    Preference: a line with a root-cause wording ("no space left on device", "manifest unknown", "pull
    access denied", "toomanyrequests", ...), else an "Error response from daemon" line, else the last line
    that is not a usage hint ("See 'docker run --help'.") or pull progress. A multi-error bullet ("* write
    ...: no space left on device") keeps its heading ("failed to register layer: write ...").

    Returns:
        One line of at most `limit` characters, "" for empty output.
    """
    lines = [line.strip() for line in text.strip().splitlines()]
    meaningful = [i for i, line in enumerate(lines) if line and not line.startswith("#")]
    useful = [i for i in meaningful if not _DOCKER_NOISE.match(lines[i])] or meaningful
    if not useful:
        return ""
    causes, daemon = wording("docker-root-cause"), wording("docker-daemon-error")
    chosen = next(
        (i for i in reversed(useful) if causes.search(lines[i])),
        next((i for i in reversed(useful) if daemon.search(lines[i])), useful[-1]),
    )
    line = lines[chosen].removeprefix("docker: ")
    if line.startswith("* "):
        heading = next(
            (lines[i] for i in reversed(useful) if i < chosen and not lines[i].startswith("*")), ""
        )
        heading = _ERRORS_OCCURRED.sub("", heading.removeprefix("docker: ")).strip()
        line = f"{heading}: {line[2:]}" if heading else line[2:]
    # the registry's message repeated after the cause ends in a period ("...: manifest unknown.")
    line = line.removesuffix(".") if line.endswith(".") and causes.search(line.rsplit(":", 1)[-1]) else line
    return line if len(line) <= limit else line[: limit - 1] + "…"


# The last error of a Python process's log: an exception line ("OSError: [Errno 98] Address already in use")
# or a logged ERROR line.
_EXCEPTION = linear(r"^(?:\(\w+ pid=\d+\) )?(?P<text>[\w.]+(?:Error|Exception): .+)$")
_ERROR_LOG = linear(r"\bERROR\b.*?\]\s*(?P<text>.+)$")
_ERRNO = linear(r"^\[Errno \d+\]\s*")


def log_error_line(log: str) -> str:
    """The last exception line of a container's log (else its last ERROR line), e.g. "OSError: [Errno 98]
    Address already in use"; "" when there is none."""
    found = ""
    for raw in log.splitlines():
        line = raw.strip()
        match = _EXCEPTION.match(line)
        if match:
            found = match["text"]
        elif not found:
            logged = _ERROR_LOG.search(line)
            found = logged["text"] if logged else found
    return found[:300]


def exit_reason(log: str) -> str:
    """What ended a process, in a few words, from `log_error_line`: "address already in use" from
    "OSError: [Errno 98] Address already in use"; "" when the log names nothing."""
    line = log_error_line(log)
    if not line:
        return ""
    text = line.split(": ", 1)[1] if ": " in line else line
    text = _ERRNO.sub("", text).strip()
    return (text[:1].lower() + text[1:])[:120]
