"""The deployments file: several Gemma deployments, each with its project, zones and channels.

`DEPLOYMENTS_FILE` names a YAML file:

    deployments:
      - name: production
        channels: [C0TPUOPS01]            # Slack channels bound to it
      - name: staging
        project: acme-staging
        zones: [us-east1-d]
        primary: gemma4-staging
        accelerator_type: v6e-4
        model: google/gemma-4-26B-A4B-it
        tensor_parallel_size: 4
        vllm_port: 8000                    # the endpoint rule: VLLM_BASE_URL, or discovery on this port
        alert_channel: C0STAGING1
        channels: [C0STAGING1]
        roles: {operators: [U0STAGEOPS]}
        credentials_file: /secrets/staging-sa.json

A key a deployment does not set takes the environment's value (the single-deployment settings), so shared
things such as the SSH key are given once. Without the file, the environment alone is one deployment named
`default`. In a bound channel every command acts on that channel's deployment; elsewhere `--deployment NAME`
chooses, and a command that changes infrastructure is refused when the choice would be a guess
(`bot.services.Fleet`, which builds each deployment's backends from its settings).

This module is the file's format only, read when the settings are validated (`bot.config`), so it imports
no backend: `python -m bot manifest` loads the settings without the clients `bot.services` builds.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ops.datafile import line_of
from ops.linear import linear
from ops.tpu.model import is_zone

if TYPE_CHECKING:  # bot.config reads the file with `read_deployments` when it validates DEPLOYMENTS_FILE
    from bot.config import Settings

__all__ = ["Deployment", "DeploymentsFile", "read_deployments", "settings_for"]

_CHANNEL = r"^[CG][A-Z0-9]{2,}$"
_PRINCIPAL = r"^[UWS][A-Z0-9]{2,}$"
_CHANNEL_RULE, _PRINCIPAL_RULE = linear(_CHANNEL), linear(_PRINCIPAL)
_NAME = linear(r"^[a-z][a-z0-9-]{0,30}$")


class Roles(BaseModel):
    """Slack user or user-group ids per role for one deployment (each replaces the environment's list)."""

    model_config = ConfigDict(extra="forbid")

    viewers: list[str] | None = None
    operators: list[str] | None = None
    admins: list[str] | None = None


class Deployment(BaseModel):
    """One deployment of the file. Only `name` is required; the rest default to the environment's settings.

    Field -> setting: project -> GCP_PROJECT, zones -> TPU_ZONES, primary -> TPU_PRIMARY, accelerator_type ->
    TPU_ACCELERATOR_TYPE, runtime_version -> TPU_RUNTIME_VERSION, model -> VLLM_MODEL, image -> VLLM_IMAGE,
    tensor_parallel_size, max_model_len, vllm_base_url, vllm_port, vllm_container, ssh_host, ssh_port,
    ssh_user, alert_channel, google_api_endpoint (same-named settings; the last only for an emulator),
    credentials_file -> GOOGLE_CREDENTIALS_FILE.
    """

    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[a-z][a-z0-9-]{0,30}$")
    project: str | None = Field(None, pattern=r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$")
    zones: list[str] | None = Field(None, min_length=1)
    primary: str | None = Field(None, pattern=r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
    accelerator_type: str | None = Field(None, pattern=r"^v[0-9a-z]+-\d+$")
    runtime_version: str | None = None
    model: str | None = Field(None, pattern=r"^[A-Za-z0-9._-]+/[A-Za-z0-9._-]+$")
    image: str | None = None
    tensor_parallel_size: int | None = Field(None, ge=1, le=256)
    max_model_len: int | None = Field(None, ge=256, le=1048576)
    vllm_base_url: str | None = Field(None, pattern=r"^https?://[^\s/]+(:\d+)?/?$")
    vllm_port: int | None = Field(None, ge=1, le=65535)
    vllm_container: str | None = Field(None, pattern=r"^[a-zA-Z0-9][a-zA-Z0-9_.-]{0,127}$")
    ssh_host: str | None = None
    ssh_port: int | None = Field(None, ge=1, le=65535)
    ssh_user: str | None = Field(None, pattern=r"^[a-z_][a-z0-9_-]{0,31}$")
    alert_channel: str | None = Field(None, pattern=_CHANNEL)
    channels: list[str] = Field(default_factory=list)
    roles: Roles | None = None
    credentials_file: str | None = None
    google_api_endpoint: str | None = Field(None, pattern=r"^https?://[^\s/]+(:\d+)?/?$")


# Deployment field -> Settings field, where the names differ.
_SETTING_OF = {
    "project": "gcp_project",
    "zones": "tpu_zones",
    "primary": "tpu_primary",
    "accelerator_type": "tpu_accelerator_type",
    "runtime_version": "tpu_runtime_version",
    "model": "vllm_model",
    "image": "vllm_image",
    "tensor_parallel_size": "vllm_tensor_parallel_size",
    "max_model_len": "vllm_max_model_len",
    "credentials_file": "google_credentials_file",
}


class DeploymentsFile(BaseModel):
    """The whole file: `deployments`, a non-empty list."""

    model_config = ConfigDict(extra="forbid")

    deployments: list[Deployment] = Field(min_length=1)


def _where(loc: tuple[int | str, ...], data: object) -> str:
    """`deployments[1] (staging).zones` for a pydantic error location."""
    parts: list[str] = []
    node = data
    for step in loc:
        if isinstance(step, int):
            name = node[step].get("name") if isinstance(node, list) and isinstance(node[step], dict) else None
            parts[-1] += f"[{step}]" + (f" ({name})" if name else "")
            node = node[step] if isinstance(node, list) and step < len(node) else None
        else:
            parts.append(step)
            node = node.get(step) if isinstance(node, dict) else None
    return ".".join(parts)


def _check_ids(deployment: Deployment) -> None:
    bad_zones = [z for z in deployment.zones or [] if not is_zone(z)]
    if bad_zones:
        raise ValueError(f"deployment {deployment.name!r}: not a zone name: {', '.join(bad_zones)}")
    bad_channels = [c for c in deployment.channels if not _CHANNEL_RULE.match(c)]
    if bad_channels:
        raise ValueError(f"deployment {deployment.name!r}: not a channel id: {', '.join(bad_channels)}")
    roles = deployment.roles
    ids = [*(roles.viewers or []), *(roles.operators or []), *(roles.admins or [])] if roles else []
    if deployment.credentials_file and not Path(deployment.credentials_file).is_file():
        raise ValueError(
            f"deployment {deployment.name!r}: credentials_file {deployment.credentials_file} is no file"
        )
    bad_ids = [i for i in ids if not _PRINCIPAL_RULE.match(i)]
    if bad_ids:
        raise ValueError(
            f"deployment {deployment.name!r}: not a Slack user or group id: {', '.join(bad_ids)}"
        )


def read_deployments(path: str | Path) -> list[Deployment]:
    """Read and check a deployments file.

    Args:
        path: the YAML file (see the module docstring for its shape).

    Returns:
        The deployments in file order.

    Raises:
        ValueError: one line naming the problem: the file cannot be read, a field is missing or malformed
            ("deployments[1] (staging).zones: ... (FILE:LINE)"), a name is used twice, a channel is bound
            twice.
    """
    try:
        text = Path(path).read_text(encoding="utf-8")
        root, data = yaml.compose(text, Loader=yaml.SafeLoader), yaml.safe_load(text)
    except OSError as exc:
        raise ValueError(f"cannot read {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ValueError(f"{path} is not YAML: {str(exc).splitlines()[0]}") from None
    try:
        parsed = DeploymentsFile.model_validate(data)
    except ValidationError as exc:
        error = exc.errors()[0]
        where = _where(tuple(error["loc"]), data)
        message = "required but not set" if error["type"] == "missing" else error["msg"]
        if error["type"] == "extra_forbidden":
            message = "unknown field"
        elif error["type"] == "string_pattern_mismatch":
            message = f"{error['input']!r} is not a valid value"
        at = f" ({path}:{line_of(root, error['loc'])})"
        raise ValueError((f"{where}: {message}" if where else str(message)) + at) from None
    seen: set[str] = set()
    bound: dict[str, str] = {}
    for deployment in parsed.deployments:
        _check_ids(deployment)
        if deployment.name in seen:
            raise ValueError(f"deployment {deployment.name!r} is defined twice")
        seen.add(deployment.name)
        for channel in deployment.channels:
            if channel in bound:
                raise ValueError(
                    f"channel {channel} is bound twice: to {bound[channel]!r} and {deployment.name!r}"
                )
            bound[channel] = deployment.name
    return parsed.deployments


def settings_for(base: Settings, deployment: Deployment) -> Settings:
    """The Settings of one deployment: `base` (the environment) with the deployment's own values.

    Returns:
        A copy of `base`; the fields the deployment sets replace the environment's. Roles given per
        deployment replace the environment's role lists (a role left out keeps the environment's).
    """
    update: dict[str, object] = {}
    values = deployment.model_dump(exclude={"name", "channels", "roles"}, exclude_none=True)
    for key, value in values.items():
        update[_SETTING_OF.get(key, key)] = value
    for url in ("vllm_base_url", "google_api_endpoint"):
        if url in update:
            update[url] = str(update[url]).rstrip("/")
    if deployment.roles is not None:
        update.update(deployment.roles.model_dump(exclude_none=True))
    return base.model_copy(update=update)
