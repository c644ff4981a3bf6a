"""Typed view of Cloud TPU queued resources (QRs) and nodes, and the calls that change them.

Queued resources and node listings are read through the v2alpha1 REST API (google-api-python-client,
see `ops.google.tpu_v2alpha1`), because only v2alpha1 defines the flex-start fields
(`provisioningModel`, `runDuration`, `schedulingConfig.terminationTimestamp`) and the google-cloud-tpu
protos silently drop them. `TpuOps.get_node`, `start_node` and `stop_node` use the GAPIC `tpu_v2` REST
client. Creating, deleting and resetting queued resources goes through v2alpha1 too (flex-start's
`provisioningModel` and `runDuration` exist only there); every change returns a long-running operation
name (`projects/P/locations/Z/operations/ID`) that `TpuOps.wait_operation` polls.

Every failure is raised as an `ops.errors.OpsError` subclass with a one-line message naming the API and
a hint; raw library exceptions never escape. Transient failures (HTTP 429 and 5xx) of reads are first
retried by the libraries themselves (`execute(num_retries=...)`, google-api-core `Retry`) a small bounded
number of times; changes are sent once (a retried create could collide with its own first attempt).
"""

from __future__ import annotations

import http
import json
import re
import threading
import time
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httplib2
import requests
from google.api_core import exceptions as core_exceptions
from google.api_core import retry as core_retry
from google.auth import exceptions as auth_exceptions
from google.auth.credentials import Credentials
from google.cloud import tpu_v2
from googleapiclient.errors import HttpError

from ops import faults, google
from ops.errors import (
    AlreadyExists,
    BackendTimeout,
    BackendUnavailable,
    BadInput,
    Cancelled,
    CapacityUnavailable,
    NotFound,
    OpsError,
    PermissionDenied,
    QuotaExceeded,
    UnsupportedInZone,
)

__all__ = [
    "PROVISIONING_MODELS",
    "CreateSpec",
    "NodeInfo",
    "QueuedResourceInfo",
    "TpuOps",
    "ZoneListing",
    "check_create_spec",
    "create_error",
    "operation_error",
    "queued_resource_body",
]


MAX_MESSAGE_CHARS = 300
_ID = re.compile(r"^[a-z0-9][-a-z0-9_]*$", re.IGNORECASE)
_PROJECT = re.compile(r"^[a-z0-9][-a-z0-9.:]*$")
_ZONE = re.compile(r"^[a-z]+-[a-z]+\d+-[a-z]$")
_QR_PATH = re.compile(
    r"^projects/(?P<project>[^/]+)/locations/(?P<zone>[^/]+)/queuedResources/(?P<id>[^/]+)$"
)
_TIME = re.compile(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$")
_DURATION = re.compile(r"^(-?\d+(?:\.\d+)?)s$")
_REQUEST_PREFIX = re.compile(r"^(?:GET|POST|PUT|PATCH|DELETE) \S+: ")
_UNSPECIFIED = {"", "STATE_UNSPECIFIED", "HEALTH_UNSPECIFIED", "STATE_INITIATOR_UNSPECIFIED"}
# Resource ids (queued resource, node): RFC 1035 labels, as the TPU API and gcloud require.
_RESOURCE_ID = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
_ACCELERATOR = re.compile(r"^v\d+[a-z]*-\d+$")
_OP_PATH = re.compile(r"^projects/(?P<project>[^/]+)/locations/(?P<zone>[^/]+)/operations/(?P<id>[^/]+)$")
CLOUD_PLATFORM_SCOPE = "https://www.googleapis.com/auth/cloud-platform"
# The bot's provisioning model names (as QueuedResourceInfo.provisioning_model) accepted by CreateSpec.
PROVISIONING_MODELS = ("flex-start", "spot", "on-demand", "reserved")
# Flex-start may run up to 7 days (https://cloud.google.com/tpu/docs/request-using-flex-start).
FLEX_START_MAX_RUN = timedelta(days=7)
# google.rpc.Code names (https://github.com/googleapis/googleapis/blob/master/google/rpc/code.proto).
RPC_CODES = {
    1: "CANCELLED",
    2: "UNKNOWN",
    3: "INVALID_ARGUMENT",
    4: "DEADLINE_EXCEEDED",
    5: "NOT_FOUND",
    6: "ALREADY_EXISTS",
    7: "PERMISSION_DENIED",
    8: "RESOURCE_EXHAUSTED",
    9: "FAILED_PRECONDITION",
    10: "ABORTED",
    11: "OUT_OF_RANGE",
    12: "UNIMPLEMENTED",
    13: "INTERNAL",
    14: "UNAVAILABLE",
    15: "DATA_LOSS",
    16: "UNAUTHENTICATED",
}


# --------------------------------------------------------------------------------------------------
# Value types
# --------------------------------------------------------------------------------------------------


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
            earliest node `schedulingConfig.terminationTimestamp`, else `createTime + maxRunDuration` for
            an ACTIVE QR; None when unknown (e.g. on-demand and spot have no fixed end).
        valid_until: queueing deadline: `queueingPolicy.validUntilTime`, else createTime +
            `validUntilDuration`, else `validInterval.endTime`.
        max_run_duration: `runDuration.maxRunDuration` (flex-start).
        error: `state.failedData.error.message` for FAILED QRs.
        labels: `tpu.nodeSpec[0].node.labels` (the queued resource itself has no labels field); the
            bot's ownership labels live here (see `ops.ownership`).
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


def _duration_json(value: timedelta) -> str:
    """A google.protobuf.Duration in JSON, whole seconds: timedelta(hours=4) -> "14400s"."""
    return f"{round(value.total_seconds())}s"


def check_create_spec(spec: CreateSpec) -> None:
    """Validate a CreateSpec before anything is sent.

    Raises:
        BadInput: malformed name, node id, zone, accelerator type or runtime version; unknown provisioning
            model; flex-start without a max run duration (or over 7 days); a max run duration for another
            model; a valid-until or max run duration under one second.
    """
    for label, value in (("queued resource name", spec.name), ("node id", spec.node_id)):
        if not _RESOURCE_ID.match(value or ""):
            raise BadInput(
                f"bad {label} {value!r}",
                "use 1-63 lowercase letters, digits and hyphens, starting with a letter",
            )
    TpuOps._check_zone(spec.zone)
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
    accelerator/runtime -> `node.acceleratorType`/`runtimeVersion`, startup script -> `node.metadata`,
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
    if spec.startup_script:
        node["metadata"] = {"startup-script": spec.startup_script}
    if spec.labels:
        node["labels"] = dict(spec.labels)
    body: dict[str, Any] = {"tpu": {"nodeSpec": [{"parent": parent, "nodeId": spec.node_id, "node": node}]}}
    if spec.provisioning_model == "flex-start":
        body["provisioningModel"] = "FLEX_START"
        if spec.max_run_duration is not None:
            body["runDuration"] = {"maxRunDuration": _duration_json(spec.max_run_duration)}
    elif spec.provisioning_model == "spot":
        body["spot"] = {}
        body["provisioningModel"] = "SPOT"
    elif spec.provisioning_model == "reserved":
        body["guaranteed"] = {"reserved": True}
    else:
        body["provisioningModel"] = "STANDARD"
    if spec.valid_until is not None:
        body["queueingPolicy"] = {"validUntilDuration": _duration_json(spec.valid_until)}
    return body


# --------------------------------------------------------------------------------------------------
# Pure mapping from API JSON
# --------------------------------------------------------------------------------------------------


def parse_time(value: Any) -> datetime | None:
    """Parse a Google RFC 3339 timestamp ("2026-01-01T00:00:00.123456789Z") into an aware UTC datetime.

    Returns None for a missing or malformed value.
    """
    if not isinstance(value, str):
        return None
    match = _TIME.match(value.strip())
    if not match:
        return None
    base, fraction, offset = match.groups()
    text = (
        base
        + (f".{fraction[:6].ljust(6, '0')}" if fraction else "")
        + ("+00:00" if offset == "Z" else offset)
    )
    try:
        return datetime.fromisoformat(text).astimezone(UTC)
    except ValueError:
        return None


def parse_duration(value: Any) -> timedelta | None:
    """Parse a google.protobuf.Duration JSON string ("14400s", "1.5s"); None if missing or malformed."""
    if not isinstance(value, str):
        return None
    match = _DURATION.match(value.strip())
    return timedelta(seconds=float(match.group(1))) if match else None


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


def _zone_of(name: str) -> str:
    parts = name.split("/")
    return parts[3] if len(parts) > 3 and parts[2] == "locations" else ""


def _enum(value: Any) -> str | None:
    return None if value is None or str(value) in _UNSPECIFIED else str(value)


def node_from_api(raw: Mapping[str, Any]) -> NodeInfo:
    """Map a Node JSON dict (v2alpha1 or v2, camelCase, enum names) to a NodeInfo."""
    name = str(raw.get("name", ""))
    endpoints = [e for e in raw.get("networkEndpoints") or [] if isinstance(e, Mapping)]
    external = [str((e.get("accessConfig") or {}).get("externalIp") or "") for e in endpoints]
    return NodeInfo(
        name=name.rsplit("/", 1)[-1],
        zone=_zone_of(name),
        state=str(raw.get("state") or "STATE_UNSPECIFIED"),
        health=_enum(raw.get("health")),
        health_description=str(raw.get("healthDescription") or ""),
        accelerator_type=str(raw.get("acceleratorType") or ""),
        runtime_version=str(raw.get("runtimeVersion") or ""),
        internal_ips=tuple(str(e["ipAddress"]) for e in endpoints if e.get("ipAddress")),
        external_ips=tuple(ip for ip in external if ip),
        create_time=parse_time(raw.get("createTime")),
        termination_time=parse_time((raw.get("schedulingConfig") or {}).get("terminationTimestamp")),
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
    created, max_run = parse_time(raw.get("createTime")), parse_duration(run.get("maxRunDuration"))
    if (raw.get("state") or {}).get("state") == "ACTIVE" and created is not None and max_run is not None:
        return created + max_run
    return None


def valid_until_of(raw: Mapping[str, Any]) -> datetime | None:
    """A QR's queueing deadline from `queueingPolicy` (validUntilTime, validUntilDuration, validInterval)."""
    policy = raw.get("queueingPolicy") or {}
    until = parse_time(policy.get("validUntilTime"))
    if until is not None:
        return until
    created, within = parse_time(raw.get("createTime")), parse_duration(policy.get("validUntilDuration"))
    if created is not None and within is not None:
        return created + within
    return parse_time((policy.get("validInterval") or {}).get("endTime"))


def _belongs_to(node: Mapping[str, Any], qr_id: str, node_ids: Iterable[str]) -> bool:
    node_id = str(node.get("name", "")).rsplit("/", 1)[-1]
    owner = str(node.get("queuedResource") or "").rsplit("/", 1)[-1]
    return node_id in node_ids or (bool(owner) and owner == qr_id)


def queued_resource_from_api(
    raw: Mapping[str, Any], node_dicts: Sequence[Mapping[str, Any]] = ()
) -> QueuedResourceInfo:
    """Map a v2alpha1 QueuedResource JSON dict to a QueuedResourceInfo.

    Args:
        raw: the QueuedResource dict as the API returned it.
        node_dicts: Node dicts of the same zone (e.g. a whole nodes.list); those belonging to this QR
            (by `tpu.nodeSpec[].nodeId` or `Node.queuedResource`) become `nodes`.
    """
    name = str(raw.get("name", ""))
    qr_id = name.rsplit("/", 1)[-1]
    specs = [s for s in (raw.get("tpu") or {}).get("nodeSpec") or [] if isinstance(s, Mapping)]
    spec_ids = [str(s["nodeId"]) for s in specs if s.get("nodeId")]
    nodes = tuple(
        sorted(
            (node_from_api(n) for n in node_dicts if _belongs_to(n, qr_id, spec_ids)), key=lambda n: n.name
        )
    )
    node_ids = tuple(spec_ids + [n.name for n in nodes if n.name not in spec_ids])
    first = (specs[0].get("node") or {}) if specs else {}
    state = raw.get("state") or {}
    error = ((state.get("failedData") or {}).get("error") or {}).get("message")
    return QueuedResourceInfo(
        name=qr_id,
        zone=_zone_of(name),
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
        max_run_duration=parse_duration((raw.get("runDuration") or {}).get("maxRunDuration")),
        error=" ".join(str(error).split()) if error else None,
        labels={str(k): str(v) for k, v in (first.get("labels") or {}).items()},
    )


# --------------------------------------------------------------------------------------------------
# Error mapping
# --------------------------------------------------------------------------------------------------


def _one_line(text: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _http_phrase(status: int) -> str:
    try:
        return http.HTTPStatus(status).phrase
    except ValueError:
        return "Error"


def _hint_for_status(status: int, api: str = "the TPU API") -> tuple[type[OpsError], str]:
    if status == 404:
        return NotFound, "check the name and the zone" if api == "the TPU API" else "check the name"
    if status in (401, 403):
        roles = "its TPU roles" if api == "the TPU API" else "its roles"
        return PermissionDenied, f"check the bot's credentials and {roles} on the project"
    if status == 429:
        return QuotaExceeded, "API rate limit or quota hit: retry after a minute"
    if status == 504:
        return BackendTimeout, f"{api} timed out: retry in a minute"
    if status >= 500:
        return BackendUnavailable, f"{api} is having trouble: retry in a minute"
    if status == 400:
        return BadInput, "check the zone and the request"
    return OpsError, "see the message"


def _catalogue_fix(message: str) -> str:
    """The fix of the fault-catalogue family in an API error (e.g. a node that is gone under its queued
    resource: recreate it, not "check the zone"), or ""."""
    known = faults.explain(message)
    return known[2] if known else ""


def error_status(exc: BaseException) -> tuple[int | None, str]:
    """(HTTP status, the server's error message in full) of a Google client exception; (None, "") if none."""
    if isinstance(exc, core_exceptions.RetryError) and exc.cause is not None:
        exc = exc.cause
    if isinstance(exc, HttpError):
        return int(exc.status_code), str(exc.reason or "")
    if isinstance(exc, core_exceptions.GoogleAPICallError) and isinstance(exc.code, int):
        # REST errors from google-api-core read "GET http://...: <message>"; keep only the message.
        return exc.code, _REQUEST_PREFIX.sub("", str(exc.message or ""))
    return None, ""


def map_error(exc: BaseException, what: str, *, backend: str = "tpu", api: str = "the TPU API") -> OpsError:
    """Translate a Google client exception into an OpsError with a one-line message and a hint.

    Args:
        exc: what the library raised (HttpError, GoogleAPICallError, RetryError, requests/httplib2/socket
            errors, google-auth errors, ...).
        what: the API and call, e.g. "TPU API v2alpha1 queuedResources.list us-east5-a".
        backend: the `backend` of the returned error ("tpu", "quotas", "secrets", ...).
        api: how hints name the API ("the TPU API").

    Returns:
        NotFound (404), PermissionDenied (401/403, credential errors), QuotaExceeded (429),
        BackendUnavailable (5xx, connection refused, DNS), BackendTimeout (timeouts, 504), BadInput (400),
        or a plain OpsError for anything else (409 included: `create_error` makes it AlreadyExists).
        Messages are one line of at most 300 characters.
    """
    if isinstance(exc, OpsError):
        return exc
    if isinstance(exc, core_exceptions.RetryError) and exc.cause is not None:
        exc = exc.cause
    status, detail = error_status(exc)
    if status is not None:
        cls, hint = _hint_for_status(status, api)
        message = f"{what}: HTTP {status} {_http_phrase(status)}" + (f": {detail}" if detail else "")
        if status == 404:  # a node gone under its queued resource is not a wrong zone
            hint = _catalogue_fix(message) or hint
        return cls(_one_line(message), hint, backend=backend)
    if isinstance(exc, requests.exceptions.Timeout | TimeoutError | core_exceptions.DeadlineExceeded):
        return BackendTimeout(_one_line(f"{what}: no answer in time"), "retry in a minute", backend=backend)
    if isinstance(exc, auth_exceptions.RefreshError | auth_exceptions.DefaultCredentialsError):
        return PermissionDenied(
            _one_line(f"{what}: credentials rejected: {exc}"),
            "refresh the bot's Google credentials",
            backend=backend,
        )
    if isinstance(
        exc,
        requests.exceptions.ConnectionError
        | ConnectionError
        | OSError
        | httplib2.HttpLib2Error
        | auth_exceptions.TransportError,
    ):
        return BackendUnavailable(
            _one_line(f"{what}: cannot connect ({type(exc).__name__}: {exc})"),
            "check the network and the API endpoint, then retry",
            backend=backend,
        )
    return BackendUnavailable(
        _one_line(f"{what}: unexpected {type(exc).__name__}: {exc}"),
        "retry; report it if it persists",
        backend=backend,
    )


# Longer than MAX_MESSAGE_CHARS: create and operation errors quote Google's text in full (the accelerator
# error alone is ~260 characters) because the capacity search and the user both need all of it.
MAX_CHANGE_MESSAGE_CHARS = 600


def _zone_error(message: str, reason: str) -> UnsupportedInZone:
    return UnsupportedInZone(
        _one_line(message, MAX_CHANGE_MESSAGE_CHARS),
        f"{reason}: permanent for this zone, type and provisioning model; try another zone",
        backend="tpu",
    )


def create_error(exc: BaseException, what: str) -> OpsError:
    """Map a failed change (create, delete, reset, start, stop): like `map_error`, but HTTP 409 becomes
    AlreadyExists, 400/404 texts that say the zone does not offer the accelerator type, the provisioning
    model or the zone itself become UnsupportedInZone (see `ops.capacity.classify`), and Google's message
    is kept in full (up to 600 characters).
    """
    from ops import capacity  # ops.capacity imports this module

    error = map_error(exc, what)
    status, detail = error_status(exc)
    if status is None:
        return error
    message = f"{what}: HTTP {status} {_http_phrase(status)}" + (f": {detail}" if detail else "")
    verdict = capacity.classify(f"HTTP {status}: {detail}")
    if status in (400, 404) and verdict.remember:
        return _zone_error(message, verdict.reason)
    line = _one_line(message, MAX_CHANGE_MESSAGE_CHARS)
    if status == 409:
        return AlreadyExists(line, "pick another name, or delete the existing one first", backend="tpu")
    if status == 429 and ZONE_QUOTA_EXHAUSTED.search(detail):
        return QuotaExceeded(line, ZONE_QUOTA_HINT, backend="tpu")
    return type(error)(line, error.hint, backend="tpu")


# A create over the zone's TPU quota is refused at once: "Quota '<quota id>' exhausted. Limit N in zone Z."
ZONE_QUOTA_EXHAUSTED = re.compile(r"Quota '[^']+' exhausted\. Limit \d+ in zone")
ZONE_QUOTA_HINT = (
    "the zone's TPU quota is used up: delete FAILED or SUSPENDED queued resources (they hold quota), "
    "ask for more in the Cloud console (IAM & Admin > Quotas), or try another zone"
)


def operation_error(error: Mapping[str, Any], what: str) -> OpsError:
    """The typed error of a failed long-running operation (`Operation.error`, a google.rpc.Status).

    Args:
        error: the operation's `error` dict: {"code": 8, "message": "..."}.
        what: the operation, e.g. "TPU operation create projects/p/locations/z/queuedResources/q".

    Returns:
        UnsupportedInZone when the text says the zone does not offer the accelerator type, provisioning
        model or zone (e.g. code 3 "FLEX_START provisioning model is not supported ..."); for code 8
        (RESOURCE_EXHAUSTED) QuotaExceeded if the text names a quota, else CapacityUnavailable (stockout);
        else by code: 1 Cancelled, 3/9/11 BadInput, 4 BackendTimeout, 5 NotFound, 6 AlreadyExists, 7/16
        PermissionDenied, 2/10/13/14/15 BackendUnavailable, others OpsError. Codes: google.rpc.Code.
    """
    from ops import capacity  # ops.capacity imports this module

    try:
        code = int(error.get("code", 2))
    except (TypeError, ValueError):
        code = 2
    text = str(error.get("message") or "")
    message = f"{what} failed: {RPC_CODES.get(code, f'code {code}')} (code {code})" + (
        f": {text}" if text else ""
    )
    verdict = capacity.classify(f"code {code}: {text}")
    if verdict.remember:
        return _zone_error(message, verdict.reason)
    line = _one_line(message, MAX_CHANGE_MESSAGE_CHARS)
    if code == 8:
        if verdict.reason == "quota exceeded":
            return QuotaExceeded(
                line, "TPU quota exhausted: free some, ask for more, or try another zone", backend="tpu"
            )
        return CapacityUnavailable(
            line, "no capacity now: try another zone, or wait and retry", backend="tpu"
        )
    by_code: dict[int, tuple[type[OpsError], str]] = {
        1: (Cancelled, "the operation was cancelled"),
        3: (BadInput, "check the request"),
        9: (BadInput, "the resource is not in a state that allows this"),
        11: (BadInput, "check the request"),
        4: (BackendTimeout, "the operation timed out: retry"),
        5: (NotFound, "check the name and the zone"),
        6: (AlreadyExists, "pick another name, or delete the existing one first"),
        7: (PermissionDenied, "check the bot's credentials and its TPU roles on the project"),
        16: (PermissionDenied, "check the bot's credentials"),
    }
    cls, hint = by_code.get(code, (BackendUnavailable, "the TPU API had trouble: retry in a minute"))
    if code not in by_code and code not in (2, 10, 13, 14, 15):
        cls, hint = OpsError, "see the message"
    return cls(line, hint, backend="tpu")


# --------------------------------------------------------------------------------------------------
# TpuOps
# --------------------------------------------------------------------------------------------------

_RETRYABLE = (
    core_exceptions.TooManyRequests,
    core_exceptions.InternalServerError,
    core_exceptions.BadGateway,
    core_exceptions.ServiceUnavailable,
)


class TpuOps:
    """Read queued resources and nodes of one project.

    Args:
        project: project id, e.g. "demo-project".
        api_endpoint: base URL of the API, e.g. the simulator's "http://127.0.0.1:43121"; None for Google.
        credentials: google-auth credentials; None: anonymous with `api_endpoint`, else Application
            Default Credentials (see `ops.google`).
        max_workers: zones fetched concurrently by `list_queued_resources`.
        timeout_s: per-HTTP-request timeout, seconds.
        num_retries: retries of HTTP 429/5xx (and connection errors, for v2alpha1) done by the client
            libraries with exponential backoff; 0 disables them.

    Thread-safe: each thread gets its own v2alpha1 client. Call `close()` to stop the worker threads.
    """

    def __init__(
        self,
        project: str,
        *,
        api_endpoint: str | None = None,
        credentials: Credentials | None = None,
        max_workers: int = 8,
        timeout_s: float = 30.0,
        num_retries: int = 2,
    ) -> None:
        if not project or not _PROJECT.match(project):
            raise BadInput(f"bad project id {project!r}", "use the project id, e.g. my-project-123")
        self.project = project
        self._endpoint = api_endpoint
        self._credentials = credentials
        self._max_workers = max(1, max_workers)
        self._timeout_s = timeout_s
        self._num_retries = max(0, num_retries)
        self._lock = threading.Lock()
        self._local = threading.local()
        self._pool: ThreadPoolExecutor | None = None
        self._gapic: tpu_v2.TpuClient | None = None
        self._gapic_retry = (
            core_retry.Retry(
                predicate=core_retry.if_exception_type(*_RETRYABLE),
                initial=0.25,
                multiplier=2.0,
                maximum=2.0,
                timeout=0.5 * 2**self._num_retries,
            )
            if self._num_retries
            else None
        )

    def close(self) -> None:
        """Stop the zone-listing worker threads and close the HTTP connections of the API clients
        (idempotent; a later call starts and opens them again)."""
        with self._lock:
            pool, self._pool = self._pool, None
            gapic, self._gapic = self._gapic, None
        if pool is not None:
            pool.shutdown(wait=False)
        if gapic is not None:
            gapic.transport.close()
        google.close_connections(self._endpoint)

    # ---- plumbing
    def _parent(self, zone: str) -> str:
        return f"projects/{self.project}/locations/{zone}"

    def _alpha(self) -> Any:
        return google.tpu_v2alpha1(self._endpoint, self._credentials, timeout_s=self._timeout_s)

    def _collection(self, name: str) -> Any:
        """`projects().locations()` of v2alpha1 (name "") or its `name` collection, built once per thread:
        googleapiclient builds every Resource from the discovery document on each call (about 5 ms of
        CPU, under the interpreter lock that the acks need too)."""
        cache: dict[str, Any] = self._local.__dict__.setdefault("collections", {})
        collection = cache.get(name)
        if collection is None:
            locations = self._alpha().projects().locations()
            collection = cache[name] = getattr(locations, name)() if name else locations
        return collection

    def warm(self) -> None:
        """Start every zone-listing thread and build its client (`_collection`) now, not during a burst."""
        pool = self._executor()
        barrier = threading.Barrier(self._max_workers + 1)

        def build() -> None:
            self.warm_thread()
            barrier.wait(60)

        futures = [pool.submit(build) for _ in range(self._max_workers)]
        barrier.wait(60)
        for future in futures:
            future.result()
        self.warm_thread()

    def warm_thread(self) -> None:
        """Build the calling thread's clients (for a thread pool that will call this object)."""
        for name in ("", "queuedResources", "nodes", "operations"):
            self._collection(name)

    def _execute(self, request: Any, what: str) -> dict[str, Any]:
        try:
            result: dict[str, Any] = request.execute(num_retries=self._num_retries)
            return result
        except Exception as exc:
            raise map_error(exc, what) from exc

    def _list_all(self, collection: Any, request: Any, key: str, what: str) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        while request is not None:
            response = self._execute(request, what)
            items.extend(response.get(key) or [])
            request = collection.list_next(request, response)
        return items

    def _executor(self) -> ThreadPoolExecutor:
        with self._lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(self._max_workers, thread_name_prefix="tpu-ops")
            return self._pool

    def _v2(self) -> tpu_v2.TpuClient:
        with self._lock:
            if self._gapic is None:
                self._gapic = google.tpu_v2(self._endpoint, self._credentials)
            return self._gapic

    @staticmethod
    def _check_zone(zone: str) -> None:
        if not _ZONE.match(zone or ""):
            raise BadInput(f"bad zone {zone!r}", "use a zone such as us-east5-a")

    def _list_qr_dicts(self, zone: str) -> list[dict[str, Any]]:
        qrs = self._collection("queuedResources")
        what = f"TPU API v2alpha1 queuedResources.list {zone}"
        return self._list_all(qrs, qrs.list(parent=self._parent(zone)), "queuedResources", what)

    def _list_node_dicts(self, zone: str) -> list[dict[str, Any]]:
        nodes = self._collection("nodes")
        what = f"TPU API v2alpha1 nodes.list {zone}"
        return self._list_all(nodes, nodes.list(parent=self._parent(zone)), "nodes", what)

    def _zone_qrs(self, zone: str) -> list[dict[str, Any]]:
        self._check_zone(zone)
        return self._list_qr_dicts(zone)

    def _zone_nodes(self, zone: str) -> list[dict[str, Any]]:
        self._check_zone(zone)
        return self._list_node_dicts(zone)

    # ---- public API
    def list_zones(self) -> list[str]:
        """The project's TPU locations (`locations.list`, v2alpha1), for --all-zones.

        Returns:
            Sorted location ids (`Location.locationId`), e.g. ["asia-northeast1-b", "us-east5-a"].

        Raises:
            PermissionDenied, QuotaExceeded, BackendUnavailable, BackendTimeout, NotFound: see `map_error`.
        """
        locations = self._collection("")
        request = locations.list(name=f"projects/{self.project}")
        items = self._list_all(locations, request, "locations", "TPU API v2alpha1 locations.list")
        return sorted({str(loc.get("locationId") or _zone_of(str(loc.get("name", "")))) for loc in items})

    def list_queued_resources(self, zones: Sequence[str], *, with_nodes: bool = True) -> ZoneListing:
        """List the queued resources of several zones, fetched concurrently (`queuedResources.list`).

        Args:
            zones: zone names; duplicates are ignored.
            with_nodes: also list each zone's nodes (`nodes.list`, one call per zone, sent together with
                the queued-resource call) and attach them to their QRs.

        Returns:
            A ZoneListing: QRs sorted by (zone, name), and zone -> OpsError for zones that failed (after the
            library retries). Never raises for a zone failure; a malformed zone name is reported as BadInput
            in `errors`.
        """
        unique = list(dict.fromkeys(zones))
        pool = self._executor()
        # Every zone's queuedResources.list and nodes.list go out at once (no call waits on another), so
        # the listing takes about as long as the slowest single call.
        qr_calls = {zone: pool.submit(self._zone_qrs, zone) for zone in unique}
        node_calls = {zone: pool.submit(self._zone_nodes, zone) for zone in unique} if with_nodes else {}
        resources: list[QueuedResourceInfo] = []
        errors: dict[str, OpsError] = {}
        for zone in unique:
            try:
                raw_qrs = qr_calls[zone].result()
            except OpsError as exc:
                errors[zone] = exc
                continue
            node_dicts: list[dict[str, Any]] = []
            if zone in node_calls and raw_qrs:
                try:
                    node_dicts = node_calls[zone].result()
                except OpsError as exc:
                    errors[zone] = exc
            resources.extend(queued_resource_from_api(raw, node_dicts) for raw in raw_qrs)
        resources.sort(key=lambda qr: (qr.zone, qr.name))
        return ZoneListing(tuple(resources), errors)

    def get_queued_resource(self, name: str, zones: Sequence[str]) -> QueuedResourceInfo:
        """Describe one queued resource, with its nodes (`queuedResources.get`, then `nodes.list`).

        Args:
            name: QR id ("gemma4-qr") or full name ("projects/P/locations/Z/queuedResources/ID", which
                pins the zone).
            zones: zones to search in order; the first zone that has it wins.

        Returns:
            The QueuedResourceInfo, nodes included.

        Raises:
            BadInput: malformed name or zone.
            NotFound: no searched zone has it (the message names the zones searched).
            PermissionDenied, QuotaExceeded, BackendUnavailable, BackendTimeout: a zone failed otherwise
                and no other zone had the QR (the first such failure is raised).
        """
        match = _QR_PATH.match(name or "")
        if match:
            qr_id, search = match["id"], [match["zone"]]
        else:
            qr_id, search = name, list(dict.fromkeys(zones))
        if not _ID.match(qr_id or ""):
            raise BadInput(f"bad queued resource name {name!r}", "use the id shown by list, e.g. gemma4-qr")
        if not search:
            raise BadInput("no zone to search", "give --zone or configure default zones")
        failures: list[OpsError] = []
        for zone in search:
            self._check_zone(zone)
            qrs = self._collection("queuedResources")
            request = qrs.get(name=f"{self._parent(zone)}/queuedResources/{qr_id}")
            try:
                raw = self._execute(request, f"TPU API v2alpha1 queuedResources.get {zone}/{qr_id}")
            except NotFound:
                continue
            except OpsError as exc:
                failures.append(exc)
                continue
            return queued_resource_from_api(raw, self._list_node_dicts(zone))
        if failures:
            raise failures[0]
        raise NotFound(
            f"TPU queued resource {qr_id!r} not found in {', '.join(search)}",
            "check the name with /tpu list, or search every zone with --all-zones",
            backend="tpu",
        )

    def get_node(self, zone: str, node_id: str) -> NodeInfo:
        """Describe one TPU VM through the GAPIC `tpu_v2` REST client (`nodes.get`, API v2).

        Args:
            zone: e.g. "us-east5-a".
            node_id: node id, e.g. "gemma4-qr-node".

        Returns:
            NodeInfo; `termination_time` is None because API v2 has no `terminationTimestamp`.

        Raises:
            BadInput: malformed zone or node id.
            NotFound: no such node (e.g. the QR is not ACTIVE yet).
            PermissionDenied, QuotaExceeded, BackendUnavailable, BackendTimeout: see `map_error`.
        """
        self._check_zone(zone)
        if not _ID.match(node_id or ""):
            raise BadInput(f"bad node id {node_id!r}", "use the node id shown by describe")
        what = f"TPU API v2 nodes.get {zone}/{node_id}"
        client = self._v2()
        try:
            node = client.get_node(
                name=f"{self._parent(zone)}/nodes/{node_id}", retry=self._gapic_retry, timeout=self._timeout_s
            )
        except Exception as exc:
            raise map_error(exc, what) from exc
        return node_from_api(json.loads(tpu_v2.Node.to_json(node, use_integers_for_enums=False)))

    # ---- changes (long-running operations)
    def _check_id(self, value: str, label: str) -> None:
        if not _RESOURCE_ID.match(value or ""):
            raise BadInput(f"bad {label} {value!r}", "use the id shown by list, e.g. gemma4-qr")

    def create_queued_resource(self, spec: CreateSpec) -> str:
        """Request a queued resource (`queuedResources.create`, v2alpha1; body: `queued_resource_body`).

        Args:
            spec: what to request; see CreateSpec.

        Returns:
            The create operation's name, "projects/P/locations/Z/operations/ID", for `wait_operation`.

        Raises:
            BadInput: the spec is malformed (nothing sent), or the API rejected the request (HTTP 400).
            AlreadyExists: a queued resource with that name exists in the zone (HTTP 409).
            UnsupportedInZone: the zone does not offer the accelerator type (HTTP 400 "could not be found in
                the zonal accelerator configurations"), or the zone is unknown (HTTP 404 location).
            PermissionDenied, QuotaExceeded, BackendUnavailable, BackendTimeout: see `map_error`. A timeout
                may leave the request created: check with `get_queued_resource`.
        """
        check_create_spec(spec)
        qrs = self._collection("queuedResources")
        request = qrs.create(
            parent=self._parent(spec.zone),
            queuedResourceId=spec.name,
            body=queued_resource_body(spec, self.project),
        )
        what = f"TPU API v2alpha1 queuedResources.create {spec.zone}/{spec.name}"
        try:
            operation: dict[str, Any] = request.execute(num_retries=0)
        except Exception as exc:
            raise create_error(exc, what) from exc
        return str(operation.get("name", ""))

    def wait_operation(
        self,
        op_name: str,
        *,
        timeout_s: float,
        poll_s: float = 2.0,
        cancel: threading.Event | None = None,
    ) -> dict[str, Any]:
        """Poll a long-running operation (`operations.get`, v2alpha1) until it is done.

        Args:
            op_name: "projects/P/locations/Z/operations/ID" as returned by the change calls.
            timeout_s: give up after this many seconds (wall time).
            poll_s: seconds between polls.
            cancel: set it to stop waiting (the operation itself goes on at Google).

        Returns:
            The finished operation's `response` (e.g. the QueuedResource or Node dict with its "@type";
            {"@type": ".../google.protobuf.Empty"} for a delete; {} when it has none).

        Raises:
            BadInput: malformed operation name.
            Cancelled: `cancel` was set.
            BackendTimeout: not done within `timeout_s` (poll failures of HTTP 429/5xx are retried until
                then and named in the message).
            the classified error of a failed operation (see `operation_error`): UnsupportedInZone,
                CapacityUnavailable, QuotaExceeded, BadInput, ...
            NotFound, PermissionDenied: the operation cannot be read.
        """
        match = _OP_PATH.match(op_name or "")
        if not match:
            raise BadInput(f"bad operation name {op_name!r}", "expected projects/P/locations/Z/operations/ID")
        what = f"TPU API v2alpha1 operations.get {match['zone']}/{match['id']}"
        deadline = time.monotonic() + max(0.0, timeout_s)
        last_error: OpsError | None = None
        while True:
            if cancel is not None and cancel.is_set():
                raise Cancelled(
                    f"stopped waiting for TPU operation {match['id']}",
                    "the operation may still finish: check the resource with list",
                    backend="tpu",
                )
            operations = self._collection("operations")
            try:
                operation = self._execute(operations.get(name=op_name), what)
            except (BackendUnavailable, BackendTimeout, QuotaExceeded) as exc:
                last_error, operation = exc, {}
            if operation.get("done"):
                metadata = operation.get("metadata") or {}
                label = f"TPU operation {metadata.get('verb', '')} {metadata.get('target', op_name)}"
                if operation.get("error"):
                    raise operation_error(operation["error"], " ".join(label.split()))
                return dict(operation.get("response") or {})
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                polled = f" (last poll: {last_error.message})" if last_error else ""
                raise BackendTimeout(
                    _one_line(f"TPU operation {match['id']} not done after {timeout_s:g} s{polled}"),
                    "it may still finish: check the resource with list or describe",
                    backend="tpu",
                )
            pause = min(poll_s, remaining)
            if cancel is not None:
                cancel.wait(pause)
            else:
                time.sleep(pause)

    def delete_queued_resource(
        self,
        name: str,
        zone: str,
        *,
        force: bool = False,
        wait: bool = True,
        timeout_s: float = 600.0,
        poll_s: float = 2.0,
    ) -> str:
        """Delete a queued resource (`queuedResources.delete`, v2alpha1, query `force=true` when forced).

        Args:
            name: queued resource id, e.g. "gemma4-qr".
            zone: its zone.
            force: delete its nodes first. Without it the API refuses a QR whose nodes exist unless it is
                ACCEPTED, FAILED or SUSPENDED (DeleteQueuedResourceRequest.force, cloud_tpu.proto).
            wait: poll the operation until done (`timeout_s` seconds, every `poll_s` seconds).

        Returns:
            The delete operation's name.

        Raises:
            BadInput: malformed name or zone, or the API refused (e.g. nodes exist and force is off: HTTP 400
                FAILED_PRECONDITION).
            NotFound: no such queued resource.
            BackendTimeout: with `wait`, the deletion did not finish in time.
            PermissionDenied, QuotaExceeded, BackendUnavailable: see `map_error`.
        """
        self._check_zone(zone)
        self._check_id(name, "queued resource name")
        qrs = self._collection("queuedResources")
        qr_name = f"{self._parent(zone)}/queuedResources/{name}"
        request = qrs.delete(name=qr_name, force=True) if force else qrs.delete(name=qr_name)
        what = f"TPU API v2alpha1 queuedResources.delete {zone}/{name}"
        try:
            operation: dict[str, Any] = request.execute(num_retries=0)
        except Exception as exc:
            error = create_error(exc, what)
            if isinstance(error, BadInput) and not force:
                error.hint = "its nodes still exist: delete with force (deletes the nodes first)"
            raise error from exc
        op_name = str(operation.get("name", ""))
        if wait:
            self.wait_operation(op_name, timeout_s=timeout_s, poll_s=poll_s)
        return op_name

    def reset_queued_resource(self, name: str, zone: str) -> str:
        """Put a FAILED or SUSPENDED queued resource back in the queue (`queuedResources.reset`, v2alpha1).

        Args:
            name: queued resource id; zone: its zone.

        Returns:
            The reset operation's name (its response is the QueuedResource).

        Raises:
            BadInput: malformed name or zone, or the API refused (HTTP 400, e.g. not FAILED/SUSPENDED).
            NotFound, PermissionDenied, QuotaExceeded, BackendUnavailable, BackendTimeout: see `map_error`.
        """
        self._check_zone(zone)
        self._check_id(name, "queued resource name")
        qrs = self._collection("queuedResources")
        request = qrs.reset(name=f"{self._parent(zone)}/queuedResources/{name}", body={})
        try:
            operation: dict[str, Any] = request.execute(num_retries=0)
        except Exception as exc:
            raise create_error(exc, f"TPU API v2alpha1 queuedResources.reset {zone}/{name}") from exc
        return str(operation.get("name", ""))

    def _node_operation(self, verb: str, zone: str, node_id: str) -> str:
        self._check_zone(zone)
        self._check_id(node_id, "node id")
        client = self._v2()
        request = {"name": f"{self._parent(zone)}/nodes/{node_id}"}
        try:
            if verb == "start":
                operation = client.start_node(request=request, timeout=self._timeout_s)
            else:
                operation = client.stop_node(request=request, timeout=self._timeout_s)
        except Exception as exc:
            raise create_error(exc, f"TPU API v2 nodes.{verb} {zone}/{node_id}") from exc
        return str(operation.operation.name)

    def start_node(self, zone: str, node_id: str) -> str:
        """Start a STOPPED TPU VM (`nodes.start` through the GAPIC `tpu_v2` client, request= form).

        Returns:
            The operation's name (its response is the Node).

        Raises:
            BadInput: malformed zone or node id, or the node is not STOPPED (HTTP 400).
            NotFound, PermissionDenied, QuotaExceeded, BackendUnavailable, BackendTimeout: see `map_error`.
        """
        return self._node_operation("start", zone, node_id)

    def stop_node(self, zone: str, node_id: str) -> str:
        """Stop a READY TPU VM (`nodes.stop` through the GAPIC `tpu_v2` client, request= form).

        Returns:
            The operation's name (its response is the Node).

        Raises:
            BadInput: malformed zone or node id, or the node is not READY (HTTP 400).
            NotFound, PermissionDenied, QuotaExceeded, BackendUnavailable, BackendTimeout: see `map_error`.
        """
        return self._node_operation("stop", zone, node_id)

    def list_accelerator_types(self, zone: str) -> list[str]:
        """The accelerator types a zone offers (`acceleratorTypes.list`, v2alpha1, all pages).

        Returns:
            Sorted `AcceleratorType.type` values, e.g. ["v6e-1", "v6e-4", "v6e-8"].

        Raises:
            BadInput: malformed zone. NotFound: unknown zone (HTTP 404).
            PermissionDenied, QuotaExceeded, BackendUnavailable, BackendTimeout: see `map_error`.
        """
        self._check_zone(zone)
        types = self._collection("acceleratorTypes")
        what = f"TPU API v2alpha1 acceleratorTypes.list {zone}"
        items = self._list_all(types, types.list(parent=self._parent(zone)), "acceleratorTypes", what)
        return sorted({str(t.get("type") or str(t.get("name", "")).rsplit("/", 1)[-1]) for t in items})
