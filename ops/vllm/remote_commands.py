"""The only commands the bot runs on a TPU VM: argument validators (`KINDS`) and command templates
(`TEMPLATES`), rendered with every argument validated and `shlex.quote`d.

Only these templates can run (`ops.vllm.ssh.RemoteHost.run` renders through `render`), so shell metacharacters
from Slack reach the remote program as one literal argument. The Hugging Face token never passes through
the bot: `docker_run_vllm` reads it ON THE VM from Secret Manager (`gcloud secrets versions access latest
--secret=NAME`) and hands it to docker through the environment (`-e HF_TOKEN` without a value), so it is
not in any argv either. Docker run flags: docs/vllm.md §4.1 and §4.2.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ops.errors import (
    BadInput,
)
from ops.linear import LinearPattern, linear

__all__ = ["KINDS", "TEMPLATES", "CommandTemplate", "render", "unit_name", "validate"]


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


def _regex_kind(pattern: LinearPattern, rule: str) -> Callable[[Any], str]:
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
# Starting vLLM. Flags: docs/vllm.md §4.1 (recipe docker run) and §4.2 (explicit `vllm serve` command, safe
# with or without the image's entrypoint.sh); tool/reasoning parsers: docs/vllm.md §1.6. The Hugging Face
# token is read on the VM (exit 3: the secret could not be read).
_READ_HF_TOKEN = (  # a command that reads the secret on the VM, not a secret
    'HF_TOKEN="$(gcloud secrets versions access latest --secret={secret})" || exit 3; export HF_TOKEN; '  # noqa: S105
)
_DOCKER_RUN = "docker run -d --name {container} --privileged --net=host --shm-size 16G -v /dev/shm:/dev/shm "
_VLLM_SERVE = (
    "vllm serve {model} --tensor-parallel-size {tensor_parallel_size} --max-model-len {max_model_len} "
    "--host 0.0.0.0 --port {port} --enable-auto-tool-choice --tool-call-parser gemma4 "
    "--reasoning-parser gemma4 --disable_chunked_mm_input"
)
_VLLM_RUN_ARGS = {
    "secret": "secret",
    "container": "container",
    "image": "image",
    "model": "model",
    "tensor_parallel_size": "tensor_parallel_size",
    "max_model_len": "max_model_len",
    "port": "port",
}
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
    "docker_restart": CommandTemplate(
        "{SUDO}docker restart --time {stop_timeout_s} -- {container}",
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
    "docker_run_vllm": CommandTemplate(
        _READ_HF_TOKEN + "{SUDO_ENV}" + _DOCKER_RUN + "-e HF_TOKEN -- {image} " + _VLLM_SERVE, _VLLM_RUN_ARGS
    ),
    # The same, also reading the vLLM API key on the VM (exit 4: that secret could not be read); vLLM takes
    # it from VLLM_API_KEY (vllm/envs.py), so it is in no argv.
    "docker_run_vllm_api_key": CommandTemplate(
        _READ_HF_TOKEN
        + 'VLLM_API_KEY="$(gcloud secrets versions access latest --secret={api_key_secret})" || exit 4; '
        + "export VLLM_API_KEY; {SUDO_ENV_KEY}"
        + _DOCKER_RUN
        + "-e HF_TOKEN -e VLLM_API_KEY -- {image} "
        + _VLLM_SERVE,
        {**_VLLM_RUN_ARGS, "api_key_secret": "secret"},
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
"""The only commands `ops.vllm.ssh.RemoteHost.run` will send."""


def render(template_name: str, args: Mapping[str, Any], *, sudo: bool = False) -> str:
    """The exact command string for one template.

    Args:
        template_name: a key of `TEMPLATES`.
        args: exactly the template's arguments (see `KINDS`).
        sudo: fill `{SUDO}`, `{SUDO_ENV}` and `{SUDO_ENV_KEY}` with a `sudo -n` prefix (else "").

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
    values["SUDO"] = "sudo -n " if sudo else ""
    values["SUDO_ENV"] = "sudo -n --preserve-env=HF_TOKEN " if sudo else ""
    values["SUDO_ENV_KEY"] = "sudo -n --preserve-env=HF_TOKEN,VLLM_API_KEY " if sudo else ""
    return template.text.format(**values)
