"""SSH to the TPU VM (paramiko) with host-key checking, and the only commands the bot runs there.

Security model:
- Host keys are checked against a known_hosts file, keys pinned in settings, and, for a VM the bot may trust
  (`PublishedHostKeys`: a node it made, or the configured primary), the keys the VM's Google guest agent
  published in the TPU API's guest attributes (`hostkeys/` namespace; see docs/ssh.md). Keys are never
  trusted on first use: unknown or changed keys are refused (`paramiko.RejectPolicy`, never
  `AutoAddPolicy`) with `PermissionDenied` naming the host, the node and the SHA256 fingerprint the server
  offered. For one key type, guest attributes win over a pinned key, and a pinned key over known_hosts: a
  VM the bot recreated is re-learned from its new guest attributes.
- Only the command templates of `TEMPLATES` can run (`RemoteHost.run` renders through `RemoteHost.render`):
  every argument is validated by its kind (`KINDS`), then `shlex.quote`d, so shell metacharacters from Slack
  reach the remote program as one literal argument. The Hugging Face token never passes through the bot:
  `docker_run_vllm` reads it ON THE VM from Secret Manager (`gcloud secrets versions access latest
  --secret=NAME`) and hands it to docker through the environment (`-e HF_TOKEN` without a value), so it is
  not in any argv either. Docker run flags, command and log options: `ops.vllm.dockerrun` (docs/vllm.md §4).
- No private key material appears in messages or logs (only public fingerprints).
"""

from __future__ import annotations

import base64
import binascii
import logging
import shlex
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, NoReturn

import paramiko
from paramiko.pkey import UnknownKeyType

from ops.diagnosis.engine import RemoteError, diagnose
from ops.errors import BackendTimeout, BackendUnavailable, BadInput, OpsError, PermissionDenied
from ops.linear import LinearPattern, linear
from ops.tpu.model import RESOURCE_ID
from ops.vllm.dockerrun import (
    GCPLOGS_ARGS,
    GCPLOGS_OPTIONS,
    RUN_FLAGS,
    TPU_ENV_READ,
    VLLM_SERVE,
    VLLM_SERVE_ARGS,
)

__all__ = [
    "KINDS",
    "TEMPLATES",
    "CommandResult",
    "CommandTemplate",
    "PublishedHostKeys",
    "RemoteHost",
    "unit_name",
    "validate",
]

log = logging.getLogger(__name__)

# Cap on what one command may return per stream (stdout, stderr); the rest is dropped (`truncated`).
MAX_OUTPUT_BYTES = 8 * 1024 * 1024


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


@dataclass(frozen=True)
class PublishedHostKeys:
    """Host keys of one TPU VM from a source that proves them: the TPU API's guest attributes, where the
    VM's Google guest agent publishes its sshd keys (`ops.tpu.api.TpuOps.host_keys`).

    Only give this for a VM the bot may trust (a node it made, or the configured primary): the caller
    decides (`bot.services.Services.remote`).

    Attributes:
        node: the node, as messages name it, e.g. "gemma4-qr-node (us-east5-a)".
        fetch: returns key type -> base64 public key, e.g. {"ssh-ed25519": "AAAAC3..."} ({} while the
            guest agent published none); raises OpsError when the TPU API cannot be read. Called on every
            connect, so a recreated VM's new keys are read again.
    """

    node: str
    fetch: Callable[[], Mapping[str, str]]


def _public_key(key_type: str, b64: str) -> paramiko.PKey:
    """A public key from its type and base64 blob.

    Raises:
        ValueError: not valid base64, or not a key of a type paramiko knows.
    """
    try:
        return paramiko.PKey.from_type_string(key_type, base64.b64decode(b64, validate=True))
    except (binascii.Error, ValueError, paramiko.SSHException, UnknownKeyType) as exc:
        raise ValueError(f"{key_type} is not a valid public key") from exc


class _RejectUnknownHostKey(paramiko.RejectPolicy):
    """RejectPolicy that raises PermissionDenied with the offered fingerprint (never adds the key)."""

    def __init__(self, display: str, sources: str, note: Callable[[paramiko.PKey], str]) -> None:
        self.display = display
        self.sources = sources
        self.note = note

    def missing_host_key(self, client: paramiko.SSHClient, hostname: str, key: paramiko.PKey) -> NoReturn:
        raise PermissionDenied(
            f"SSH host key of {self.display} is not known ({self.sources}); the server offered "
            f"{_describe(key)}. {self.note(key)}Refusing to connect.",
            "a VM the bot made publishes its host keys in guest attributes on first boot: retry in a "
            "minute; otherwise verify that fingerprint on the VM (e.g. `ssh-keygen -lf "
            "/etc/ssh/ssh_host_ed25519_key.pub` from the serial console), then add the key to known_hosts "
            "or pin it in settings (docs/ssh.md)",
            backend="ssh",
        )


# -- argument kinds ------------------------------------------------------------------------------------------

_CONTAINER = linear(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$")  # docker's own container-name rule
_UNIT = linear(r"^[a-zA-Z0-9][a-zA-Z0-9:_.@-]{0,254}$")  # systemd unit names (no "\" escapes)
# Go durations, as docker --since takes them: hours, minutes, seconds in that order, at least one.
_DURATION = linear(r"^(?:\d{1,4}h(?:\d{1,5}m)?(?:\d{1,6}s)?|\d{1,5}m(?:\d{1,6}s)?|\d{1,6}s)$")
# Docker image reference: [registry[:port]/]path[:tag][@sha256:digest] (distribution/reference grammar,
# simplified; registry host may have upper case, the path may not).
_IMAGE = linear(
    r"^(?:[a-zA-Z0-9](?:[a-zA-Z0-9.-]*[a-zA-Z0-9])?(?::[0-9]{1,5})?/)?"
    r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*(?:/[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*)*"
    r"(?::[A-Za-z0-9_][A-Za-z0-9_.-]{0,127})?(?:@sha256:[a-f0-9]{64})?$"
)
# Hugging Face model id: "org/name" or "name" (huggingface_hub's repo-id rule, without "--" and "..").
_MODEL = linear(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}(?:/[A-Za-z0-9][A-Za-z0-9_.-]{0,95})?$")
_SECRET = linear(r"^[A-Za-z0-9_-]{1,255}$")  # Secret Manager secret id
_PROJECT = linear(r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")  # GCP project id (the rule of bot.config)
_LABEL = linear(r"^[a-z][a-z0-9_.-]{0,127}$")  # a docker label key of the bot's own, e.g. tpu_node
_GREP_MAX = 200
_DIGITS = linear(r"\d{1,9}")


def _int_kind(low: int, high: int) -> Callable[[Any], str]:
    def check(value: Any) -> str:
        if isinstance(value, str) and _DIGITS.fullmatch(value):
            value = int(value)
        if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
            raise ValueError(f"an integer from {low} to {high}")
        return str(value)

    return check


def _regex_kind(pattern: LinearPattern, rule: str, *, runs: bool = False) -> Callable[[Any], str]:
    """Strings matching `pattern`, without "--" and ".." unless `runs` allows them."""

    def check(value: Any) -> str:
        if not isinstance(value, str) or not pattern.fullmatch(value):
            raise ValueError(rule)
        if not runs and ("--" in value or ".." in value):
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
    "project": _regex_kind(_PROJECT, "a GCP project id such as my-project", runs=True),
    "node": _regex_kind(RESOURCE_ID, "a TPU node id such as gemma4-qr-node", runs=True),
    "worker": _int_kind(0, 9_999),
    "label": _regex_kind(_LABEL, "a docker label key such as tpu_node"),
}
"""Argument kinds: name -> validator returning the canonical string, or raising ValueError(rule)."""


def validate(kind: str, value: Any) -> str:
    """Validate one template argument by its kind.

    Args:
        kind: a key of `KINDS`, e.g. "container", "tail", "image", "model", "project", "node".
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


# systemd's unit types (systemd.unit(5)); a name without one of them is a service.
_UNIT_TYPES = (
    ".service", ".socket", ".target", ".timer", ".mount", ".automount", ".path", ".slice", ".scope", ".swap",
    ".device",
)  # fmt: skip


def unit_name(text: str) -> str:
    """The systemd unit `journalctl -u` reads for `text`: validated (kind "unit"), with ".service" added
    when it names no unit type, as systemd does for a bare name ("docker" is docker.service; journalctl(1),
    `--unit`).

    Raises:
        BadInput: not a unit name.
    """
    name = validate("unit", text)
    return name if name.endswith(_UNIT_TYPES) else name + ".service"


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
# Starting vLLM: the flags, command and log options of `ops.vllm.dockerrun` (the startup script's too). The
# Hugging Face token is read on the VM (exit 3: the secret could not be read), the vLLM API key too (exit 4);
# vLLM takes the key from VLLM_API_KEY (vllm/envs.py), so neither is in any argv.
_READ_HF_TOKEN = 'HF_TOKEN="$(gcloud secrets versions access latest --secret={secret})" || exit 3; '  # noqa: S105
_READ_API_KEY = (
    'VLLM_API_KEY="$(gcloud secrets versions access latest --secret={api_key_secret})" || exit 4; '
)
_DOCKER_RUN = "docker run -d --name {container} " + " ".join(RUN_FLAGS) + " "


def _vllm_run(*, api_key: bool, gcplogs: bool) -> CommandTemplate:
    """The `docker run` of the vLLM container: with the vLLM API key or not, with the gcplogs driver's
    options (`ops.vllm.dockerrun.GCPLOGS_OPTIONS`) or Docker's default log driver."""
    text = _READ_HF_TOKEN + "export HF_TOKEN; "
    text += _READ_API_KEY + "export VLLM_API_KEY; {SUDO_ENV_KEY}" if api_key else "{SUDO_ENV}"
    text += _DOCKER_RUN + (GCPLOGS_OPTIONS + " " if gcplogs else "")
    text += "-e HF_TOKEN " + ("-e VLLM_API_KEY " if api_key else "") + "-- {image} " + VLLM_SERVE
    args = {"secret": "secret", "container": "container", "image": "image", **VLLM_SERVE_ARGS}
    args |= ({"api_key_secret": "secret"} if api_key else {}) | (GCPLOGS_ARGS if gcplogs else {})
    return CommandTemplate(text, args)


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
    # --timestamps: each line starts with its RFC 3339 time (nanoseconds), which the diagnosis reads
    # (https://docs.docker.com/reference/cli/docker/container/logs/)
    "docker_logs_timed": CommandTemplate(
        _LOGS + " --timestamps -- {container} 2>&1", {"tail": "tail", "container": "container"}
    ),
    "docker_logs_since_timed": CommandTemplate(
        _LOGS + " --since {since} --timestamps -- {container} 2>&1",
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
    "docker_rm_force": CommandTemplate("{SUDO}docker rm -f -- {container}", {"container": "container"}),
    # Replacing the container keeps the old one until the new one runs
    # (ops.vllm.container.VllmContainer.replace):
    # the image is looked up (`docker image inspect`, exit 1 "No such image") and pulled first, the old
    # container renamed aside and renamed back if the new one fails.
    "docker_image_inspect": CommandTemplate("{SUDO}docker image inspect -- {image}", {"image": "image"}),
    "docker_pull": CommandTemplate("{SUDO}docker pull -- {image}", {"image": "image"}),
    "docker_rename": CommandTemplate(
        "{SUDO}docker rename -- {container} {new_name}", {"container": "container", "new_name": "container"}
    ),
    "docker_run_vllm": _vllm_run(api_key=False, gcplogs=False),
    "docker_run_vllm_api_key": _vllm_run(api_key=True, gcplogs=False),
    "docker_run_vllm_gcplogs": _vllm_run(api_key=False, gcplogs=True),
    "docker_run_vllm_api_key_gcplogs": _vllm_run(api_key=True, gcplogs=True),
    # The TPU node and worker this VM is, as its tpu-env metadata attribute says (the gcplogs labels).
    "tpu_env": CommandTemplate(TPU_ENV_READ, {}),
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
            host in addition to known_hosts (a pinned key replaces known_hosts' key of the same type).
        published_host_keys: the VM's keys from its guest attributes, read on each connect; they replace the
            other sources' keys of the same type (see `PublishedHostKeys`).
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
        published_host_keys: PublishedHostKeys | None = None,
        connect_timeout_s: float = 10,
        command_timeout_s: float = 60,
        sudo: bool = False,
    ) -> None:
        if key_path is None and pkey is None:
            raise BadInput("SSH needs a private key: set key_path or pkey", "configure the bot's SSH key")
        if known_hosts_path is None and not pinned_host_keys and published_host_keys is None:
            raise BadInput(
                f"no trusted host key for {host}: it is not a node the bot made (whose key its guest "
                "attributes publish), and neither SSH_KNOWN_HOSTS_PATH nor SSH_HOST_KEYS is set",
                "host-key checking cannot be turned off; pin the VM's key after verifying its fingerprint "
                "(docs/ssh.md)",
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
        self._published = published_host_keys
        self._pinned: list[paramiko.PKey] = []
        for key_type, b64 in (pinned_host_keys or {}).items():
            try:
                self._pinned.append(_public_key(key_type, b64))
            except ValueError as exc:
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

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -- commands --------------------------------------------------------------------------------------------

    def render(self, template_name: str, **args: Any) -> str:
        """The exact command string `run` sends (also for checking arguments before anything is sent).

        Args:
            template_name: a key of `TEMPLATES`.
            **args: exactly the template's arguments (see `KINDS`).

        Returns:
            The command, every argument validated and `shlex.quote`d; `{SUDO}`, `{SUDO_ENV}` and
            `{SUDO_ENV_KEY}` filled with a `sudo -n` prefix when the host is configured with `sudo`, else "".

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
            **args: the template's arguments (see `KINDS`).

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
            streams = (
                (channel.recv_ready, channel.recv, out),
                (channel.recv_stderr_ready, channel.recv_stderr, err),
            )
            while True:
                busy = False
                for ready, receive, buffer in streams:
                    if ready():
                        data = receive(65536)
                        busy = True
                        if len(buffer) < MAX_OUTPUT_BYTES:
                            buffer += data
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

    def _trusted_keys(
        self,
    ) -> tuple[dict[str, tuple[paramiko.PKey, str]], list[str], dict[str, paramiko.PKey]]:
        """The host keys trusted for this host now: key type -> (key, where it came from); the sources read
        (for messages); and the keys the guest attributes publish (empty without `published_host_keys`).

        Raises:
            BadInput: the known_hosts file cannot be read.
            BackendUnavailable: the guest attributes cannot be read and no other source is configured.
        """
        name = self._host_key_name()
        trusted: dict[str, tuple[paramiko.PKey, str]] = {}
        sources: list[str] = []
        if self._known_hosts_path is not None:
            try:
                table = paramiko.HostKeys(self._known_hosts_path)
            except OSError as exc:
                raise BadInput(
                    f"cannot read known_hosts file {self._known_hosts_path}: {exc.strerror}",
                    "fix SSH_KNOWN_HOSTS_PATH",
                    backend="ssh",
                ) from exc
            for key_type, key in (table.lookup(name) or {}).items():
                trusted[key_type] = (key, f"known_hosts {self._known_hosts_path}")
            sources.append(f"known_hosts {self._known_hosts_path}")
        for key in self._pinned:
            trusted[key.get_name()] = (key, "pinned keys (SSH_HOST_KEYS)")
        if self._pinned:
            sources.append("pinned keys")
        published: dict[str, paramiko.PKey] = {}
        if self._published is not None:
            where = f"the guest attributes of node {self._published.node}"
            try:
                raw = self._published.fetch()
            except OpsError as exc:
                if not sources:
                    raise BackendUnavailable(
                        f"SSH to {self.host}:{self.port}: its host key cannot be learned from {where}: "
                        f"{exc.message}",
                        exc.hint or "retry; the bot needs the TPU API to check a VM's host key",
                        backend="ssh",
                    ) from exc
                log.warning("ssh %s: %s unreadable: %s", self.display, where, exc.message)
                raw = {}
            for key_type, b64 in raw.items():
                try:
                    published[key_type] = _public_key(key_type, b64)
                except ValueError:
                    log.warning("ssh %s: %s hold a malformed %s key: ignored", self.display, where, key_type)
            for key_type, key in published.items():
                trusted[key_type] = (key, where)
            sources.append(where + ("" if published else ", which publish no host key yet"))
        return trusted, sources, published

    def _published_note(self, offered: paramiko.PKey, published: Mapping[str, paramiko.PKey]) -> str:
        """What the guest attributes say about the offered key, as a sentence for a refusal ("" if none)."""
        if self._published is None:
            return (
                "No node is known for this address (SSH_HOST is set, or the endpoint is VLLM_BASE_URL), so "
                "no guest attributes were checked. "
            )
        node = self._published.node
        same = published.get(offered.get_name())
        if same is None:
            return f"The guest attributes of node {node} publish no {offered.get_name()} key (yet). "
        if same == offered:
            return f"The guest attributes of node {node} publish this same key. "
        return (
            f"The guest attributes of node {node} publish {_describe(same)}, a different key: the server "
            "at this address is not that node, or the connection is intercepted. "
        )

    def _connect(self) -> paramiko.SSHClient:
        client = paramiko.SSHClient()
        name = self._host_key_name()
        try:
            trusted, sources, published = self._trusted_keys()
        except OpsError:
            client.close()
            raise
        for key_type, (key, _) in trusted.items():
            client.get_host_keys().add(name, key_type, key)
        where = f"{self.host}:{self.port}"
        node = f" (node {self._published.node})" if self._published is not None else ""
        client.set_missing_host_key_policy(
            _RejectUnknownHostKey(
                where + node, ", ".join(sources), lambda offered: self._published_note(offered, published)
            )
        )
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
            expected = trusted.get(exc.expected_key.get_name())
            origin = f" (from {expected[1]})" if expected is not None else ""
            raise PermissionDenied(
                f"SSH host key of {where} CHANGED{node}: the server offered {_describe(exc.key)} but the "
                f"trusted key is {_describe(exc.expected_key)}{origin}. "
                f"{self._published_note(exc.key, published)}Refusing to connect: either the VM was recreated "
                "or someone is intercepting the connection.",
                "the bot re-learns the key of a node it made (or TPU_PRIMARY) from that node's guest "
                "attributes when it was recreated; for another VM verify the new fingerprint on it (serial "
                "console: `ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub`), then update known_hosts or "
                "the pinned key (docs/ssh.md)",
                backend="ssh",
            ) from None
        except paramiko.AuthenticationException as exc:
            client.close()
            raise PermissionDenied(
                f"SSH to {self.display}: public-key authentication refused",
                f"a node the bot creates gets its key for {self.user} in the ssh-keys metadata; for another "
                f"VM add the line `python -m bot ssh-key` prints to the node's ssh-keys metadata, or grant "
                "OS Login (docs/ssh.md)",
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
            known = None if slow else diagnose(RemoteError("ssh", text)).top
            if known is not None:  # e.g. the port answers with something that is not SSH
                raise BackendUnavailable(
                    f"SSH to {where}: {known.conclusion}", known.fix, backend="ssh"
                ) from exc
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
