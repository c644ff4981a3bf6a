"""The vLLM container on the TPU VM: status/start/stop/restart/rm/logs/syslog/bench, over SSH.

`VllmContainer` is the facade the bot uses. It runs only the templates of `ops.remote_commands` through
`ops.ssh.RemoteHost` (docker run flags from docs/vllm.md §4.1, an explicit `vllm serve` command as §4.2
explains, `docker rm -f` before a restart because only one process may own the TPU, §4.3).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from ops import faults
from ops.errors import (
    AlreadyExists,
    BackendUnavailable,
    NotFound,
    OpsError,
    PermissionDenied,
    QuotaExceeded,
)
from ops.linear import linear
from ops.remote_commands import validate
from ops.ssh import CommandResult, RemoteHost

__all__ = ["BenchParams", "ContainerStatus", "VllmContainer", "VllmSpec"]


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
    """

    image: str = "vllm/vllm-tpu:gemma4"
    model: str = "google/gemma-4-31B-it"
    tensor_parallel_size: int = 8
    max_model_len: int = 16384
    port: int = 8000
    hf_token_secret: str = "hf-token"  # noqa: S105 - the secret's name, not a secret
    api_key_secret: str | None = None


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


_RFC3339 = linear(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$")
_ABSENT = ContainerStatus(False, "absent", None, None, 0, False)


def _docker_time(value: Any) -> datetime | None:
    """Docker's RFC 3339 timestamps (nanoseconds); "0001-01-01T00:00:00Z" means never."""
    if not isinstance(value, str) or not value or value.startswith("0001-"):
        return None
    match = _RFC3339.match(value)
    if not match:
        return None
    fraction = (match.group(2) or "0")[:6].ljust(6, "0")
    zone = "+00:00" if match.group(3) == "Z" else match.group(3)
    return datetime.fromisoformat(f"{match.group(1)}.{fraction}{zone}").astimezone(UTC)


class VllmContainer:
    """The vLLM container on the TPU VM, driven over `RemoteHost` with the allowed templates only.

    Args:
        remote: the SSH host.
        name: the container name (validated like every argument): the deployment's VLLM_CONTAINER, the
            name the startup script gives the container it runs.
        stop_timeout_s: seconds docker waits for vLLM to exit before SIGKILL on stop.
        bench_timeout_s: seconds a `vllm bench serve` may run.
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
        if result.exit_status != 0 and "no such" in (result.stderr + result.stdout).lower():
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
        exit_code = state.get("ExitCode")
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

    def restart(self, spec: VllmSpec) -> ContainerStatus:
        """Recreate the container: `docker rm -f` (frees the TPU even from a dead container, docs/vllm.md §4.3
        device-busy) then `docker run` with `spec`.

        Returns:
            The status after `docker run`.
        """
        self.rm()
        self._run(spec)
        return self.status()

    def rm(self) -> None:
        """`docker rm -f`. Idempotent: a missing container is not an error."""
        result = self.remote.run("docker_rm_force", container=self.name)
        if result.exit_status != 0 and "no such container" in result.stderr.lower():
            return
        self._check(result, "rm -f")

    def logs(self, tail: int = 200, since: str | None = None, grep: str | None = None) -> str:
        """The container's log (stdout and stderr merged), optionally filtered on the VM.

        Args:
            tail: last lines, 1..10000.
            since: only lines newer than this Go duration ("10m", "2h").
            grep: keep lines containing this literal text (`grep -F`), printable, at most 200 chars.

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
            args["text"] = grep
            name += "_grep"
            # grep hides docker's "No such container" (it goes through the pipe): check existence first.
            self.remote.render(name, **args)  # BadInput before anything is sent
            if not self.status().exists:
                raise self._not_found()
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

        Parse it with `ops.bench.parse_bench_serve`.

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
        keyed = {"api_key_secret": spec.api_key_secret} if spec.api_key_secret else {}
        result = self.remote.run(
            "docker_run_vllm_api_key" if keyed else "docker_run_vllm",
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
        if result.exit_status in (3, 4):
            text = result.stderr
            secret = spec.hf_token_secret if result.exit_status == 3 else str(spec.api_key_secret)
            message = f"cannot read secret {secret} from Secret Manager on {self.remote.host}"
            hint = (
                "grant the VM's service account roles/secretmanager.secretAccessor on "
                f"{secret} and give the VM the cloud-platform scope"
            )
            if "NOT_FOUND" in text:
                raise NotFound(
                    message + ": no such secret", "create it: gcloud secrets create ...", backend="ssh"
                )
            if "PERMISSION_DENIED" in text or "403" in text:
                raise PermissionDenied(message + ": permission denied", hint, backend="ssh")
            raise OpsError(message + f": {_last_line(text)}", hint, backend="ssh")
        self._check(result, "run")

    def _not_found(self) -> NotFound:
        return NotFound(
            f"no container {self.name} on {self.remote.host}", "start it with /vllm start", backend="ssh"
        )

    def _check(self, result: CommandResult, action: str, *, tool: str = "docker") -> None:
        """Raise the typed error for a failed command (exit status != 0)."""
        if result.exit_status == 0:
            return
        text = result.stderr or result.stdout
        lower = text.lower()
        message = f"{tool} {action} {self.name} on {self.remote.host} failed (exit {result.exit_status})"
        detail = _last_line(text)
        if detail:
            message += f": {detail}"
        if "no such container" in lower:
            raise self._not_found()
        if result.exit_status == 127:
            raise BackendUnavailable(message, f"is {tool} installed on the VM?", backend="ssh")
        known = faults.explain(text)
        if known is not None and known[0].name == "docker-socket-denied":
            raise PermissionDenied(message, known[2], backend="ssh")
        if "sudo:" in lower and "password" in lower:
            raise PermissionDenied(message, "allow passwordless sudo for the SSH user", backend="ssh")
        if "already in use by container" in lower:  # docker's name conflict, not a busy TPU
            raise AlreadyExists(message, "remove it first (/vllm restart recreates it)", backend="ssh")
        if known is None:
            raise OpsError(message, "see /vllm logs", backend="ssh")
        family, conclusion, fix = known
        if family.name == "docker-pull-rate-limit":
            raise QuotaExceeded(message, f"{conclusion}: {fix}", backend="ssh")
        raise OpsError(message, f"{conclusion}: {fix}", backend="ssh")


def _last_line(text: str, limit: int = 300) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    line = lines[-1] if lines else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"
