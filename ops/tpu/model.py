"""Typed view of Cloud TPU queued resources (QRs) and nodes: the value types, their parsing from the
v2alpha1 REST API's JSON, and the body of a queued-resource create request with the bot's line in the node's
`ssh-keys` metadata (`ssh_keys_entry`, from the bot's key file: `load_key`); and the one rule of zone and
region names (`is_zone`, `check_zone`, `region_of`), which every module checks a zone against.

Pure data and mapping, no network: `ops.tpu.api.TpuOps` calls the API and returns these values. The v2alpha1
JSON is read (not the google-cloud-tpu protos) because only v2alpha1 defines the flex-start fields
(`provisioningModel`, `runDuration`, `schedulingConfig.terminationTimestamp`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import paramiko
from paramiko.pkey import UnknownKeyType

from ops.errors import (
    BadInput,
    OpsError,
)
from ops.gcp.iam import CLOUD_PLATFORM_SCOPE
from ops.linear import linear
from ops.times import parse_protobuf_duration, parse_rfc3339, protobuf_duration

__all__ = [
    "FLEX_START_MAX_RUN",
    "KEY_COMMENT",
    "LIVE_STATES",
    "NODE_EXISTED_STATES",
    "PROVISIONING_MODELS",
    "REGION_PATTERN",
    "ZONE_EXAMPLE",
    "ZONE_PATTERN",
    "Absent",
    "CreateSpec",
    "NodeInfo",
    "QueuedResourceInfo",
    "UpcomingMaintenance",
    "ZoneListing",
    "ZoneNodes",
    "absent_nodes",
    "check_create_spec",
    "check_zone",
    "free_name",
    "is_region",
    "is_zone",
    "load_key",
    "maintenance_from_api",
    "node_from_api",
    "parse_time",
    "primary_among",
    "provisioning_model_label",
    "queued_resource_body",
    "queued_resource_from_api",
    "region_of",
    "ssh_keys_entry",
    "termination_time_of",
    "valid_until_of",
    "zone_of",
]


_UNSPECIFIED = {"", "STATE_UNSPECIFIED", "HEALTH_UNSPECIFIED", "STATE_INITIATOR_UNSPECIFIED"}
# Resource ids (queued resource, node): RFC 1035 labels, as the TPU API and gcloud require.
RESOURCE_ID = linear(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
_ACCELERATOR = linear(r"^v\d+[a-z]*-\d+$")
# The bot's provisioning model names (as QueuedResourceInfo.provisioning_model) accepted by CreateSpec.
PROVISIONING_MODELS = ("flex-start", "spot", "on-demand", "reserved")
# Flex-start may run up to 7 days (https://cloud.google.com/tpu/docs/request-using-flex-start).
FLEX_START_MAX_RUN = timedelta(days=7)


# --------------------------------------------------------------------------------------------------
# Zone and region names
# --------------------------------------------------------------------------------------------------
# The one rule every module checks a zone against. A zone id is `<region>-<letter>`, a region
# `<area>-<location><digits>`: "us-east5-a" is a zone of the region "us-east5"
# (https://cloud.google.com/compute/docs/regions-zones#identifying_a_region_or_zone). The rule is the id's
# shape, not a list: a zone Google adds later passes, and the API says whether it exists.

REGION_PATTERN = r"[a-z]+-[a-z]+[0-9]+"
"""A region id without anchors ("us-east5"), to embed in a larger pattern."""

ZONE_PATTERN = rf"{REGION_PATTERN}-[a-z]"
"""A zone id without anchors ("us-east5-a"), to embed in a larger pattern."""

ZONE_EXAMPLE = "us-east5-a"
"""The zone the error messages give as an example."""

_ZONE = linear(rf"^(?P<region>{REGION_PATTERN})-[a-z]$")
_REGION = linear(rf"^{REGION_PATTERN}$")


def is_zone(word: object) -> bool:
    """Whether `word` is a string shaped like a zone id ("us-east5-a"); False for anything else."""
    return isinstance(word, str) and _ZONE.match(word) is not None


def is_region(word: object) -> bool:
    """Whether `word` is a string shaped like a region id ("us-east5"); False for a zone or anything else."""
    return isinstance(word, str) and _REGION.match(word) is not None


def check_zone(zone: object, *, backend: str = "") -> str:
    """`zone` itself when it is shaped like a zone id.

    Args:
        zone: the zone to check, e.g. "us-east5-a".
        backend: the backend named on the error ("tpu", "logging"), "" for none.

    Returns:
        `zone` unchanged.

    Raises:
        BadInput: `zone` is not a string of the form <area>-<location><digits>-<letter>.
    """
    if not is_zone(zone):
        raise BadInput(f"{zone!r} is not a zone", f"use a zone such as {ZONE_EXAMPLE}", backend=backend)
    assert isinstance(zone, str)
    return zone


def region_of(zone: str) -> str:
    """The region of a zone: "us-east5-a" -> "us-east5" (surrounding spaces ignored).

    Raises:
        BadInput: `zone` is not of the form <area>-<location><digits>-<letter>.
    """
    match = _ZONE.match(zone.strip()) if isinstance(zone, str) else None
    if not match:
        raise BadInput(f"malformed zone {zone!r}", f"expected e.g. {ZONE_EXAMPLE}")
    return str(match.group("region"))


# --------------------------------------------------------------------------------------------------
# Value types
# --------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class UpcomingMaintenance:
    """A host maintenance event Google announced for a TPU VM (v2alpha1 and v2 `Node.upcomingMaintenance`,
    https://cloud.google.com/tpu/docs/view-maintenance-notifications).

    Attributes:
        kind: `type`: "SCHEDULED" (announced about seven days ahead) or "UNSCHEDULED" (critical, less
            notice); "" when the API gives none.
        status: `maintenanceStatus`: "PENDING" (not started yet) or "ONGOING" (under way); "" if unknown.
        can_reschedule: `canReschedule`: whether it can be started early by hand (perform-maintenance).
        window_start, window_end: `windowStartTime`, `windowEndTime`, aware UTC (None if absent).
        latest_start: `latestWindowStartTime`: the latest the window may be moved to.
    """

    kind: str
    status: str
    can_reschedule: bool
    window_start: datetime | None
    window_end: datetime | None
    latest_start: datetime | None = None

    def underway(self, now: datetime) -> bool:
        """Whether the maintenance is running: ONGOING, or PENDING with its window already open."""
        if self.status == "ONGOING":
            return True
        return self.window_start is not None and self.window_start <= now


@dataclass(frozen=True)
class NodeInfo:
    """A TPU VM (Cloud TPU API `Node`).

    Attributes:
        name: node id, the last segment of `Node.name`, e.g. "gemma4-qr-node".
        zone: zone from `Node.name`, e.g. "us-east5-a".
        state: `Node.state` enum name: READY, CREATING, PREEMPTED, STOPPED, ... ("STATE_UNSPECIFIED" if
            absent).
        health: `Node.health` enum name (HEALTHY, TIMEOUT, UNHEALTHY_TENSORFLOW, UNHEALTHY_MAINTENANCE), or
            None when the API gives none.
        health_description: `Node.healthDescription`, "" if absent.
        accelerator_type: `Node.acceleratorType`, e.g. "v6e-8".
        runtime_version: `Node.runtimeVersion`, e.g. "v2-alpha-tpuv6e".
        internal_ips: `networkEndpoints[].ipAddress`, one per worker.
        external_ips: `networkEndpoints[].accessConfig.externalIp` (empty without external IPs).
        create_time: `Node.createTime`, timezone-aware UTC.
        termination_time: `schedulingConfig.terminationTimestamp` (v2alpha1 only; None from v2 or when unset).
        maintenance: `upcomingMaintenance`, None when no host maintenance is announced.
    """

    name: str
    zone: str
    state: str
    health: str | None
    health_description: str
    accelerator_type: str
    runtime_version: str
    internal_ips: tuple[str, ...]
    external_ips: tuple[str, ...]
    create_time: datetime | None
    termination_time: datetime | None
    maintenance: UpcomingMaintenance | None = None


NODE_EXISTED_STATES = frozenset({"ACTIVE", "SUSPENDING", "SUSPENDED", "DELETING"})
"""Queued resource states reached only once its nodes were provisioned: a node of it the TPU API no longer
lists was deleted (a spot preemption suspends the queued resource and deletes its nodes); in any other
state (ACCEPTED, WAITING_FOR_RESOURCES, PROVISIONING, CREATING, FAILED) a node it names but the API does not
list was never created. States: https://cloud.google.com/tpu/docs/reference/rest/v2alpha1/
projects.locations.queuedResources#State; suspension: docs/google-apis.md."""


@dataclass(frozen=True)
class Absent:
    """A node a queued resource names (`tpu.nodeSpec[].nodeId`) that the TPU API does not list now.

    Attributes:
        node: its id.
        resource: its queued resource.
        state: the queued resource's state, e.g. "FAILED".
    """

    node: str
    resource: str
    state: str

    @property
    def created(self) -> bool:
        """Whether it existed once (the queued resource's state comes after provisioning,
        `NODE_EXISTED_STATES`): then it was deleted; otherwise it was never created."""
        return self.state in NODE_EXISTED_STATES

    def sentence(self) -> str:
        """What a read of its logs can hold, in words: "node `gemma4-old-node` of `gemma4-old` was never
        created (`gemma4-old` is FAILED and the TPU API lists no node of it): a node that never existed has
        no logs", or, deleted, "... no longer exists (`gemma4-x` is SUSPENDED): its entries are from before
        it was deleted"."""
        if self.created:
            return (
                f"node `{self.node}` of `{self.resource}` no longer exists (`{self.resource}` is "
                f"{self.state}): its entries are from before it was deleted"
            )
        return (
            f"node `{self.node}` of `{self.resource}` was never created (`{self.resource}` is {self.state} "
            "and the TPU API lists no node of it): a node that never existed has no logs"
        )


@dataclass(frozen=True)
class QueuedResourceInfo:
    """A queued resource (Cloud TPU API v2alpha1 `QueuedResource`) and its existing nodes.

    Attributes:
        name: QR id, the last segment of `QueuedResource.name`, e.g. "gemma4-qr".
        zone: zone from `QueuedResource.name`.
        state: `state.state` enum name: ACTIVE, WAITING_FOR_RESOURCES, PROVISIONING, FAILED, SUSPENDING,
            SUSPENDED, DELETING, CREATING, ACCEPTED.
        state_initiator: `state.stateInitiator` (USER | SERVICE), None if unspecified.
        provisioning_model: "flex-start" | "spot" | "on-demand" | "reserved" | "best-effort", from
            `provisioningModel`, `spot`, `guaranteed.reserved`, `reservationName`, `bestEffort`.
        accelerator_type: `tpu.nodeSpec[0].node.acceleratorType` (else the first node's), "" if unknown.
        runtime_version: `tpu.nodeSpec[0].node.runtimeVersion`, "" if unknown.
        create_time: `createTime`, timezone-aware UTC.
        node_ids: `tpu.nodeSpec[].nodeId`, plus the ids of fetched nodes pointing at this QR.
        nodes: the nodes that exist (fetched from the nodes API); empty while waiting, failed or suspended.
        termination_time: when the TPU VMs will be deleted: `runDuration.terminationTime`, else the
            earliest node `schedulingConfig.terminationTimestamp`, else, for an ACTIVE QR, the earliest
            node `createTime` + `maxRunDuration` (the run counts from when the TPU VMs are provisioned,
            not from the request: "Once available, Flex-start provisions the TPU VMs to run for the
            duration that you specified", https://cloud.google.com/tpu/docs/request-using-flex-start);
            None when unknown (no node seen; on-demand and spot have no fixed end).
        valid_until: queueing deadline: `queueingPolicy.validUntilTime`, else createTime +
            `validUntilDuration`, else `validInterval.endTime`.
        max_run_duration: `runDuration.maxRunDuration` (flex-start).
        error: `state.failedData.error.message` for FAILED QRs.
        labels: `tpu.nodeSpec[0].node.labels` (the queued resource itself has no labels field); the
            bot's ownership labels live here (see `ops.tpu.ownership`).
    """

    name: str
    zone: str
    state: str
    state_initiator: str | None
    provisioning_model: str
    accelerator_type: str
    runtime_version: str
    create_time: datetime | None
    node_ids: tuple[str, ...]
    nodes: tuple[NodeInfo, ...]
    termination_time: datetime | None
    valid_until: datetime | None
    max_run_duration: timedelta | None
    error: str | None
    labels: Mapping[str, str] = field(default_factory=dict)

    def time_left(self, now: datetime) -> timedelta | None:
        """Time until `termination_time`, clamped at zero once it is past.

        Args:
            now: the current time, timezone-aware.

        Returns:
            The remaining run time, or None if the termination time is unknown.
        """
        if self.termination_time is None:
            return None
        return max(timedelta(0), self.termination_time - now)

    @property
    def preempted(self) -> bool:
        """Whether Google reclaimed this queued resource's spot capacity.

        A spot preemption goes ACTIVE -> SUSPENDING -> SUSPENDED with `stateInitiator` SERVICE and the node
        deleted ("SUSPENDED: the resources have been deleted", cloud.google.com/tpu/docs/queued-resources;
        preempted Spot TPUs must be recreated, cloud.google.com/tpu/docs/spot); a node may show PREEMPTED on
        the way. A flex-start QR SUSPENDED at the end of its max run duration is not a preemption.
        """
        if any(node.state == "PREEMPTED" for node in self.nodes):
            return True
        return (
            self.provisioning_model == "spot"
            and self.state in ("SUSPENDING", "SUSPENDED")
            and self.state_initiator == "SERVICE"
        )


@dataclass(frozen=True)
class ZoneListing:
    """The result of listing several zones: what could be read, and per-zone failures.

    Attributes:
        resources: queued resources of all zones that answered, sorted by (zone, name).
        errors: zone -> the OpsError that zone raised; the other zones are still listed. A zone whose
            QRs were listed but whose nodes could not be read appears in both (its QRs with no nodes).
    """

    resources: tuple[QueuedResourceInfo, ...]
    errors: dict[str, OpsError] = field(default_factory=dict)


# A queued resource that holds or is on its way to capacity (the states before ACTIVE and ACTIVE itself,
# https://cloud.google.com/tpu/docs/queued-resources#queued_resource_states); FAILED, SUSPENDING,
# SUSPENDED and DELETING hold none.
LIVE_STATES = ("ACTIVE", "PROVISIONING", "CREATING", "WAITING_FOR_RESOURCES", "ACCEPTED")


def primary_among(
    resources: Iterable[QueuedResourceInfo], name: str, zones: Sequence[str] = ()
) -> QueuedResourceInfo | None:
    """The one primary queued resource among `resources`, known by zone and name, never by name alone.

    A name is unique per zone only, so two zones may each hold a `name` (a second request made by hand,
    or one of an older release). Of those, the primary is the one that holds capacity: ACTIVE first, then
    one on its way (`LIVE_STATES`), then any; among equals the oldest (`createTime`: the later one is the
    second), then the first in `zones` (TPU_ZONES) order.

    Args:
        resources: the queued resources read (any zones, any order).
        name: the primary's name (TPU_PRIMARY), e.g. "gemma4-qr".
        zones: the watched zones in the operators' order.

    Returns:
        That resource, or None when no resource is named `name`.
    """
    order = {zone: index for index, zone in enumerate(zones)}
    never = datetime.max.replace(tzinfo=UTC)

    def rank(qr: QueuedResourceInfo) -> tuple[bool, bool, datetime, int, str]:
        created = qr.create_time or never
        return (
            qr.state != "ACTIVE",
            qr.state not in LIVE_STATES,
            created,
            order.get(qr.zone, len(order)),
            qr.zone,
        )

    named = [qr for qr in resources if qr.name == name]
    return min(named, key=rank) if named else None


def free_name(base: str, taken: Iterable[str]) -> str:
    """The first of `base`-2, `base`-3, ... that is a valid queued resource id and neither it nor its
    default node id (`NAME-node`) is in `taken`.

    Args:
        base: the name in use, e.g. "gemma4-qr".
        taken: every queued resource and node name read, in any zone.

    Returns:
        e.g. "gemma4-qr-2"; the base is shortened to keep the result within 63 characters (RFC 1035,
        the queued resource id rule of `RESOURCE_ID`).
    """
    used = set(taken)
    number = 2
    while True:
        suffix = f"-{number}"
        candidate = base[: 63 - len(suffix) - len("-node")].rstrip("-") + suffix
        if candidate not in used and f"{candidate}-node" not in used:
            return candidate
        number += 1


@dataclass(frozen=True)
class CreateSpec:
    """What to request in `TpuOps.create_queued_resource` (gcloud `queued-resources create` terms).

    Attributes:
        name: queued resource id (RFC 1035: 1-63 lowercase letters, digits, hyphens), e.g. "gemma4-qr".
        node_id: the node's id, usually f"{name}-node".
        zone: e.g. "us-east5-a".
        accelerator_type: e.g. "v6e-8".
        runtime_version: TPU software version, e.g. "v2-alpha-tpuv6e".
        provisioning_model: "flex-start" | "spot" | "on-demand" | "reserved".
        max_run_duration: flex-start only, and required for it: how long the TPU VMs may run once ACTIVE
            (`runDuration.maxRunDuration`, at most 7 days).
        valid_until: how long the request may wait for capacity (`queueingPolicy.validUntilDuration`); None:
            no deadline.
        startup_script: node metadata "startup-script" ("" for none).
        ssh_keys: node metadata "ssh-keys", one "USER:TYPE BASE64 COMMENT" line per key ("" for none): the
            guest agent makes USER on the VM and authorizes the key
            (https://cloud.google.com/compute/docs/connect/add-ssh-keys); see `ssh_keys_entry`.
        labels: node labels (the queued resource itself has none).
        service_account: the node's service account email (scope cloud-platform); None: the default one.
    """

    name: str
    node_id: str
    zone: str
    accelerator_type: str
    runtime_version: str
    provisioning_model: str
    max_run_duration: timedelta | None
    valid_until: timedelta | None
    startup_script: str = ""
    labels: Mapping[str, str] = field(default_factory=dict)
    service_account: str | None = None
    ssh_keys: str = ""


def check_create_spec(spec: CreateSpec) -> None:
    """Validate a CreateSpec before anything is sent.

    Raises:
        BadInput: malformed name, node id, zone, accelerator type or runtime version; unknown provisioning
            model; flex-start without a max run duration (or over 7 days); a max run duration for another
            model; a valid-until or max run duration under one second.
    """
    for label, value in (("queued resource name", spec.name), ("node id", spec.node_id)):
        if not RESOURCE_ID.match(value or ""):
            raise BadInput(
                f"bad {label} {value!r}",
                "use 1-63 lowercase letters, digits and hyphens, starting with a letter",
            )
    check_zone(spec.zone)
    if not _ACCELERATOR.match(spec.accelerator_type or ""):
        raise BadInput(f"bad accelerator type {spec.accelerator_type!r}", "use e.g. v6e-8")
    if not spec.runtime_version or any(c.isspace() for c in spec.runtime_version):
        raise BadInput(f"bad runtime version {spec.runtime_version!r}", "use e.g. v2-alpha-tpuv6e")
    if spec.provisioning_model not in PROVISIONING_MODELS:
        raise BadInput(
            f"unknown provisioning model {spec.provisioning_model!r}",
            f"use one of {', '.join(PROVISIONING_MODELS)}",
        )
    if spec.provisioning_model == "flex-start":
        if spec.max_run_duration is None:
            raise BadInput("flex-start needs a max run duration", "give one, e.g. 4h (at most 7d)")
        if spec.max_run_duration > FLEX_START_MAX_RUN:
            raise BadInput("flex-start max run duration is over 7 days", "use 7d or less")
    elif spec.max_run_duration is not None:
        raise BadInput("a max run duration applies to flex-start only", "drop it, or use flex-start")
    for label, span in (("max run duration", spec.max_run_duration), ("valid-until", spec.valid_until)):
        if span is not None and span.total_seconds() < 1:
            raise BadInput(f"{label} must be at least one second", "use e.g. 4h")


def queued_resource_body(spec: CreateSpec, project: str) -> dict[str, Any]:
    """The v2alpha1 `QueuedResource` JSON body for `queuedResources.create` (no validation).

    Field mapping as gcloud's `alpha compute tpus queued-resources create` (google-cloud-sdk 578.0.0,
    command_lib/compute/tpus/queued_resources): node id -> `tpu.nodeSpec[0].nodeId` (+ `parent`),
    accelerator/runtime -> `node.acceleratorType`/`runtimeVersion`, startup script and SSH keys ->
    `node.metadata` ("startup-script", "ssh-keys"),
    labels -> `node.labels`, network "default" with `enableExternalIps: true` set explicitly (the API
    default is false, gcloud's is true), service account -> `node.serviceAccount{email, scope:
    [cloud-platform]}`; flex-start -> `provisioningModel: FLEX_START` + `runDuration.maxRunDuration`; spot
    -> `spot: {}` + `provisioningModel: SPOT`; reserved -> `guaranteed: {reserved: true}`; on-demand ->
    `provisioningModel: STANDARD`; valid-until -> `queueingPolicy.validUntilDuration`. Durations are JSON
    Durations in whole seconds ("14400s").
    """
    parent = f"projects/{project}/locations/{spec.zone}"
    node: dict[str, Any] = {
        "acceleratorType": spec.accelerator_type,
        "runtimeVersion": spec.runtime_version,
        "networkConfig": {"network": "default", "enableExternalIps": True},
    }
    if spec.service_account:
        node["serviceAccount"] = {"email": spec.service_account, "scope": [CLOUD_PLATFORM_SCOPE]}
    metadata = {"startup-script": spec.startup_script, "ssh-keys": spec.ssh_keys}
    if any(metadata.values()):
        node["metadata"] = {key: value for key, value in metadata.items() if value}
    if spec.labels:
        node["labels"] = dict(spec.labels)
    body: dict[str, Any] = {"tpu": {"nodeSpec": [{"parent": parent, "nodeId": spec.node_id, "node": node}]}}
    if spec.provisioning_model == "flex-start":
        body["provisioningModel"] = "FLEX_START"
        if spec.max_run_duration is not None:
            body["runDuration"] = {"maxRunDuration": protobuf_duration(spec.max_run_duration)}
    elif spec.provisioning_model == "spot":
        body["spot"] = {}
        body["provisioningModel"] = "SPOT"
    elif spec.provisioning_model == "reserved":
        body["guaranteed"] = {"reserved": True}
    else:
        body["provisioningModel"] = "STANDARD"
    if spec.valid_until is not None:
        body["queueingPolicy"] = {"validUntilDuration": protobuf_duration(spec.valid_until)}
    return body


# --------------------------------------------------------------------------------------------------
# Pure mapping from API JSON
# --------------------------------------------------------------------------------------------------


# --------------------------------------------------------------------------------------------------
# The bot's key in a node's `ssh-keys` metadata
# --------------------------------------------------------------------------------------------------

KEY_COMMENT = "tpu-chatops"
"""The comment of the bot's public key in a node's `ssh-keys` metadata (and so in its authorized_keys)."""


def load_key(key_path: str) -> paramiko.PKey:
    """Read the bot's private SSH key (OpenSSH or PEM; Ed25519, ECDSA or RSA), unencrypted.

    Args:
        key_path: the file (SSH_KEY_PATH).

    Returns:
        The paramiko key; its public part is `get_name()` and `get_base64()`.

    Raises:
        BadInput: the file cannot be read, is encrypted, or is not a private key (the message names the
            file, never its content).
    """
    encrypted = BadInput(
        f"the SSH key {key_path} is encrypted with a passphrase",
        "give the bot a key without a passphrase (ssh-keygen -t ed25519 -N '' ...; see docs/ssh.md)",
    )
    try:
        return paramiko.PKey.from_path(key_path)
    except paramiko.PasswordRequiredException:
        raise encrypted from None
    except TypeError as exc:  # cryptography: "Key is password-protected, but password was not provided."
        if "password" in str(exc).lower():
            raise encrypted from None
        raise BadInput(
            f"{key_path} is not an SSH private key paramiko can read",
            "make one with `ssh-keygen -t ed25519 -N '' -C tpu-chatops -f tpu-chatops` (docs/ssh.md)",
        ) from None
    except OSError as exc:
        raise BadInput(
            f"cannot read the SSH key {key_path}: {exc.strerror or exc}",
            "check SSH_KEY_PATH and that the secret is mounted there (docs/ssh.md)",
        ) from None
    except (paramiko.SSHException, UnknownKeyType, ValueError):
        raise BadInput(
            f"{key_path} is not an SSH private key paramiko can read",
            "make one with `ssh-keygen -t ed25519 -N '' -C tpu-chatops -f tpu-chatops` (docs/ssh.md)",
        ) from None


def ssh_keys_entry(key_path: str, user: str) -> str:
    """The bot's line for a VM's `ssh-keys` metadata: "USER:TYPE BASE64 tpu-chatops".

    The guest agent creates USER on the VM from it and authorizes the key (format "USERNAME:KEY_VALUE",
    https://cloud.google.com/compute/docs/connect/add-ssh-keys). Only the public part of the key is used.

    Args:
        key_path: the bot's private key (SSH_KEY_PATH).
        user: the login user (SSH_USER), e.g. "tpu-chatops".

    Returns:
        e.g. "tpu-chatops:ssh-ed25519 AAAAC3Nz... tpu-chatops".

    Raises:
        BadInput: as `load_key`.
    """
    key = load_key(key_path)
    return f"{user}:{key.get_name()} {key.get_base64()} {KEY_COMMENT}"


def parse_time(value: Any) -> datetime | None:
    """Parse a Google RFC 3339 timestamp ("2026-01-01T00:00:00.123456789Z") into an aware UTC datetime.

    Returns None for a missing or malformed value.
    """
    if not isinstance(value, str):
        return None
    return parse_rfc3339(value)


def provisioning_model_label(raw: Mapping[str, Any]) -> str:
    """The bot's name for how a v2alpha1 QueuedResource dict is provisioned.

    Returns:
        "flex-start" (`provisioningModel` FLEX_START), "spot" (SPOT or a `spot` field), "reserved"
        (RESERVATION_BOUND, `guaranteed.reserved` or `reservationName`), "best-effort" (`bestEffort`),
        else "on-demand" (STANDARD, unspecified, `guaranteed` without reservation).
    """
    model = raw.get("provisioningModel")
    guaranteed = raw.get("guaranteed") or {}
    if model == "FLEX_START":
        return "flex-start"
    if model == "SPOT" or "spot" in raw:
        return "spot"
    if model == "RESERVATION_BOUND" or guaranteed.get("reserved") or raw.get("reservationName"):
        return "reserved"
    if "bestEffort" in raw:
        return "best-effort"
    return "on-demand"


def zone_of(name: str) -> str:
    """The zone of a resource name "projects/P/locations/ZONE/..." ("" when it names no location)."""
    parts = name.split("/")
    return parts[3] if len(parts) > 3 and parts[2] == "locations" else ""


def _enum(value: Any) -> str | None:
    return None if value is None or str(value) in _UNSPECIFIED else str(value)


def maintenance_from_api(raw: Any) -> UpcomingMaintenance | None:
    """Map a Node's `upcomingMaintenance` JSON dict to an UpcomingMaintenance (None when absent or empty;
    the enums' "do not use" values UNKNOWN and UNKNOWN_TYPE become "")."""
    if not isinstance(raw, Mapping) or not raw:
        return None
    kind = str(raw.get("type") or "")
    status = str(raw.get("maintenanceStatus") or "")
    return UpcomingMaintenance(
        kind="" if kind == "UNKNOWN_TYPE" else kind,
        status="" if status == "UNKNOWN" else status,
        can_reschedule=bool(raw.get("canReschedule")),
        window_start=parse_time(raw.get("windowStartTime")),
        window_end=parse_time(raw.get("windowEndTime")),
        latest_start=parse_time(raw.get("latestWindowStartTime")),
    )


def node_from_api(raw: Mapping[str, Any]) -> NodeInfo:
    """Map a Node JSON dict (v2alpha1 or v2, camelCase, enum names) to a NodeInfo."""
    name = str(raw.get("name", ""))
    endpoints = [e for e in raw.get("networkEndpoints") or [] if isinstance(e, Mapping)]
    external = [str((e.get("accessConfig") or {}).get("externalIp") or "") for e in endpoints]
    return NodeInfo(
        name=name.rsplit("/", 1)[-1],
        zone=zone_of(name),
        state=str(raw.get("state") or "STATE_UNSPECIFIED"),
        health=_enum(raw.get("health")),
        health_description=str(raw.get("healthDescription") or ""),
        accelerator_type=str(raw.get("acceleratorType") or ""),
        runtime_version=str(raw.get("runtimeVersion") or ""),
        internal_ips=tuple(str(e["ipAddress"]) for e in endpoints if e.get("ipAddress")),
        external_ips=tuple(ip for ip in external if ip),
        create_time=parse_time(raw.get("createTime")),
        termination_time=parse_time((raw.get("schedulingConfig") or {}).get("terminationTimestamp")),
        maintenance=maintenance_from_api(raw.get("upcomingMaintenance")),
    )


def termination_time_of(raw: Mapping[str, Any], nodes: Sequence[NodeInfo] = ()) -> datetime | None:
    """When a QR's TPU VMs will be deleted (see QueuedResourceInfo.termination_time for the order)."""
    run = raw.get("runDuration") or {}
    explicit = parse_time(run.get("terminationTime"))
    if explicit is not None:
        return explicit
    node_times = [n.termination_time for n in nodes if n.termination_time is not None]
    if node_times:
        return min(node_times)
    provisioned = min((n.create_time for n in nodes if n.create_time is not None), default=None)
    max_run = parse_protobuf_duration(run.get("maxRunDuration"))
    if (raw.get("state") or {}).get("state") == "ACTIVE" and provisioned is not None and max_run is not None:
        return provisioned + max_run
    return None


def valid_until_of(raw: Mapping[str, Any]) -> datetime | None:
    """A QR's queueing deadline from `queueingPolicy` (validUntilTime, validUntilDuration, validInterval)."""
    policy = raw.get("queueingPolicy") or {}
    until = parse_time(policy.get("validUntilTime"))
    if until is not None:
        return until
    created, within = (
        parse_time(raw.get("createTime")),
        parse_protobuf_duration(policy.get("validUntilDuration")),
    )
    if created is not None and within is not None:
        return created + within
    return parse_time((policy.get("validInterval") or {}).get("endTime"))


class ZoneNodes:
    """A zone's nodes (a whole `nodes.list`), indexed once by node id and by the queued resource that owns
    each (`Node.queuedResource`), so that attaching nodes to every QR of a listing costs one lookup per QR,
    not a scan of every node.

    Args:
        node_dicts: Node dicts as the API returned them.
    """

    def __init__(self, node_dicts: Iterable[Mapping[str, Any]] = ()) -> None:
        self._by_id: dict[str, Mapping[str, Any]] = {}
        self._by_owner: dict[str, list[Mapping[str, Any]]] = {}
        for node in node_dicts:
            self._by_id[str(node.get("name", "")).rsplit("/", 1)[-1]] = node
            owner = str(node.get("queuedResource") or "").rsplit("/", 1)[-1]
            if owner:
                self._by_owner.setdefault(owner, []).append(node)

    def of(self, qr_id: str, node_ids: Iterable[str]) -> list[Mapping[str, Any]]:
        """The nodes of queued resource `qr_id`: those named in its `tpu.nodeSpec[].nodeId` (`node_ids`)
        and those whose `queuedResource` is it, each once."""
        found = {id(node): node for node in self._by_owner.get(qr_id, ())}
        for node_id in node_ids:
            node = self._by_id.get(node_id)
            if node is not None:
                found[id(node)] = node
        return list(found.values())


def queued_resource_from_api(
    raw: Mapping[str, Any], node_dicts: Sequence[Mapping[str, Any]] | ZoneNodes = ()
) -> QueuedResourceInfo:
    """Map a v2alpha1 QueuedResource JSON dict to a QueuedResourceInfo.

    Args:
        raw: the QueuedResource dict as the API returned it.
        node_dicts: Node dicts of the same zone (e.g. a whole nodes.list), or a `ZoneNodes` of them built
            once for a whole listing; those belonging to this QR (by `tpu.nodeSpec[].nodeId` or
            `Node.queuedResource`) become `nodes`.
    """
    zone_nodes = node_dicts if isinstance(node_dicts, ZoneNodes) else ZoneNodes(node_dicts)
    name = str(raw.get("name", ""))
    qr_id = name.rsplit("/", 1)[-1]
    specs = [s for s in (raw.get("tpu") or {}).get("nodeSpec") or [] if isinstance(s, Mapping)]
    spec_ids = [str(s["nodeId"]) for s in specs if s.get("nodeId")]
    nodes = tuple(sorted((node_from_api(n) for n in zone_nodes.of(qr_id, spec_ids)), key=lambda n: n.name))
    node_ids = tuple(spec_ids + [n.name for n in nodes if n.name not in spec_ids])
    first = (specs[0].get("node") or {}) if specs else {}
    state = raw.get("state") or {}
    error = ((state.get("failedData") or {}).get("error") or {}).get("message")
    return QueuedResourceInfo(
        name=qr_id,
        zone=zone_of(name),
        state=str(state.get("state") or "STATE_UNSPECIFIED"),
        state_initiator=_enum(state.get("stateInitiator")),
        provisioning_model=provisioning_model_label(raw),
        accelerator_type=str(first.get("acceleratorType") or (nodes[0].accelerator_type if nodes else "")),
        runtime_version=str(first.get("runtimeVersion") or (nodes[0].runtime_version if nodes else "")),
        create_time=parse_time(raw.get("createTime")),
        node_ids=node_ids,
        nodes=nodes,
        termination_time=termination_time_of(raw, nodes),
        valid_until=valid_until_of(raw),
        max_run_duration=parse_protobuf_duration((raw.get("runDuration") or {}).get("maxRunDuration")),
        error=" ".join(str(error).split()) if error else None,
        labels={str(k): str(v) for k, v in (first.get("labels") or {}).items()},
    )


def absent_nodes(resources: Iterable[QueuedResourceInfo]) -> dict[str, Absent]:
    """Each node id a queued resource names (`node_ids`) that the TPU API does not list now (not among its
    `nodes`) -> what became of it (`Absent`)."""
    return {
        node: Absent(node, qr.name, qr.state)
        for qr in resources
        for node in qr.node_ids
        if node not in {n.name for n in qr.nodes}
    }
