"""SSH to the TPU VM (paramiko) with host-key checking, and a fixed set of remote command templates.

Security model:
- Host keys are checked against a known_hosts file and/or keys pinned in settings. Unknown or changed keys are
  refused (`paramiko.RejectPolicy`, never `AutoAddPolicy`) with `PermissionDenied` naming the host and the
  SHA256 fingerprint the server offered.
- Only the command templates in `TEMPLATES` can run. Every argument is validated by its kind (`KINDS`) and
  then `shlex.quote`d, so shell metacharacters reach the remote program as one literal argument.
- The Hugging Face token never passes through the bot: `docker_run_vllm` reads it ON THE VM from Secret
  Manager (`gcloud secrets versions access latest --secret=NAME`) and hands it to docker through the
  environment (`-e HF_TOKEN` without a value), so it is not in any argv either.
- No private key material appears in messages or logs (only public fingerprints).

`VllmContainer` is the facade the bot uses: status/start/stop/restart/rm/logs/syslog/bench of the vLLM
container (docker run flags from docs/vllm.md §4.1, an explicit `vllm serve` command as §4.2 explains,
`docker rm -f` before a restart because only one process may own the TPU, §4.3).
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import re
import shlex
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, NoReturn

import paramiko
from paramiko.pkey import UnknownKeyType

from ops import faults
from ops.errors import (
    AlreadyExists,
    BackendTimeout,
    BackendUnavailable,
    BadInput,
    NotFound,
    OpsError,
    PermissionDenied,
    QuotaExceeded,
)

__all__ = [
    "KINDS",
    "TEMPLATES",
    "BenchParams",
    "CommandResult",
    "CommandTemplate",
    "ContainerStatus",
    "RemoteHost",
    "VllmContainer",
    "VllmSpec",
    "validate",
]

log = logging.getLogger(__name__)

# Cap on what one command may return per stream (stdout, stderr); the rest is dropped (`truncated`).
MAX_OUTPUT_BYTES = 8 * 1024 * 1024

# -- argument kinds ------------------------------------------------------------------------------------------

_CONTAINER = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$")  # docker's own container-name rule
_UNIT = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9:_.@-]{0,254}$")  # systemd unit names (no "\" escapes)
_DURATION = re.compile(r"^(?=\d)(?:\d{1,4}h)?(?:\d{1,5}m)?(?:\d{1,6}s)?$")  # Go durations, as docker --since
# Docker image reference: [registry[:port]/]path[:tag][@sha256:digest] (distribution/reference grammar,
# simplified; registry host may have upper case, the path may not).
_IMAGE = re.compile(
    r"^(?:[a-zA-Z0-9](?:[a-zA-Z0-9.-]*[a-zA-Z0-9])?(?::[0-9]{1,5})?/)?"
    r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$"
)
# Hugging Face model id: "org/name" or "name" (huggingface_hub's repo-id rule, without "--" and "..").
_MODEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}(?:/[A-Za-z0-9][A-Za-z0-9_.-]{0,95})?$")
_SECRET = re.compile(r"^[A-Za-z0-9_-]{1,255}$")  # Secret Manager secret id
_GREP_MAX = 200


def _int_kind(low: int, high: int) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        if isinstance(value, str) and re.fullmatch(r"\d{1,9}", value):
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            raise ValueError(f"an integer from {low} to {high}")
        return str(value)

    return check


def _regex_kind(pattern: re.Pattern[str], rule: str) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        if not isinstance(value, str) or not pattern.fullmatch(value) or "--" in value or ".." in value:
            raise ValueError(rule)
        return value

    return check


def _container_kind(value: Any) -> str:
    if not isinstance(value, str) or not _CONTAINER.fullmatch(value):
        raise ValueError("a container name: letters, digits, _ . - (not first), at most 128 characters")
    return value


def _grep_kind(value: Any) -> str:
    if not isinstance(value, str) or not value or len(value) > _GREP_MAX or not value.isprintable():
        raise ValueError(f"printable text on one line, 1 to {_GREP_MAX} characters")
    return value


def _duration_kind(value: Any) -> str:
    if not isinstance(value, str) or not value or not _DURATION.fullmatch(value):
        raise ValueError('a duration such as "30s", "10m", "2h" or "1h30m"')
    return value


KINDS: dict[str, Callable[[Any], str]] = {
    "container": _container_kind,
    "unit": _regex_kind(_UNIT, "a systemd unit name such as docker.service"),
    "tail": _int_kind(1, 10_000),
    "since": _duration_kind,
    "text": _grep_kind,
    "image": _regex_kind(_IMAGE, "a docker image reference such as vllm/vllm-tpu:gemma4"),
    "model": _regex_kind(_MODEL, "a Hugging Face model id such as google/gemma-4-31B-it"),
    "secret": _regex_kind(_SECRET, "a Secret Manager secret id: letters, digits, _ and -"),
    "tensor_parallel_size": _int_kind(1, 64),
    "max_model_len": _int_kind(1, 1_048_576),
    "port": _int_kind(1, 65_535),
    "stop_timeout_s": _int_kind(0, 600),
    "num_prompts": _int_kind(1, 100_000),
    "token_len": _int_kind(1, 262_144),
    "concurrency": _int_kind(1, 4_096),
}
"""Argument kinds: name -> validator returning the canonical string, or raising ValueError(rule)."""


def validate(kind: str, value: Any) -> str:
    """Validate one template argument by its kind.

    Args:
        kind: a key of `KINDS` ("container", "unit", "tail", "since", "text", "image", "model", "secret",
            "tensor_parallel_size", "max_model_len", "port", "stop_timeout_s", "num_prompts", "token_len",
            "concurrency").
        value: the raw value (ints may be given as digit strings).

    Returns:
        The canonical string form, not yet shell-quoted.

    Raises:
        BadInput: the value does not match the kind's rule (the message says the rule).
    """
    try:
        return KINDS[kind](value)
    except ValueError as exc:
        shown = repr(value)
        shown = shown if len(shown) <= 80 else shown[:77] + "..."
        raise BadInput(
            f"invalid {kind} {shown}: expected {exc}", "fix the value and retry", backend="ssh"
        ) from None


@dataclass(frozen=True)
class CommandTemplate:
    """One allowed remote command.

    Attributes:
        text: the command with `{arg}` placeholders (filled with quoted values) and `{SUDO}` (filled with
            "sudo -n " when the host is configured with `sudo=True`, else ""); `{SUDO_ENV}` is the same but
            keeps HF_TOKEN in the environment (`sudo -n --preserve-env=HF_TOKEN `), `{SUDO_ENV_KEY}` keeps
            HF_TOKEN and VLLM_API_KEY.
        args: placeholder name -> kind (a key of `KINDS`).
    """

    text: str
    args: Mapping[str, str]


_LOGS = "{SUDO}docker logs --tail {tail}"
TEMPLATES: dict[str, CommandTemplate] = {
    "docker_inspect": CommandTemplate(
        "{SUDO}docker inspect --type container -- {container}", {"container": "container"}
    ),
    "docker_logs": CommandTemplate(
        _LOGS + " -- {container} 2>&1", {"tail": "tail", "container": "container"}
    ),
    "docker_logs_since": CommandTemplate(
        _LOGS + " --since {since} -- {container} 2>&1",
        {"tail": "tail", "since": "since", "container": "container"},
    ),
    "docker_logs_grep": CommandTemplate(
        _LOGS + " -- {container} 2>&1 | grep -F -e {text}",
        {"tail": "tail", "container": "container", "text": "text"},
    ),
    "docker_logs_since_grep": CommandTemplate(
        _LOGS + " --since {since} -- {container} 2>&1 | grep -F -e {text}",
        {"tail": "tail", "since": "since", "container": "container", "text": "text"},
    ),
    "docker_start": CommandTemplate("{SUDO}docker start -- {container}", {"container": "container"}),
    "docker_stop": CommandTemplate(
        "{SUDO}docker stop --time {stop_timeout_s} -- {container}",
        {"stop_timeout_s": "stop_timeout_s", "container": "container"},
    ),
    "docker_restart": CommandTemplate(
        "{SUDO}docker restart --time {stop_timeout_s} -- {container}",
        {"stop_timeout_s": "stop_timeout_s", "container": "container"},
    ),
    "docker_rm_force": CommandTemplate("{SUDO}docker rm -f -- {container}", {"container": "container"}),
    # Flags: docs/vllm.md §4.1 (recipe docker run) and §4.2 (explicit `vllm serve` command, safe with or
    # without the image's entrypoint.sh); tool/reasoning parsers: docs/vllm.md §1.6. Exit 3 = the secret
    # could not be read.
    "docker_run_vllm": CommandTemplate(
        'HF_TOKEN="$(gcloud secrets versions access latest --secret={secret})" || exit 3; export HF_TOKEN; '
        "{SUDO_ENV}docker run -d --name {container} --privileged --net=host --shm-size 16G "
        "-v /dev/shm:/dev/shm -e HF_TOKEN -- {image} "
        "vllm serve {model} --tensor-parallel-size {tensor_parallel_size} --max-model-len {max_model_len} "
        "--host 0.0.0.0 --port {port} --enable-auto-tool-choice --tool-call-parser gemma4 "
        "--reasoning-parser gemma4 --disable_chunked_mm_input",
        {
            "secret": "secret",
            "container": "container",
            "image": "image",
            "model": "model",
            "tensor_parallel_size": "tensor_parallel_size",
            "max_model_len": "max_model_len",
            "port": "port",
        },
    ),
    # The same, also reading the vLLM API key on the VM (exit 4: that secret could not be read); vLLM takes
    # it from VLLM_API_KEY (vllm/envs.py), so it is in no argv.
    "docker_run_vllm_api_key": CommandTemplate(
        'HF_TOKEN="$(gcloud secrets versions access latest --secret={secret})" || exit 3; export HF_TOKEN; '
        'VLLM_API_KEY="$(gcloud secrets versions access latest --secret={api_key_secret})" || exit 4; '
        "export VLLM_API_KEY; "
        "{SUDO_ENV_KEY}docker run -d --name {container} --privileged --net=host --shm-size 16G "
        "-v /dev/shm:/dev/shm -e HF_TOKEN -e VLLM_API_KEY -- {image} "
        "vllm serve {model} --tensor-parallel-size {tensor_parallel_size} --max-model-len {max_model_len} "
        "--host 0.0.0.0 --port {port} --enable-auto-tool-choice --tool-call-parser gemma4 "
        "--reasoning-parser gemma4 --disable_chunked_mm_input",
        {
            "secret": "secret",
            "api_key_secret": "secret",
            "container": "container",
            "image": "image",
            "model": "model",
            "tensor_parallel_size": "tensor_parallel_size",
            "max_model_len": "max_model_len",
            "port": "port",
        },
    ),
    "journalctl": CommandTemplate(
        "{SUDO}journalctl -u {unit} -n {tail} --no-pager", {"unit": "unit", "tail": "tail"}
    ),
    # docs/vllm.md §3.1 (the tpu-recipes Trillium README runs this inside the container).
    "vllm_bench_serve": CommandTemplate(
        "{SUDO}docker exec -- {container} vllm bench serve --backend vllm --model {model} "
        "--dataset-name random --num-prompts {num_prompts} --random-input-len {input_len} "
        "--random-output-len {output_len} --max-concurrency {max_concurrency} --port {port}",
        {
            "container": "container",
            "model": "model",
            "num_prompts": "num_prompts",
            "input_len": "token_len",
            "output_len": "token_len",
            "max_concurrency": "concurrency",
            "port": "port",
        },
    ),
}
"""The only commands `RemoteHost.run` will send."""


@dataclass(frozen=True)
class CommandResult:
    """What one remote command returned.

    Attributes:
        exit_status: the remote exit status (127: command not found; -1 if the server sent none).
        stdout, stderr: decoded as UTF-8 (invalid bytes replaced).
        duration_s: wall time in seconds, from sending the command to its exit.
        truncated: True if a stream exceeded MAX_OUTPUT_BYTES and was cut.
    """

    exit_status: int
    stdout: str
    stderr: str
    duration_s: float
    truncated: bool = False


# -- host keys ----------------------------------------------------------------------------------------------


def _describe(key: paramiko.PKey) -> str:
    return f"{key.get_name()} {key.fingerprint}"


class _RejectUnknownHostKey(paramiko.RejectPolicy):
    """RejectPolicy that raises PermissionDenied with the offered fingerprint (never adds the key)."""

    def __init__(self, display: str, sources: str) -> None:
        self.display = display
        self.sources = sources

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> NoReturn:
        raise PermissionDenied(
            f"SSH host key of {self.display} is not known ({self.sources}); the server offered "
            f"{_describe(key)}. Refusing to connect.",
            "verify that fingerprint on the VM (e.g. `ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub` "
            "from the serial console), then add the key to known_hosts or pin it in settings",
            backend="ssh",
        )


# -- the SSH host -------------------------------------------------------------------------------------------


class RemoteHost:
    """An SSH connection to one host that can run only the commands in `TEMPLATES`.

    The connection is opened lazily on the first `run`, reused, and reopened if it dropped. Thread-safe.

    Args:
        host: hostname or IP of the VM.
        port: SSH port.
        user: login user.
        key_path: path of the private key file (OpenSSH or PEM format), or None when `pkey` is given.
        pkey: an already loaded private key. No agent and no ~/.ssh key discovery are used.
        known_hosts_path: an OpenSSH known_hosts file to check the host key against (entries for a port other
            than 22 are written `[host]:port`).
        pinned_host_keys: key type -> base64 public key, e.g. {"ssh-ed25519": "AAAAC3..."}, trusted for this
            host in addition to known_hosts.
        connect_timeout_s: seconds for TCP connect, SSH banner, authentication and channel open.
        command_timeout_s: default seconds a command may run (`run(timeout_s=...)` overrides).
        sudo: prefix docker/journalctl commands with `sudo -n` (TPU VM users are often not in the docker
            group). Extension beyond the original signature; default False.

    Raises:
        BadInput: neither key_path nor pkey, no host-key source at all, or a malformed pinned key.
    """

    def __init__(
        self,
        host: str,
        port: int = 22,
        *,
        user: str,
        key_path: str | None = None,
        pkey: paramiko.PKey | None = None,
        known_hosts_path: str | None = None,
        pinned_host_keys: Mapping[str, str] | None = None,
        connect_timeout_s: float = 10,
        command_timeout_s: float = 60,
        sudo: bool = False,
    ) -> None:
        if key_path is None and pkey is None:
            raise BadInput("SSH needs a private key: set key_path or pkey", "configure the bot's SSH key")
        if known_hosts_path is None and not pinned_host_keys:
            raise BadInput(
                f"no trusted host key for {host}: set known_hosts_path or pinned_host_keys",
                "host-key checking cannot be turned off; pin the VM's key after verifying its fingerprint",
            )
        self.host = host
        self.port = int(port)
        self.user = user
        self.connect_timeout_s = float(connect_timeout_s)
        self.command_timeout_s = float(command_timeout_s)
        self.sudo = sudo
        self._key_path = key_path
        self._pkey = pkey
        self._known_hosts_path = known_hosts_path
        self._pinned: list[paramiko.PKey] = []
        for key_type, b64 in (pinned_host_keys or {}).items():
            try:
                self._pinned.append(
                    paramiko.PKey.from_type_string(key_type, base64.b64decode(b64, validate=True))
                )
            except (binascii.Error, ValueError, paramiko.SSHException, UnknownKeyType) as exc:
                raise BadInput(
                    f"pinned host key {key_type} for {host} is not a valid public key",
                    'give the base64 part of the key line, e.g. {"ssh-ed25519": "AAAAC3..."}',
                ) from exc
        self._lock = threading.Lock()
        self._client: paramiko.SSHClient | None = None

    @property
    def display(self) -> str:
        """`user@host:port`, for messages."""
        return f"{self.user}@{self.host}:{self.port}"

    def __repr__(self) -> str:
        return f"RemoteHost({self.display!r})"

    def close(self) -> None:
        """Close the SSH connection (a later `run` reconnects)."""
        with self._lock:
            client, self._client = self._client, None
        if client is not None:
            client.close()

    def __enter__(self) -> RemoteHost:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- commands --------------------------------------------------------------------------------------------

    def render(self, template_name: str, **args: Any) -> str:
        """The exact command string `run` would send (for audit logs and tests).

        Args:
            template_name: a key of `TEMPLATES`.
            **args: exactly the template's arguments.

        Returns:
            The command, every argument validated and `shlex.quote`d.

        Raises:
            BadInput: unknown template, missing or extra arguments, or an invalid argument.
        """
        template = TEMPLATES.get(template_name)
        if template is None:
            raise BadInput(f"unknown remote command {template_name!r}", "use one of: " + ", ".join(TEMPLATES))
        missing = sorted(set(template.args) - set(args))
        extra = sorted(set(args) - set(template.args))
        if missing or extra:
            raise BadInput(
                f"remote command {template_name}: missing {missing or 'none'}, unexpected {extra or 'none'}",
                "this is a bug in the caller",
            )
        values = {name: shlex.quote(validate(kind, args[name])) for name, kind in template.args.items()}
        values["SUDO"] = "sudo -n " if self.sudo else ""
        values["SUDO_ENV"] = "sudo -n --preserve-env=HF_TOKEN " if self.sudo else ""
        values["SUDO_ENV_KEY"] = "sudo -n --preserve-env=HF_TOKEN,VLLM_API_KEY " if self.sudo else ""
        return template.text.format(**values)

    def run(self, template_name: str, /, *, timeout_s: float | None = None, **args: Any) -> CommandResult:
        """Run one allowed command on the host.

        Args:
            template_name: a key of `TEMPLATES`.
            timeout_s: seconds the command may take; None uses `command_timeout_s`.
            **args: the template's arguments (see `TEMPLATES` and `KINDS`).

        Returns:
            CommandResult. A non-zero exit status is returned, not raised.

        Raises:
            BadInput: invalid arguments (nothing is sent).
            PermissionDenied: unknown or changed host key, or authentication refused.
            BackendUnavailable: connection refused, host unreachable, or the connection dropped.
            BackendTimeout: connect or command timeout (the remote command's channel is closed).
        """
        command = self.render(template_name, **args)
        limit = self.command_timeout_s if timeout_s is None else float(timeout_s)
        log.info("ssh %s: run %s", self.display, template_name)
        log.debug("ssh %s: %s", self.display, command)
        client = self._connected()
        try:
            return self._exec(client, command, template_name, limit)
        except (paramiko.SSHException, OSError, EOFError) as exc:
            self.close()
            raise BackendUnavailable(
                f"SSH to {self.display}: connection lost while running {template_name}: {type(exc).__name__}",
                "check the VM is up (/tpu status) and retry",
                backend="ssh",
            ) from exc

    def _exec(self, client: paramiko.SSHClient, command: str, name: str, limit: float) -> CommandResult:
        transport = client.get_transport()
        if transport is None:
            raise paramiko.SSHException("no transport")
        start = time.monotonic()
        deadline = start + limit
        channel = transport.open_session(timeout=self.connect_timeout_s)
        try:
            channel.exec_command(command)
            out, err = bytearray(), bytearray()
            truncated = False
            while True:
                busy = False
                if channel.recv_ready():
                    data = channel.recv(65536)
                    busy = True
                    if len(out) < MAX_OUTPUT_BYTES:
                        out += data
                    else:
                        truncated = True
                if channel.recv_stderr_ready():
                    data = channel.recv_stderr(65536)
                    busy = True
                    if len(err) < MAX_OUTPUT_BYTES:
                        err += data
                    else:
                        truncated = True
                if busy:
                    continue
                # sshd may send the exit status before the last output: finish at EOF (or close) too
                if channel.exit_status_ready() and (channel.eof_received or channel.closed):
                    while channel.recv_ready():
                        out += channel.recv(65536)
                    while channel.recv_stderr_ready():
                        err += channel.recv_stderr(65536)
                    break
                if channel.closed or not transport.is_active():
                    raise EOFError("channel closed without an exit status")
                if time.monotonic() > deadline:
                    raise BackendTimeout(
                        f"SSH to {self.display}: {name} did not finish within {limit:g} s",
                        "the VM may be overloaded; the command was abandoned (its channel closed)",
                        backend="ssh",
                    )
                channel.status_event.wait(0.01)
            status = channel.recv_exit_status()
        finally:
            channel.close()
        if len(out) > MAX_OUTPUT_BYTES or len(err) > MAX_OUTPUT_BYTES:
            truncated = True
            out, err = out[:MAX_OUTPUT_BYTES], err[:MAX_OUTPUT_BYTES]
        duration = time.monotonic() - start
        log.info("ssh %s: %s exited %d in %.2f s", self.display, name, status, duration)
        return CommandResult(
            status, out.decode("utf-8", "replace"), err.decode("utf-8", "replace"), duration, truncated
        )

    # -- connection ------------------------------------------------------------------------------------------

    def _connected(self) -> paramiko.SSHClient:
        with self._lock:
            client = self._client
            transport = client.get_transport() if client is not None else None
            if client is not None and transport is not None and transport.is_active():
                return client
            if client is not None:
                client.close()
            self._client = None
            client = self._connect()
            self._client = client
            return client

    def _host_key_name(self) -> str:
        return self.host if self.port == 22 else f"[{self.host}]:{self.port}"

    def _connect(self) -> paramiko.SSHClient:
        client = paramiko.SSHClient()
        sources = []
        if self._known_hosts_path is not None:
            try:
                client.load_host_keys(self._known_hosts_path)
            except OSError as exc:
                raise BadInput(
                    f"cannot read known_hosts file {self._known_hosts_path}: {exc.strerror}",
                    "fix SSH_KNOWN_HOSTS_PATH",
                    backend="ssh",
                ) from exc
            sources.append(f"known_hosts {self._known_hosts_path}")
        for key in self._pinned:
            client.get_host_keys().add(self._host_key_name(), key.get_name(), key)
        if self._pinned:
            sources.append("pinned keys")
        where = f"{self.host}:{self.port}"
        client.set_missing_host_key_policy(_RejectUnknownHostKey(where, ", ".join(sources)))
        timeout = self.connect_timeout_s
        started = time.monotonic()
        try:
            client.connect(
                self.host,
                self.port,
                username=self.user,
                pkey=self._pkey,
                key_filename=self._key_path if self._pkey is None else None,
                timeout=timeout,
                banner_timeout=timeout,
                auth_timeout=timeout,
                channel_timeout=timeout,
                allow_agent=False,
                look_for_keys=False,
            )
        except OpsError:
            client.close()
            raise
        except paramiko.BadHostKeyException as exc:
            client.close()
            raise PermissionDenied(
                f"SSH host key of {where} CHANGED: the server offered {_describe(exc.key)} but the trusted "
                f"key is {_describe(exc.expected_key)}. Refusing to connect: either the VM was recreated or "
                "someone is intercepting the connection.",
                "verify the new fingerprint on the VM (serial console: "
                "`ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub`), then update known_hosts or the pinned "
                "key",
                backend="ssh",
            ) from None
        except paramiko.AuthenticationException as exc:
            client.close()
            raise PermissionDenied(
                f"SSH to {self.display}: public-key authentication refused",
                f"add the bot's public key to ~{self.user}/.ssh/authorized_keys on the VM "
                "(or the instance's ssh-keys metadata / OS Login)",
                backend="ssh",
            ) from exc
        except paramiko.ssh_exception.NoValidConnectionsError as exc:
            client.close()
            reasons = "; ".join(sorted({getattr(e, "strerror", None) or str(e) for e in exc.errors.values()}))
            refused = all(isinstance(e, ConnectionRefusedError) for e in exc.errors.values())
            message = f"SSH to {where} refused: {reasons}" if refused else f"SSH to {where} failed: {reasons}"
            raise BackendUnavailable(
                message, "is the VM up and sshd running? check /tpu status and the firewall", backend="ssh"
            ) from exc
        except TimeoutError as exc:
            client.close()
            raise BackendTimeout(
                f"SSH to {where}: no answer within {timeout:g} s",
                "check the VM is up and the firewall allows port 22 from the bot",
                backend="ssh",
            ) from exc
        except paramiko.SSHException as exc:
            client.close()
            text = str(exc)
            slow = time.monotonic() - started >= timeout * 0.9  # paramiko may report a later symptom
            known = None if slow else faults.explain(text)
            if known is not None:  # e.g. the port answers with something that is not SSH
                raise BackendUnavailable(f"SSH to {where}: {known[1]}", known[2], backend="ssh") from exc
            if slow or any(word in text.lower() for word in ("banner", "timeout", "timed out")):
                raise BackendTimeout(
                    f"SSH to {where}: no SSH greeting within {timeout:g} s",
                    "sshd on the VM may be overloaded or not an SSH server on that port",
                    backend="ssh",
                ) from exc
            raise BackendUnavailable(
                f"SSH to {where} failed: {text[:200]}",
                "retry; if it persists check sshd on the VM",
                backend="ssh",
            ) from exc
        except OSError as exc:
            client.close()
            raise BackendUnavailable(
                f"SSH to {where} failed: {exc.strerror or exc}",
                "check the VM address (/tpu status) and DNS",
                backend="ssh",
            ) from exc
        return client


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


_ABSENT = ContainerStatus(False, "absent", None, None, 0, False)


def _docker_time(value: Any) -> datetime | None:
    """Docker's RFC 3339 timestamps (nanoseconds); "0001-01-01T00:00:00Z" means never."""
    if not isinstance(value, str) or not value or value.startswith("0001-"):
        return None
    match = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$", value)
    if not match:
        return None
    fraction = (match.group(2) or "0")[:6].ljust(6, "0")
    zone = "+00:00" if match.group(3) == "Z" else match.group(3)
    return datetime.fromisoformat(f"{match.group(1)}.{fraction}{zone}").astimezone(UTC)


class VllmContainer:
    """The vLLM container on the TPU VM, driven over `RemoteHost` with the allowed templates only.

    Args:
        remote: the SSH host.
        name: the container name (validated like every argument).
        stop_timeout_s: seconds docker waits for vLLM to exit before SIGKILL on stop.
        bench_timeout_s: seconds a `vllm bench serve` may run.
    """

    def __init__(
        self,
        remote: RemoteHost,
        name: str = "vllm",
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
