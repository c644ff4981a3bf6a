"""Local SIMULATOR of the Google Cloud TPU, Cloud Quotas, Secret Manager and Cloud Logging REST APIs (no
Google project is contacted).

`GcpSimulator` serves, on one 127.0.0.1 port, the subset of `tpu.googleapis.com`,
`cloudquotas.googleapis.com` and `secretmanager.googleapis.com` that the bot uses, in the exact JSON shapes
of the discovery documents google-api-python-client ships (`tpu.v2alpha1.json`, `tpu.v2.json`,
`secretmanager.v1.json`) and of the `cloudquotas_v1` protos, so the REAL clients can be pointed at it by
changing only the endpoint (`ops.google.tpu_v2alpha1(url)`, `ops.google.tpu_v2(url)`,
`ops.google.cloud_quotas(url)`, `ops.google.secret_manager(url)`):

    GET /{v2alpha1|v2}/projects/{p}/locations                      locations.list (the scenario's zones)
    GET /{v}/projects/{p}/locations/{zone}                         locations.get
    GET /{v}/projects/{p}/locations/{zone}/queuedResources[/{id}]  list (pageSize/pageToken) / get
    POST /{v}/.../queuedResources?queuedResourceId={id}            create (LRO)
    DELETE /{v}/.../queuedResources/{id}[?force=true]              delete (LRO)
    POST /{v}/.../queuedResources/{id}:reset                       reset (LRO; FAILED only)
    GET /{v}/projects/{p}/locations/{zone}/nodes[/{id}]            list / get
    POST /{v}/.../nodes/{id}:start | :stop                         start / stop (LRO; response: the Node)
    GET /{v}/projects/{p}/locations/{zone}/acceleratorTypes[/{t}]  list / get
    GET /{v}/projects/{p}/locations/{zone}/operations/{op}         operations.get
    GET /v1/projects/{p}/locations/global/services/{s}/quotaInfos[/{id}]   Cloud Quotas list / get
    POST /v1/projects/{p}/secrets?secretId={s}                     Secret Manager secrets.create
    GET /v1/projects/{p}/secrets/{s}                               secrets.get
    POST /v1/projects/{p}/secrets/{s}:addVersion                   secrets.addVersion
    GET /v1/projects/{p}/secrets/{s}/versions/{v}[:access]         versions.get / versions.access
    POST /v2/entries:list                                           Cloud Logging entries.list (logging.v2)

v2 responses drop what only v2alpha1 defines (provisioningModel, runDuration, bestEffort,
guaranteed.reserved, schedulingConfig.provisioningModel/terminationTimestamp/reservationName). Errors
use the Google envelope `{"error": {"code": 404, "message": "...", "status": "NOT_FOUND"}}`. Request
bodies may encode enums as names (google-api-python-client) or integers (GAPIC REST).

The world comes from a scenario's `google` section (see `sim/scenarios/default.yaml`); times there are
relative to the moment the simulator is built (`created: -90m`, `valid_until: 3h`, `max_run_duration: 4h`).
Besides the keys used in the default scenario, the section accepts:

    page_size: 50                 # default page size of list calls without pageSize
    time_speed: 1                 # simulated seconds per real second (GcpSimulator(speed=) overrides)
    operation_duration: 0s        # simulated time until a create/reset/start/stop operation is done
    delete_duration: 0s           # simulated time a queued resource spends in DELETING (default:
                                  # operation_duration); the delete operation is done when it is gone
    operations:                   # finished (or running) LROs served by operations.get
      - {id: operation-1, zone: us-east5-a, verb: create, queued_resource: gemma4-qr,
         created: -91m, done: true, error: {code: 8, message: "..."}}
    zones.<zone>.accelerator_types: [v6e-8]   # offered types; a create of another type is refused with
                                  # the real INVALID_ARGUMENT text (tpu-create-accelerator-not-in-zone.txt)
    zones.<zone>.flex_start: false            # a FLEX_START create fails its operation with code 3 and the
                                  # real text (tpu-create-flex-start-unsupported.txt); no QR is kept
    zones.<zone>.capacity: available          # default: a request is ACTIVE at once
    zones.<zone>.capacity: none               # stockout: WAITING_FOR_RESOURCES until its valid-until, then
                                  # FAILED (failedData.error code 8, tpu-create-zone-stockout.txt's text)
    zones.<zone>.capacity: {after: 5m, provisioning: 1m}   # WAITING_FOR_RESOURCES, PROVISIONING for the
                                  # last `provisioning` (default min(after, 1m)), ACTIVE `after` the
                                  # request (re)entered the queue, with a READY node and IPs
    zones.<zone>.spot_preempt_after: 30m      # spot nodes of that zone are PREEMPTED this long after ACTIVE
    zones.<zone>.quota: {TPUV6EPerProjectPerZoneForTPUAPI: 64}   # Cloud Quotas values for that zone
    queued_resources[].reservation: my-res        # reservationName (RESERVATION_BOUND)
    queued_resources[].preempt_after: 10m         # spot: node PREEMPTED 10m after the simulator starts (or
                                                  # after it becomes ACTIVE, if later)
    queued_resources[].node.health_description / internal_ip / external_ip (a string or a list)
    queued_resources[].node.enable_external_ips: true
    queued_resources[].node.labels: {managed-by: tpu-chatops, ...}   # node labels, echoed in nodeSpec
    secrets: {hf-token: "value"}  # Secret Manager secrets with one version each
    logs:                         # Cloud Logging entries, GENERATED (see sim/scenarios/default.yaml):
      seed: 1                     #   deterministic per seed
      node_id, zone, workers      #   tpu_worker resource labels (default: the first QR's node and zone)
      log_name: syslog            #   log id of text entries (runtime-monitor JSON noise uses
                                  #   tpu.googleapis.com/runtime_monitor)
      cases_dir: <dir>            #   where case files live (default tests/fixtures/cases of this repo)
      noise: {count: 2000, window: 6h}        # INFO/WARNING lines typical of vLLM on a TPU VM
      cases: [{file: vllm-kv-cache-insufficient.log, count: 12, from: -3h, to: -170m,
               severity: ERROR, payload: text|json, node_id, zone, worker_id, log_name}]
                                  #   each occurrence = every line of a real case file (one entry per line),
                                  #   timestamps/pids/request ids varied; `window: 6h` instead of from/to
      entries: [{at: -5m, severity: ERROR, text: "...", payload: text|json}]
      audit: true                 #   CreateQueuedResource audit entries (protoPayload, audited_resource)

Cloud Logging `entries.list` reads its JSON body: resourceNames (projects/{p} only), filter, orderBy
("timestamp asc" default, or "timestamp desc"; ties by insertId), pageSize (default 50, at most 1000, a
negative one is a 400) and pageToken (opaque, bound to the filter and order). The filter parser
(`parse_log_filter`) handles the Logging query language's restrictions `field OP value` with OP in
= != < <= > >= : =~ !~ (RE2 syntax) on resource.type, resource.labels.X,
severity (by rank), timestamp (RFC 3339), logName, textPayload, jsonPayload.X, protoPayload.X, labels.X,
insertId; AND, OR, NOT, "-", parentheses, implicit AND, and free-text terms (case-insensitive, anywhere in
the entry). An unparseable filter is a 400 ("Unparseable filter: ...", simulator text). Generated entries
are ordinary LogEntry bodies (textPayload, jsonPayload or protoPayload) valid against logging.v2.json.

Lifecycle, computed lazily from the simulated clock on every request (no background thread): a created
(or reset) queued resource is WAITING_FOR_RESOURCES, then follows its zone's `capacity`; scenario QRs that
are WAITING_FOR_RESOURCES follow it from their `created` time. An ACTIVE flex-start QR reaching
(time it became ACTIVE, else createTime) + maxRunDuration goes SUSPENDED with stateInitiator SERVICE and its
node is deleted. A preempted spot node (scenario `preempt_after`, zone `spot_preempt_after`, or
`preempt()`) makes its QR SUSPENDING (stateInitiator SERVICE, node PREEMPTED) and `SUSPEND_DURATION` later
SUSPENDED with the node deleted ("SUSPENDED: the resources have been deleted", cloud.google.com/tpu/docs/
queued-resources; spot TPUs "must be recreated" after preemption, cloud.google.com/tpu/docs/spot). Reset is
accepted only from FAILED: a SUSPENDED one is refused with 400 FAILED_PRECONDITION (its resources are gone;
delete and recreate it). A create that would take a zone over its Cloud Quotas limit is refused at once with
429 RESOURCE_EXHAUSTED "Quota '<id>' exhausted. Limit N in zone Z." (spot and flex-start count against the
preemptible id; every queued resource of the zone holds its chips until deleted, FAILED and SUSPENDED ones
included). A quota's default (`google.quota_defaults: {id: N}`) is served as the QuotaInfo's default
dimension (empty `dimensions`, `applicableLocations` = the zones without their own value), as Cloud Quotas
does (cloud.google.com/docs/quotas/reference/rest/v1/DimensionsInfo). Delete without force of a QR whose
node exists, unless it is ACCEPTED, FAILED or
SUSPENDED, is refused with 400 FAILED_PRECONDITION (DeleteQueuedResourceRequest.force semantics).
Simulator-only texts (not captured from Google): the FAILED_PRECONDITION messages, the request-validation
messages, the Cloud Quotas metric names.

Controls for tests: `GcpSimulator.now()`, `.advance(seconds)`, `.preempt(zone, node_id)`,
`.set_capacity(zone, spec)`, `.inject_fault(...)`, `.add_log_entry(text, severity=, at=, ...)`,
`.log_entries()`, `.requests` and `.request_bodies` (JSON bodies sent to TPU and Logging paths; Secret
Manager bodies are never recorded).

Layout, for whoever extends it (Cloud Logging `POST /v2/entries:list`, ...): the world state is a small
dataclass model (`World`) guarded by `World.lock`; JSON rendering is in the `*_json` functions; HTTP routing
is the `GcpSimulator._routes` table of (method, path regex, handler). Add a route and a handler method; the
handler reads or changes the `World` under its lock and returns a JSON-able dict or raises `ApiError`.
"""

from __future__ import annotations

import base64
import binascii
import json
import random
import re
import threading
import time
import uuid
import zlib
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, quote, unquote, urlsplit

import re2

from ops.secrets import crc32c
from sim.scenario import duration

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a bad pattern is the caller's 400, not a line on stderr

# HTTP status -> google.rpc.Code name, as in Google's error envelope.
STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ALREADY_EXISTS",
    412: "FAILED_PRECONDITION",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "NOT_IMPLEMENTED",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}

_FAULT_MESSAGES = {
    401: "Request had invalid authentication credentials.",
    403: "The caller does not have permission",
    404: "Requested entity was not found.",
    429: "Quota exceeded for quota metric 'Read requests' and limit 'Read requests per minute' "
    "of service 'tpu.googleapis.com'.",
    500: "Internal error encountered.",
    503: "The service is currently unavailable.",
    504: "The request timed out.",
}

API_VERSIONS = ("v2alpha1", "v2")
DEFAULT_PAGE_SIZE = 50
LOG_READS_PER_MINUTE = 60
"""entries.list calls allowed per minute per project: Cloud Logging's default "Read requests per minute"
quota (https://cloud.google.com/logging/quotas#api-limits); `google.logging_reads_per_minute` overrides it."""
PROVISIONING_MODELS = ("STANDARD", "SPOT", "RESERVATION_BOUND", "FLEX_START")
# QR states whose nodes exist (are returned by nodes.list/get).
NODE_VISIBLE_STATES = frozenset({"ACTIVE", "PROVISIONING", "SUSPENDING"})
# QueuedResourceState oneof state_data member for each state (WAITING_FOR_RESOURCES has none).
_STATE_DATA = {
    "CREATING": "creatingData",
    "ACCEPTED": "acceptedData",
    "PROVISIONING": "provisioningData",
    "DELETING": "deletingData",
    "ACTIVE": "activeData",
    "SUSPENDING": "suspendingData",
    "SUSPENDED": "suspendedData",
}
# acceleratorType prefix -> AcceleratorConfig.type enum; topology of common slice sizes.
_ACCEL_FAMILY = {"v2": "V2", "v3": "V3", "v4": "V4", "v5litepod": "V5LITE_POD", "v5p": "V5P", "v6e": "V6E"}
_TOPOLOGY_2D = {1: "1x1", 4: "2x2", 8: "2x4", 16: "4x4", 32: "4x8", 64: "8x8", 128: "8x16", 256: "16x16"}
_TOPOLOGY_3D = {8: "2x2x1", 16: "2x2x2", 32: "2x2x4", 64: "2x4x4", 128: "4x4x4"}


class ApiError(Exception):
    """An HTTP error the simulator answers with, in the Google error envelope."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        status_name: str | None = None,
        details: list[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.status_name = status_name  # e.g. FAILED_PRECONDITION, sent with HTTP 400
        self.details = details  # google.rpc error details, e.g. an ErrorInfo


def error_envelope(
    status: int, message: str, status_name: str | None = None, details: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """The JSON body Google sends with an HTTP error: {"error": {code, message, status[, details]}}."""
    name = status_name or STATUS_NAMES.get(status, "UNKNOWN")
    error: dict[str, Any] = {"code": status, "message": message, "status": name}
    if details:
        error["details"] = details
    return {"error": error}


def rfc3339(value: datetime) -> str:
    """Format a timestamp as Google does: UTC, "Z" suffix, fractional seconds."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def duration_json(value: timedelta) -> str:
    """Format a google.protobuf.Duration as JSON: "14400s"."""
    seconds = value.total_seconds()
    return f"{int(seconds)}s" if seconds == int(seconds) else f"{seconds:.6f}s"


# --------------------------------------------------------------------------------------------------
# World model
# --------------------------------------------------------------------------------------------------

# Real error texts (tests/fixtures/cases/tpu-create-*.txt), with the type, zone or model substituted.
ACCELERATOR_NOT_IN_ZONE = (
    "Cloud TPU received a bad request. The requested accelerator configuration for accelerator type, "
    '"{type}", could not be found in the zonal accelerator configurations for "{zone}".; the accelerator '
    "{type} was not found in zone {zone}"
)
MODEL_NOT_SUPPORTED = (
    '{model} provisioning model is not supported for accelerator type "{type}" in location "{zone}"'
)
STOCKOUT = (
    'There is no more capacity in the zone "{zone}"; you can try in another zone where Cloud TPU Nodes are '
    "offered (see https://cloud.google.com/tpu/docs/regions)"
)
# google.rpc.Code values used in operation errors and failedData.
CODE_INVALID_ARGUMENT = 3
CODE_RESOURCE_EXHAUSTED = 8
MAX_RUN_DURATION_LIMIT = timedelta(days=7)  # flex-start: "up to 7 days" (tpu/docs/request-using-flex-start)
_RESOURCE_ID = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")
_SECRET_ID = re.compile(r"^[A-Za-z0-9_-]{1,255}$")
# Enum integers of request bodies (GAPIC REST sends enums as ints).
_PROVISIONING_MODEL_INTS = {0: "PROVISIONING_MODEL_UNSPECIFIED", 1: "STANDARD", 2: "SPOT"}
_PROVISIONING_MODEL_INTS.update({3: "RESERVATION_BOUND", 4: "FLEX_START"})
_ACCEL_TYPE_INTS = {2: "V2", 4: "V3", 7: "V4", 9: "V5LITE_POD", 10: "V5P", 11: "V6E"}
_WAITING = "WAITING_FOR_RESOURCES"
_PROVISIONING_DEFAULT = timedelta(minutes=1)


def _capacity(value: Any) -> tuple[timedelta | None, timedelta | None]:
    """Parse a zone `capacity` value into (after, provisioning); after None means stockout."""
    if value is None or value == "available":
        return timedelta(0), None
    if value == "none":
        return None, None
    if isinstance(value, dict):
        after = duration(value.get("after", "0s"))
        provisioning = duration(value["provisioning"]) if "provisioning" in value else None
        return after, provisioning
    raise ValueError(f"bad zone capacity {value!r}: use available, none or {{after: 5m}}")


@dataclass
class SimZone:
    """A TPU zone of the simulated project and what it offers (see the module docstring for the keys)."""

    name: str
    accelerator_types: list[str] = field(default_factory=list)
    flex_start: bool = True
    capacity_after: timedelta | None = timedelta(0)  # None: stockout
    provisioning: timedelta | None = None
    spot_preempt_after: timedelta | None = None
    quota: dict[str, int] = field(default_factory=dict)

    @property
    def region(self) -> str:
        return self.name.rsplit("-", 1)[0]

    @classmethod
    def from_scenario(cls, name: str, spec: dict[str, Any]) -> SimZone:
        after, provisioning = _capacity(spec.get("capacity"))
        preempt = spec.get("spot_preempt_after")
        return cls(
            name=name,
            accelerator_types=[str(t) for t in spec.get("accelerator_types", [])],
            flex_start=bool(spec.get("flex_start", True)),
            capacity_after=after,
            provisioning=provisioning,
            spot_preempt_after=duration(preempt) if preempt is not None else None,
            quota={str(k): int(v) for k, v in (spec.get("quota") or {}).items()},
        )


@dataclass
class SimNode:
    """A TPU VM (node) requested by a queued resource; it exists while the QR is ACTIVE/PROVISIONING."""

    node_id: str
    accelerator_type: str
    runtime_version: str
    state: str = "READY"
    health: str | None = None
    health_description: str = ""
    internal_ips: list[str] = field(default_factory=list)
    external_ips: list[str] = field(default_factory=list)
    enable_external_ips: bool = True
    create_time: datetime | None = None
    network: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    metadata: dict[str, str] = field(default_factory=dict)
    service_account: dict[str, Any] | None = None
    pending_state: str | None = None  # STOPPED / READY after a stop / start operation
    pending_at: datetime | None = None
    preempt_at: datetime | None = None


@dataclass
class SimQueuedResource:
    """A queued resource (QR) with one node spec.

    `requested_at` is set for QRs that follow their zone's capacity (created, reset, or WAITING in the
    scenario); `provision_at`/`active_at` are then when they go PROVISIONING/ACTIVE (None: never).
    """

    qr_id: str
    zone: str
    state: str
    state_initiator: str
    provisioning_model: str
    create_time: datetime
    node: SimNode
    max_run_duration: timedelta | None = None
    valid_until: datetime | None = None
    reservation: str | None = None
    error_code: int | None = None
    error_message: str | None = None
    requested_at: datetime | None = None
    provision_at: datetime | None = None
    active_at: datetime | None = None
    active_time: datetime | None = None
    valid_for: timedelta | None = None  # queueingPolicy.validUntilDuration of the request
    delete_at: datetime | None = None
    preempt_after: timedelta | None = None
    suspend_at: datetime | None = None  # SUSPENDING -> SUSPENDED (node deleted) after a preemption

    @property
    def termination_time(self) -> datetime | None:
        """runDuration.terminationTime: (ACTIVE time, else createTime) + maxRunDuration (flex-start only)."""
        if self.max_run_duration is None or self.state not in ("ACTIVE", "SUSPENDING"):
            return None
        return (self.active_time or self.create_time) + self.max_run_duration

    @property
    def node_visible(self) -> bool:
        return self.state in NODE_VISIBLE_STATES


@dataclass
class SimOperation:
    """A long-running operation as returned by operations.get (`done_at`: when a running one finishes)."""

    op_id: str
    zone: str
    verb: str
    target: str  # full resource name
    create_time: datetime
    end_time: datetime | None = None
    done: bool = True
    error_code: int | None = None
    error_message: str | None = None
    response_qr: str | None = None  # QR id whose current JSON is the response
    response_node: str | None = None  # node id whose current JSON is the response (start/stop)
    done_at: datetime | None = None


@dataclass
class SimSecret:
    """A Secret Manager secret and its versions (payload, create time, client gave a CRC32C); version n is
    at index n-1."""

    secret_id: str
    create_time: datetime
    labels: dict[str, str] = field(default_factory=dict)
    versions: list[tuple[bytes, datetime, bool]] = field(default_factory=list)


@dataclass
class World:
    """The simulated Google state. Read and change it only while holding `lock`.

    `now` is the simulated time of the request being served (set by `evolve`).
    """

    project: str
    start: datetime
    zones: dict[str, SimZone] = field(default_factory=dict)
    queued_resources: dict[tuple[str, str], SimQueuedResource] = field(default_factory=dict)
    operations: dict[tuple[str, str], SimOperation] = field(default_factory=dict)
    secrets: dict[str, SimSecret] = field(default_factory=dict)
    logs: list[SimLogEntry] = field(default_factory=list)  # sorted by (timestamp, seq)
    log_seq: int = 0
    page_size: int = DEFAULT_PAGE_SIZE
    operation_duration: timedelta = timedelta(0)
    delete_duration: timedelta = timedelta(0)
    now: datetime = field(default_factory=lambda: datetime.now(UTC))
    op_seq: int = 0
    log_cache: dict[tuple[str, bool], list[SimLogEntry]] = field(default_factory=dict, repr=False)
    quota_defaults: dict[str, int] = field(default_factory=dict)
    log_read_quota: int = LOG_READS_PER_MINUTE
    log_reads: deque[datetime] = field(default_factory=deque, repr=False)  # accepted entries.list calls
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False)

    @classmethod
    def from_scenario(cls, scenario: dict[str, Any], start: datetime) -> World:
        """Build the world from a scenario mapping (see the module docstring for the `google` keys).

        Raises:
            ValueError: a required key is missing or a value is malformed.
        """
        google = scenario.get("google") or {}
        world = cls(project=str(scenario["project"]), start=start, now=start)
        world.page_size = int(google.get("page_size", DEFAULT_PAGE_SIZE))
        world.operation_duration = duration(google.get("operation_duration", "0s"))
        world.delete_duration = duration(
            google.get("delete_duration", world.operation_duration.total_seconds())
        )
        for name, spec in (google.get("zones") or {}).items():
            world.zones[name] = SimZone.from_scenario(name, spec or {})
        world.quota_defaults = {str(k): int(v) for k, v in (google.get("quota_defaults") or {}).items()}
        for spec in google.get("queued_resources") or []:
            qr = _qr_from_scenario(spec, start)
            if qr.zone not in world.zones:
                world.zones[qr.zone] = SimZone(qr.zone, [qr.node.accelerator_type])
            if qr.state == _WAITING:
                world.schedule(qr, qr.create_time)
            if qr.preempt_after is not None and qr.state == "ACTIVE":
                qr.node.preempt_at = start + qr.preempt_after
            world.queued_resources[(qr.zone, qr.qr_id)] = qr
        for spec in google.get("operations") or []:
            op = _op_from_scenario(spec, world, start)
            world.operations[(op.zone, op.op_id)] = op
        for secret_id, value in (google.get("secrets") or {}).items():
            world.secrets[str(secret_id)] = SimSecret(
                str(secret_id), start, versions=[(str(value).encode(), start, False)]
            )
        logs = google.get("logs")
        if logs:
            first = next(iter(world.queued_resources.values()), None)
            bodies = generate_logs(
                logs,
                project=world.project,
                start=start,
                node_id=first.node.node_id if first else "gemma4-qr-node",
                zone=first.zone if first else "us-east5-a",
            )
            if logs.get("audit", True):
                bodies += audit_log_entries(world)
            world.add_logs(bodies)
            if logs.get("stream"):
                world.logs += stream_log_entries(
                    logs["stream"],
                    project=world.project,
                    start=start,
                    node_id=first.node.node_id if first else "gemma4-qr-node",
                    zone=first.zone if first else "us-east5-a",
                    first_seq=world.log_seq + 1,
                )
                world.log_seq = world.logs[-1].seq if world.logs else world.log_seq
                world.logs.sort(key=_log_key)
        world.log_read_quota = int(google.get("logging_reads_per_minute", LOG_READS_PER_MINUTE))
        return world

    def add_logs(self, bodies: list[dict[str, Any]]) -> None:
        """Store LogEntry JSON bodies (kept sorted by timestamp, then insertion order)."""
        for body in bodies:
            self.log_seq += 1
            self.logs.append(stored_log_entry(body, self.log_seq))
        self.logs.sort(key=_log_key)
        self.log_cache.clear()

    def parent(self, zone: str) -> str:
        return f"projects/{self.project}/locations/{zone}"

    def check(self, project: str, zone: str | None = None) -> None:
        """Raise the error Google gives for another project (403) or an unknown zone (404)."""
        if project != self.project:
            raise ApiError(403, f"Permission denied on resource project {project}.")
        if zone is not None and zone not in self.zones:
            raise ApiError(404, f"Location projects/{project}/locations/{zone} is not found.")

    def qrs_in(self, zone: str) -> list[SimQueuedResource]:
        return sorted((qr for (z, _), qr in self.queued_resources.items() if z == zone), key=_qr_key)

    def qr(self, zone: str, qr_id: str) -> SimQueuedResource:
        try:
            return self.queued_resources[(zone, qr_id)]
        except KeyError:
            raise ApiError(
                404, f'Resource "{self.parent(zone)}/queuedResources/{qr_id}" was not found'
            ) from None

    def nodes_in(self, zone: str) -> list[SimQueuedResource]:
        """The QRs of `zone` whose node currently exists, sorted by node id."""
        return sorted((qr for qr in self.qrs_in(zone) if qr.node_visible), key=lambda q: q.node.node_id)

    def node_owner(self, zone: str, node_id: str) -> SimQueuedResource:
        for qr in self.nodes_in(zone):
            if qr.node.node_id == node_id:
                return qr
        raise ApiError(404, f'Resource "{self.parent(zone)}/nodes/{node_id}" was not found')

    def operation(self, zone: str, op_id: str) -> SimOperation:
        try:
            return self.operations[(zone, op_id)]
        except KeyError:
            raise ApiError(404, f'Resource "{self.parent(zone)}/operations/{op_id}" was not found') from None

    # ---- lifecycle
    def schedule(self, qr: SimQueuedResource, at: datetime) -> None:
        """(Re)queue `qr` at `at`: its PROVISIONING and ACTIVE times follow its zone's capacity."""
        zone = self.zones[qr.zone]
        qr.requested_at = at
        if zone.capacity_after is None:
            qr.provision_at = qr.active_at = None
            return
        provisioning = zone.provisioning
        if provisioning is None:
            provisioning = min(zone.capacity_after, _PROVISIONING_DEFAULT)
        qr.active_at = at + zone.capacity_after
        qr.provision_at = qr.active_at - min(provisioning, zone.capacity_after)

    def new_operation(self, zone: str, verb: str, target: str, *, done_at: datetime) -> SimOperation:
        """Register a running operation finishing at `done_at` (ids as Google's: operation-<ms>-<seq>)."""
        self.op_seq += 1
        op_id = f"operation-{int(self.now.timestamp() * 1000)}-{self.op_seq:06x}"
        op = SimOperation(op_id, zone, verb, target, self.now, done=False, done_at=done_at)
        self.operations[(zone, op_id)] = op
        return op

    def evolve(self, now: datetime) -> None:
        """Apply every state transition due up to `now` (simulated), then remember `now`."""
        self.now = max(self.now, now)
        for key, qr in list(self.queued_resources.items()):
            if not self._evolve_qr(qr, self.now):
                del self.queued_resources[key]
        for op in self.operations.values():
            if not op.done and op.done_at is not None and op.done_at <= self.now:
                op.done, op.end_time = True, op.done_at

    def _evolve_qr(self, qr: SimQueuedResource, now: datetime) -> bool:
        """Advance one QR; False when it is gone (deleted)."""
        node, zone = qr.node, self.zones[qr.zone]
        if qr.state == "DELETING":
            return qr.delete_at is None or qr.delete_at > now
        if qr.state == _WAITING and qr.requested_at is not None:
            start, deadline = qr.provision_at, qr.valid_until
            if deadline is not None and deadline <= now and (start is None or deadline <= start):
                qr.state, qr.state_initiator = "FAILED", "SERVICE"
                qr.error_code, qr.error_message = CODE_RESOURCE_EXHAUSTED, STOCKOUT.format(zone=qr.zone)
                return True
            if start is not None and start <= now:
                qr.state = "PROVISIONING"
                node.state, node.health, node.create_time = "CREATING", None, start
        if qr.state == "PROVISIONING" and qr.active_at is not None and qr.active_at <= now:
            qr.state, qr.active_time = "ACTIVE", qr.active_at
            node.state, node.health = "READY", "HEALTHY"
            if not node.internal_ips:
                _assign_ips(qr)
            preempt = qr.preempt_after if qr.preempt_after is not None else zone.spot_preempt_after
            if qr.provisioning_model == "SPOT" and preempt is not None:
                node.preempt_at = qr.active_at + preempt
        if qr.state == "ACTIVE":
            if node.pending_state and node.pending_at is not None and node.pending_at <= now:
                node.state = node.pending_state
                node.health = "HEALTHY" if node.state == "READY" else None
                node.pending_state = node.pending_at = None
            if node.preempt_at is not None and node.preempt_at <= now:
                preempt_now(qr, node.preempt_at)
            end = qr.termination_time
            if end is not None and end <= now:
                qr.state, qr.state_initiator = "SUSPENDED", "SERVICE"
                node.state, node.health = "DELETING", None
        if qr.state == "SUSPENDING" and qr.suspend_at is not None and qr.suspend_at <= now:
            qr.state, qr.suspend_at = "SUSPENDED", None
            node.state, node.health = "DELETING", None
        return True

    def quota_limit(self, zone: str, quota_id: str) -> int | None:
        """The zone's limit of a quota: its own value, else the quota's default, else None (unlimited)."""
        own = self.zones[zone].quota.get(quota_id) if zone in self.zones else None
        return own if own is not None else self.quota_defaults.get(quota_id)

    def check_quota(self, zone: str, qr: SimQueuedResource) -> None:
        """Refuse a create that would take the zone over its quota (see the module docstring).

        Raises:
            ApiError: 429 RESOURCE_EXHAUSTED with Google's wording.
        """
        quota_id = quota_id_of(qr)
        limit = self.quota_limit(zone, quota_id)
        if limit is None:
            return
        used = sum(
            _chips(other.node.accelerator_type)
            for other in self.qrs_in(zone)
            if other.state != "DELETING" and quota_id_of(other) == quota_id
        )
        if used + _chips(qr.node.accelerator_type) > limit:
            raise ApiError(
                429,
                f"Quota '{quota_id}' exhausted. Limit {limit} in zone {zone}.",
                status_name="RESOURCE_EXHAUSTED",
            )


SUSPEND_DURATION = timedelta(seconds=60)  # simulated SUSPENDING time after a preemption (not Google's figure)


def preempt_now(qr: SimQueuedResource, at: datetime) -> None:
    """A spot preemption: the QR goes SUSPENDING (initiator SERVICE) with a PREEMPTED node, and
    SUSPEND_DURATION later SUSPENDED with the node deleted."""
    qr.state, qr.state_initiator = "SUSPENDING", "SERVICE"
    qr.node.state, qr.node.health, qr.node.preempt_at = "PREEMPTED", None, None
    qr.suspend_at = at + SUSPEND_DURATION


def _chips(accelerator_type: str) -> int:
    """Chips of an accelerator type by its suffix ("v6e-8" -> 8); the quotas' unit is the same number."""
    match = re.search(r"-(\d+)$", accelerator_type)
    return int(match.group(1)) if match else 1


def quota_id_of(qr: SimQueuedResource) -> str:
    """The per-zone quota a QR draws on: preemptible for spot and flex-start (cloud.google.com/tpu/docs/
    request-using-flex-start: "you need sufficient preemptible quota"), else the standard one."""
    family = re.sub(r"-\d+$", "", qr.node.accelerator_type).upper()
    preemptible = qr.provisioning_model in ("SPOT", "FLEX_START")
    return f"TPU{family}{'Preemptible' if preemptible else ''}PerProjectPerZoneForTPUAPI"


def _qr_key(qr: SimQueuedResource) -> str:
    return qr.qr_id


def _log_key(entry: SimLogEntry) -> tuple[datetime, str]:
    """entries.list order: by timestamp, and "entries with equal timestamps are returned in order of their
    insertId values" (cloud.google.com/logging/docs/reference/v2/rest/v2/entries/list, `orderBy`)."""
    return entry.timestamp, _insert_id_of(entry)


def _ips(value: Any) -> list[str]:
    if value is None:
        return []
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]


def _assign_ips(qr: SimQueuedResource) -> None:
    """Deterministic addresses, all on the loopback network (127.0.0.0/8), so nothing the demo or the tests
    do ever reaches another host: "internal" 127.10.x.y and "external" 127.34.x.y. Nothing listens there
    until a scenario says so, which is what a freshly created TPU VM looks like (vLLM still booting)."""
    h = zlib.crc32(f"{qr.zone}/{qr.qr_id}".encode())
    b, c = (h >> 8) & 0xFF, max(2, h & 0xFF)
    qr.node.internal_ips = [f"127.10.{b}.{c}"]
    qr.node.external_ips = [f"127.34.{b}.{c}"] if qr.node.enable_external_ips else []


def _qr_from_scenario(spec: dict[str, Any], start: datetime) -> SimQueuedResource:
    try:
        qr_id, zone = str(spec["name"]), str(spec["zone"])
    except KeyError as exc:
        raise ValueError(f"scenario queued resource {spec!r} lacks {exc}") from None
    state = str(spec.get("state", "ACTIVE"))
    model = str(spec.get("provisioning_model", "STANDARD"))
    if model not in PROVISIONING_MODELS:
        raise ValueError(f"queued resource {qr_id}: provisioning_model must be one of {PROVISIONING_MODELS}")
    created = start + duration(spec.get("created", "0s"))
    node_spec = spec.get("node") or {}
    node_state = node_spec.get("state", "CREATING" if state == "PROVISIONING" else "READY")
    node = SimNode(
        node_id=str(node_spec.get("id", f"{qr_id}-node")),
        accelerator_type=str(node_spec.get("accelerator_type", "v6e-8")),
        runtime_version=str(node_spec.get("runtime_version", "v2-alpha-tpuv6e")),
        state=str(node_state),
        health=node_spec.get("health", "HEALTHY" if node_state == "READY" else None),
        health_description=str(node_spec.get("health_description", "")),
        internal_ips=_ips(node_spec.get("internal_ip", "127.0.0.2")),
        external_ips=_ips(node_spec.get("external_ip")),
        enable_external_ips=bool(node_spec.get("enable_external_ips", True)),
        create_time=created + duration(node_spec.get("created_after", "2m")),
        labels={str(k): str(v) for k, v in (node_spec.get("labels") or {}).items()},
    )
    error = spec.get("error") or {}
    return SimQueuedResource(
        qr_id=qr_id,
        zone=zone,
        state=state,
        state_initiator=str(spec.get("state_initiator", "USER")),
        provisioning_model=model,
        create_time=created,
        node=node,
        max_run_duration=duration(spec["max_run_duration"]) if "max_run_duration" in spec else None,
        valid_until=start + duration(spec["valid_until"]) if "valid_until" in spec else None,
        reservation=spec.get("reservation"),
        error_code=int(error.get("code", 13)) if error or state == "FAILED" else None,
        error_message=str(error.get("message", "Internal error")).strip()
        if error or state == "FAILED"
        else None,
        preempt_after=duration(spec["preempt_after"]) if "preempt_after" in spec else None,
    )


def _op_from_scenario(spec: dict[str, Any], world: World, start: datetime) -> SimOperation:
    zone = str(spec["zone"])
    qr_id = spec.get("queued_resource")
    target = spec.get("target") or (
        f"{world.parent(zone)}/queuedResources/{qr_id}" if qr_id else world.parent(zone)
    )
    created = start + duration(spec.get("created", "0s"))
    done = bool(spec.get("done", True))
    error = spec.get("error") or {}
    return SimOperation(
        op_id=str(spec["id"]),
        zone=zone,
        verb=str(spec.get("verb", "create")),
        target=str(target),
        create_time=created,
        end_time=created + duration(spec.get("duration", "60s")) if done else None,
        done=done,
        error_code=int(error["code"]) if error else None,
        error_message=str(error.get("message", "")) if error else None,
        response_qr=str(qr_id) if qr_id else None,
    )


# --------------------------------------------------------------------------------------------------
# JSON rendering (discovery-document shapes)
# --------------------------------------------------------------------------------------------------


def location_json(world: World, zone: SimZone) -> dict[str, Any]:
    return {
        "name": world.parent(zone.name),
        "locationId": zone.name,
        "labels": {"cloud.googleapis.com/region": zone.region},
    }


def accelerator_config_json(accelerator_type: str) -> dict[str, Any]:
    family, _, size = accelerator_type.rpartition("-")
    config: dict[str, Any] = {}
    if family in _ACCEL_FAMILY:
        config["type"] = _ACCEL_FAMILY[family]
    if size.isdigit():
        topology = (_TOPOLOGY_3D if family in ("v4", "v5p") else _TOPOLOGY_2D).get(int(size))
        if topology:
            config["topology"] = topology
    return config


def accelerator_type_json(world: World, zone: str, accelerator_type: str) -> dict[str, Any]:
    config = accelerator_config_json(accelerator_type)
    return {
        "name": f"{world.parent(zone)}/acceleratorTypes/{accelerator_type}",
        "type": accelerator_type,
        "acceleratorConfigs": [config] if config else [],
    }


def queued_resource_json(world: World, qr: SimQueuedResource, api: str) -> dict[str, Any]:
    """A QueuedResource in the `api` ("v2alpha1" | "v2") discovery shape."""
    parent = world.parent(qr.zone)
    state: dict[str, Any] = {"state": qr.state, "stateInitiator": qr.state_initiator}
    if qr.state == "FAILED":
        state["failedData"] = {"error": {"code": qr.error_code or 13, "message": qr.error_message or ""}}
    elif qr.state in _STATE_DATA:
        state[_STATE_DATA[qr.state]] = {}
    body: dict[str, Any] = {
        "name": f"{parent}/queuedResources/{qr.qr_id}",
        "createTime": rfc3339(qr.create_time),
        "tpu": {
            "nodeSpec": [
                {
                    "parent": parent,
                    "nodeId": qr.node.node_id,
                    "node": {
                        "acceleratorType": qr.node.accelerator_type,
                        "runtimeVersion": qr.node.runtime_version,
                        "networkConfig": {"enableExternalIps": qr.node.enable_external_ips},
                        **_node_extras(qr.node),
                    },
                }
            ]
        },
        "state": state,
    }
    if qr.node.network:
        body["tpu"]["nodeSpec"][0]["node"]["networkConfig"]["network"] = qr.node.network
    if qr.provisioning_model == "SPOT":
        body["spot"] = {}
    if qr.provisioning_model == "RESERVATION_BOUND":
        body["reservationName"] = f"{parent}/reservations/{qr.reservation or '-'}"
    if api == "v2alpha1":
        body["provisioningModel"] = qr.provisioning_model
        if qr.max_run_duration is not None:
            run: dict[str, Any] = {"maxRunDuration": duration_json(qr.max_run_duration)}
            if qr.termination_time is not None:
                run["terminationTime"] = rfc3339(qr.termination_time)
            body["runDuration"] = run
    if qr.valid_until is not None:
        body["queueingPolicy"] = {"validUntilTime": rfc3339(qr.valid_until)}
    return body


def _node_extras(node: SimNode) -> dict[str, Any]:
    """The request-given Node fields echoed back: labels, metadata, serviceAccount."""
    extras: dict[str, Any] = {}
    if node.labels:
        extras["labels"] = dict(node.labels)
    if node.metadata:
        extras["metadata"] = dict(node.metadata)
    if node.service_account is not None:
        extras["serviceAccount"] = dict(node.service_account)
    return extras


def node_json(world: World, qr: SimQueuedResource, api: str) -> dict[str, Any]:
    """The Node of `qr` in the `api` ("v2alpha1" | "v2") discovery shape."""
    node, zone = qr.node, world.zones[qr.zone]
    endpoints: list[dict[str, Any]] = []
    for i, ip in enumerate(node.internal_ips):
        endpoint: dict[str, Any] = {"ipAddress": ip, "port": 8470}
        if node.enable_external_ips and i < len(node.external_ips):
            endpoint["accessConfig"] = {"externalIp": node.external_ips[i]}
        endpoints.append(endpoint)
    scheduling: dict[str, Any] = {}
    if qr.provisioning_model == "SPOT":
        scheduling["spot"] = True
    if qr.provisioning_model == "RESERVATION_BOUND":
        scheduling["reserved"] = True
    if api == "v2alpha1":
        # SchedulingConfig.provisioningModel has no FLEX_START value: flex-start nodes leave it unset.
        if qr.provisioning_model != "FLEX_START":
            scheduling["provisioningModel"] = qr.provisioning_model
        if qr.provisioning_model == "RESERVATION_BOUND":
            scheduling["reservationName"] = f"{world.parent(qr.zone)}/reservations/{qr.reservation or '-'}"
        if qr.termination_time is not None:
            scheduling["terminationTimestamp"] = rfc3339(qr.termination_time)
    name = f"{world.parent(qr.zone)}/nodes/{node.node_id}"
    body: dict[str, Any] = {
        "name": name,
        "id": str(zlib.crc32(name.encode()) * 1000003 % (2**62)),
        "acceleratorType": node.accelerator_type,
        "acceleratorConfig": accelerator_config_json(node.accelerator_type),
        "state": node.state,
        "runtimeVersion": node.runtime_version,
        "createTime": rfc3339(node.create_time or qr.create_time),
        "networkConfig": {
            "network": f"projects/{world.project}/global/networks/default",
            "subnetwork": f"projects/{world.project}/regions/{zone.region}/subnetworks/default",
            "enableExternalIps": node.enable_external_ips,
        },
        "networkEndpoints": endpoints,
        "schedulingConfig": scheduling,
        "queuedResource": f"{world.parent(qr.zone)}/queuedResources/{qr.qr_id}",
        "apiVersion": "V2_ALPHA1",
    }
    if node.health:
        body["health"] = node.health
    if node.health_description:
        body["healthDescription"] = node.health_description
    return {**body, **_node_extras(node)}


def operation_json(world: World, op: SimOperation, api: str) -> dict[str, Any]:
    """A google.longrunning.Operation with TPU OperationMetadata (and the response when done)."""
    metadata: dict[str, Any] = {
        "@type": f"type.googleapis.com/google.cloud.tpu.{api}.OperationMetadata",
        "createTime": rfc3339(op.create_time),
        "target": op.target,
        "verb": op.verb,
        "cancelRequested": False,
        "apiVersion": api,
    }
    if op.end_time is not None:
        metadata["endTime"] = rfc3339(op.end_time)
    body: dict[str, Any] = {
        "name": f"{world.parent(op.zone)}/operations/{op.op_id}",
        "metadata": metadata,
        "done": op.done,
    }
    if not op.done:
        return body
    if op.error_code is not None:
        body["error"] = {"code": op.error_code, "message": op.error_message or ""}
    elif op.response_qr and (op.zone, op.response_qr) in world.queued_resources:
        qr = world.queued_resources[(op.zone, op.response_qr)]
        body["response"] = {
            "@type": f"type.googleapis.com/google.cloud.tpu.{api}.QueuedResource",
            **queued_resource_json(world, qr, api),
        }
    elif op.response_node and any(q.node.node_id == op.response_node for q in world.nodes_in(op.zone)):
        body["response"] = {
            "@type": f"type.googleapis.com/google.cloud.tpu.{api}.Node",
            **node_json(world, world.node_owner(op.zone, op.response_node), api),
        }
    else:
        body["response"] = {"@type": "type.googleapis.com/google.protobuf.Empty"}
    return body


QUOTA_SERVICE = "tpu.googleapis.com"


def quota_infos(world: World) -> dict[str, list[tuple[str, int]]]:
    """Quota id -> [(zone, value)] from the zones' `quota` entries, ids and zones sorted; a quota with a
    default (`quota_defaults`) has a ("", default) entry first (the default dimension)."""
    infos: dict[str, list[tuple[str, int]]] = {
        quota_id: [("", value)] for quota_id, value in world.quota_defaults.items()
    }
    for zone in sorted(world.zones):
        for quota_id, value in world.zones[zone].quota.items():
            infos.setdefault(quota_id, []).append((zone, value))
    return dict(sorted(infos.items()))


def quota_info_json(world: World, quota_id: str, values: list[tuple[str, int]]) -> dict[str, Any]:
    """A Cloud Quotas `QuotaInfo` (cloudquotas_v1 proto JSON) with one dimensionsInfo per zone.

    The metric name and display names are the simulator's own (not captured from Google).
    """
    family = re.sub(r"^TPU|(Preemptible)?PerProjectPerZoneForTPUAPI$", "", quota_id).lower() or "tpu"
    preemptible = "Preemptible" in quota_id
    metric = f"{QUOTA_SERVICE}/{'preemptible_' if preemptible else ''}tpu_{family}_cores"
    return {
        "name": f"projects/{world.project}/locations/global/services/{QUOTA_SERVICE}/quotaInfos/{quota_id}",
        "quotaId": quota_id,
        "metric": metric,
        "service": QUOTA_SERVICE,
        "isPrecise": True,
        "containerType": "PROJECT",
        "dimensions": ["zone"],
        "metricDisplayName": f"{'Preemptible ' if preemptible else ''}TPU {family} cores",
        "quotaDisplayName": f"{'Preemptible ' if preemptible else ''}TPU {family} cores per project per zone",
        "metricUnit": "1/{project}/{zone}",
        "quotaIncreaseEligibility": {"isEligible": True},
        "isFixed": False,
        "isConcurrent": False,
        "dimensionsInfos": [_dimensions_info(world, quota_id, values, zone, value) for zone, value in values],
    }


def _dimensions_info(
    world: World, quota_id: str, values: list[tuple[str, int]], zone: str, value: int
) -> dict[str, Any]:
    """One DimensionsInfo: a zone's own value, or (zone "") the default dimension: empty `dimensions`,
    applicable to every zone without its own value (cloud.google.com/docs/quotas/reference/rest/v1/
    DimensionsInfo: "applicableLocations: The applicable regions or zones of this dimensions info")."""
    if zone:
        return {"dimensions": {"zone": zone}, "details": {"value": str(value)}, "applicableLocations": [zone]}
    overridden = {z for z, _ in values if z}
    covered = [z for z in sorted(world.zones) if z not in overridden]
    return {"dimensions": {}, "details": {"value": str(value)}, "applicableLocations": covered}


def secret_json(world: World, secret: SimSecret) -> dict[str, Any]:
    """A Secret Manager `Secret` (secretmanager.v1 discovery shape)."""
    body: dict[str, Any] = {
        "name": f"projects/{world.project}/secrets/{secret.secret_id}",
        "replication": {"automatic": {}},
        "createTime": rfc3339(secret.create_time),
        "etag": f'"{zlib.crc32(secret.secret_id.encode()):x}{len(secret.versions):x}"',
    }
    if secret.labels:
        body["labels"] = dict(secret.labels)
    return body


def secret_version_json(world: World, secret: SimSecret, number: int) -> dict[str, Any]:
    """A `SecretVersion` (versions are 1-based and always ENABLED here)."""
    _, created, checksum = secret.versions[number - 1]
    return {
        "name": f"projects/{world.project}/secrets/{secret.secret_id}/versions/{number}",
        "createTime": rfc3339(created),
        "state": "ENABLED",
        "etag": f'"{number:x}"',
        "clientSpecifiedPayloadChecksum": checksum,
    }


def paginate(items: list[Any], query: dict[str, str], default_size: int) -> tuple[list[Any], str | None]:
    """Slice `items` by the pageSize/pageToken query parameters; returns (page, nextPageToken or None).

    Raises:
        ApiError: 400 for a malformed pageSize or pageToken.
    """
    try:
        size = int(query.get("pageSize") or 0) or default_size
        offset = int(query.get("pageToken") or 0)
    except ValueError:
        raise ApiError(400, "Invalid page size or page token.") from None
    if size < 0 or offset < 0 or offset > len(items):
        raise ApiError(400, "Invalid page token.")
    end = offset + size
    return items[offset:end], (str(end) if end < len(items) else None)


# --------------------------------------------------------------------------------------------------
# Cloud Logging: generated log entries and the entries.list filter language
# --------------------------------------------------------------------------------------------------

CASES_DIR = Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "cases"
LOG_SEVERITIES = ("DEFAULT", "DEBUG", "INFO", "NOTICE", "WARNING", "ERROR", "CRITICAL", "ALERT", "EMERGENCY")
_LOG_RANK = {name: i for i, name in enumerate(LOG_SEVERITIES)}
LOG_PAGE_SIZE_DEFAULT = 50
LOG_PAGE_SIZE_MAX = 1000
RUNTIME_MONITOR_LOG = "tpu.googleapis.com/runtime_monitor"


@dataclass
class SimLogEntry:
    """One stored log entry: its JSON (logging.v2 LogEntry shape) plus what the filter needs.

    A generated stream entry (`stream_log_entries`) shares its `body` and `blob` with every entry of its
    kind and variant (so a million of them fit in memory); its own `insert_id` and `timestamp` replace the
    body's when it is rendered (`log_entry_json`) and in `sample()`.
    """

    timestamp: datetime
    seq: int
    body: dict[str, Any]
    blob: str  # every string in the entry, lowercased, for free-text terms
    insert_id: str = ""  # set: `body` is a shared prototype


def log_entry_json(entry: SimLogEntry) -> dict[str, Any]:
    """The entry's LogEntry JSON as entries.list returns it (a copy)."""
    body: dict[str, Any] = json.loads(json.dumps(entry.body))
    if entry.insert_id:
        body["timestamp"] = rfc3339(entry.timestamp)
        body["receiveTimestamp"] = rfc3339(entry.timestamp + timedelta(milliseconds=500 + entry.seq % 1000))
        body["insertId"] = entry.insert_id
    return body


def _insert_id_of(entry: SimLogEntry) -> str:
    return entry.insert_id or str(entry.body.get("insertId", ""))


def stream_log_entries(
    spec: dict[str, Any], *, project: str, start: datetime, node_id: str, zone: str, first_seq: int
) -> list[SimLogEntry]:
    """A large generated log stream (`google.logs.stream`), sorted by timestamp, SIMULATED.

    Spec keys: `count` (entries), `window` (e.g. 1h, ending at the scenario start), `error_share` (share
    of entries at ERROR, e.g. 0.005), `error_kinds` (how many distinct error texts, at most the ERROR lines
    of the case files; shares follow a Zipf law, the most frequent kind first), `seed`, `workers`.
    Error texts are the real ERROR lines of tests/fixtures/cases, each in 8 varied copies; the rest is the
    INFO/WARNING noise of `generate_logs`, 512 varied lines. Entries of one kind and copy share one body.

    Returns:
        The entries (not yet stored); `stream_error_kinds(spec)` gives the error texts in kind order.
    """
    rng = random.Random(int(spec.get("seed", 7)))  # simulated data, not security
    count = int(spec["count"])
    begin, end = _window(spec, start, "1h")
    span = (end - begin).total_seconds()
    workers = max(1, int(spec.get("workers", 1)))
    kinds = stream_error_kinds(spec)
    weights = [1 / (rank + 1) ** 1.1 for rank in range(len(kinds))]
    errors = round(count * float(spec.get("error_share", 0.005))) if kinds else 0

    def prototype(severity: str, payload: Any, worker: int, lid: str) -> tuple[dict[str, Any], str]:
        labels = {"project_id": project, "zone": zone, "node_id": node_id, "worker_id": str(worker)}
        if isinstance(payload, dict):
            body = make_log_entry(project, begin, severity, json_payload=payload, log_id=lid, labels=labels)
        else:
            body = make_log_entry(project, begin, severity, text=payload, log_id=lid, labels=labels)
        return body, " ".join(_strings(body)).lower()

    noise = []
    for _ in range(512):
        severity, lid, payload = _noise_lines(rng, begin + timedelta(seconds=rng.uniform(0, span)))
        noise.append(prototype(severity, payload, rng.randrange(workers), lid))
    error_protos = [
        [
            prototype("ERROR", vary_case_line(text, rng, begin), rng.randrange(workers), "syslog")
            for _ in range(8)
        ]
        for text in kinds
    ]
    times = sorted(rng.uniform(0, span) for _ in range(count))
    error_slots = set(rng.sample(range(count), errors))
    choices = rng.choices(range(len(kinds)), weights, k=errors) if errors else []
    out = []
    picked = iter(choices)
    for i, offset in enumerate(times):
        seq = first_seq + i
        if i in error_slots:
            body, blob = error_protos[next(picked)][seq % 8]
        else:
            body, blob = noise[rng.randrange(512)]
        out.append(SimLogEntry(begin + timedelta(seconds=offset), seq, body, blob, f"s{seq:015x}"))
    return out


def stream_error_kinds(spec: dict[str, Any]) -> list[str]:
    """The error texts of a `google.logs.stream` spec, most frequent kind first (see stream_log_entries)."""
    texts: list[str] = []
    for path in sorted(CASES_DIR.iterdir()):
        if path.suffix not in (".log", ".txt") or not path.name.startswith(("vllm-", "tpu-", "docker-")):
            continue
        if path.name.startswith(("vllm-metrics", "vllm-bench")):
            continue
        for line in case_lines(CASES_DIR, path.name):
            if case_line_severity(line, "ERROR") == "ERROR" and line not in texts:
                texts.append(line)
    wanted = int(spec.get("error_kinds", 40))
    if wanted > len(texts):
        raise ValueError(f"error_kinds: at most {len(texts)} distinct error lines in the case files")
    return texts[:wanted]


def _log_severity(value: Any) -> str:
    name = str(value or "DEFAULT").upper()
    if name not in _LOG_RANK:
        raise ValueError(f"bad log severity {value!r}: use one of {', '.join(LOG_SEVERITIES)}")
    return name


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def make_log_entry(
    project: str,
    timestamp: datetime,
    severity: str,
    *,
    text: str | None = None,
    json_payload: dict[str, Any] | None = None,
    proto_payload: dict[str, Any] | None = None,
    log_id: str = "syslog",
    resource_type: str = "tpu_worker",
    labels: dict[str, str] | None = None,
    insert_id: str = "",
) -> dict[str, Any]:
    """A LogEntry JSON body (logging.v2 discovery shape) with exactly one payload.

    Args:
        project: project id (logName is "projects/<project>/logs/<url-encoded log_id>").
        timestamp: aware datetime of the event; receiveTimestamp is 0.5-1.5 s later.
        severity: a LogSeverity name.
        text / json_payload / proto_payload: the payload (the first one given is used).
        log_id: e.g. "syslog" or "tpu.googleapis.com/runtime_monitor".
        resource_type, labels: the monitored resource.
        insert_id: the insertId (default: derived from the content).
    """
    body: dict[str, Any] = {
        "logName": f"projects/{project}/logs/{quote(log_id, safe='')}",
        "resource": {"type": resource_type, "labels": dict(labels or {})},
        "timestamp": rfc3339(timestamp),
        "receiveTimestamp": rfc3339(
            timestamp + timedelta(milliseconds=500 + zlib.crc32(insert_id.encode()) % 1000)
        ),
        "severity": _log_severity(severity),
    }
    if text is not None:
        body["textPayload"] = text
    elif json_payload is not None:
        body["jsonPayload"] = json_payload
    elif proto_payload is not None:
        body["protoPayload"] = proto_payload
    body["insertId"] = insert_id or f"{zlib.crc32(json.dumps(body, sort_keys=True).encode()):08x}"
    return body


# Variable parts of the real case texts, varied per occurrence (the figures that diagnose reads stay).
_VARY_VLLM_TS = re.compile(r"\b(INFO|WARNING|ERROR|DEBUG|CRITICAL) \d\d-\d\d \d\d:\d\d:\d\d\b")
_VARY_GLOG = re.compile(r"^([IWEF])\d{4} \d\d:\d\d:\d\d\.\d{6}\s+\d+")
_VARY_ISO = re.compile(r"\b\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d+(?:Z|[+-]\d\d:\d\d)")
_VARY_PID = re.compile(r"\bpid=\d+")
_VARY_REQUEST_ID = re.compile(r"Root=1-[0-9a-f]{8}-[0-9a-f]{24};[0-9a-f-]{36}")
_VARY_EID = re.compile(r"\[EID: 0x[0-9a-f]+\]")
_VARY_OPERATION = re.compile(r"operations/operation-\d+-[0-9a-f-]+")
_LINE_LEVEL = re.compile(r"\b(INFO|WARNING|DEBUG)(?: \d\d-\d\d \d\d:\d\d:\d\d\b|:\s)")


def vary_case_line(line: str, rng: random.Random, at: datetime) -> str:
    """One line of a real case file with its variable parts (timestamps, pids, request ids, EIDs,
    operation ids) changed for an occurrence at `at`; the figures the diagnosis reads are kept."""
    local = at.astimezone(UTC)
    line = _VARY_VLLM_TS.sub(lambda m: f"{m.group(1)} {local:%m-%d %H:%M:%S}", line)
    line = _VARY_GLOG.sub(
        lambda m: f"{m.group(1)}{local:%m%d %H:%M:%S.%f} {rng.randint(1000, 99999):>7}", line
    )
    line = _VARY_ISO.sub(lambda m: local.strftime("%Y-%m-%dT%H:%M:%S.%f") + "000+00:00", line)
    line = _VARY_PID.sub(lambda m: f"pid={rng.randint(2, 32000)}", line)
    line = _VARY_REQUEST_ID.sub(
        lambda m: (
            f"Root=1-{rng.getrandbits(32):08x}-{rng.getrandbits(96):024x};{uuid.UUID(int=rng.getrandbits(128))}"
        ),
        line,
    )
    line = _VARY_EID.sub(lambda m: f"[EID: 0x{rng.getrandbits(64):016x}]", line)
    return _VARY_OPERATION.sub(
        lambda m: f"operations/operation-{int(local.timestamp() * 1000)}-{rng.getrandbits(48):012x}", line
    )


def case_lines(cases_dir: Path, name: str) -> list[str]:
    """The non-empty lines of a case file (tests/fixtures/cases), or one placeholder line if missing."""
    path = cases_dir / Path(name).name
    try:
        return [line.rstrip() for line in path.read_text().splitlines() if line.strip()]
    except OSError:
        return [f"(simulator: case file {name} not found in {cases_dir})"]


def case_line_severity(line: str, default: str) -> str:
    """INFO/WARNING/DEBUG when the line carries that level (vLLM or uvicorn prefix), else `default`."""
    match = _LINE_LEVEL.search(line)
    return match.group(1) if match else default


def _noise_lines(rng: random.Random, at: datetime) -> tuple[str, str, Any]:
    """One INFO/WARNING line typical of a TPU VM serving vLLM: (severity, log id, text or JSON payload).

    The vLLM, uvicorn, docker and guest-agent texts follow the real programs' formats; the runtime-monitor
    JSON is illustrative (its real fields are unverified).
    """
    md, hms = f"{at:%m-%d}", f"{at:%H:%M:%S}"
    roll = rng.random()
    if roll < 0.30:
        return (
            "INFO",
            "syslog",
            (
                f"INFO {md} {hms} [loggers.py:123] Engine 000: Avg prompt throughput: "
                f"{rng.uniform(0, 9000):.1f} tokens/s, Avg generation throughput: "
                f"{rng.uniform(50, 2500):.1f} tokens/s, Running: "
                f"{rng.randint(0, 64)} reqs, Waiting: {rng.randint(0, 8)} reqs, GPU KV cache usage: "
                f"{rng.uniform(0, 95):.1f}%, Prefix cache hit rate: {rng.uniform(0, 90):.1f}%"
            ),
        )
    if roll < 0.55:
        status = "200 OK" if rng.random() < 0.97 else "400 Bad Request"
        return (
            "INFO",
            "syslog",
            (
                f'INFO:     10.128.0.{rng.randint(2, 250)}:{rng.randint(30000, 65000)} - "POST '
                f'/v1/chat/completions HTTP/1.1" {status}'
            ),
        )
    if roll < 0.68:
        path = rng.choice(("/health", "/metrics", "/v1/models"))
        return (
            "INFO",
            "syslog",
            f'INFO:     127.0.0.1:{rng.randint(30000, 65000)} - "GET {path} HTTP/1.1" 200 OK',
        )
    if roll < 0.80:
        return (
            "INFO",
            "syslog",
            (f"INFO {md} {hms} [async_llm.py:261] Added request chatcmpl-{rng.getrandbits(128):032x}."),
        )
    if roll < 0.86:
        return (
            "INFO",
            RUNTIME_MONITOR_LOG,
            {
                "verb": "tpu-runtime-metrics",
                "message": f"TPU chip {rng.randint(0, 7)}: duty cycle {rng.uniform(0, 100):.1f}%, HBM used "
                f"{rng.uniform(20, 31):.2f} GiB of 31.25 GiB",
            },
        )
    if roll < 0.90:
        return (
            "INFO",
            "syslog",
            (
                f'dockerd[{rng.randint(500, 2000)}]: time="{at:%Y-%m-%dT%H:%M:%S.%f}000Z" level=info '
                f'msg="ignoring event" container={rng.getrandbits(256):064x} module=libcontainerd '
                'namespace=moby topic=/tasks/delete type="*events.TaskDelete"'
            ),
        )
    if roll < 0.93:
        return (
            "INFO",
            "syslog",
            (f"google_guest_agent[{rng.randint(800, 1200)}]: Updating keys for user tpu-chatops."),
        )
    if roll < 0.97:
        return (
            "WARNING",
            "syslog",
            (
                f"WARNING {md} {hms} [scheduler.py:1754] Sequence group {rng.randint(1, 99999)} is "
                "preempted by PreemptionMode.RECOMPUTE mode because there is not enough KV cache space. "
                "This can affect the end-to-end performance. Increase gpu_memory_utilization or "
                "tensor_parallel_size to provide more KV cache memory. "
                f"total_num_cumulative_preemption={rng.randint(1, 500)}"
            ),
        )
    field_name = rng.choice(("top_k", "min_p", "repetition_penalty", "chat_template_kwargs"))
    return (
        "WARNING",
        "syslog",
        (
            f"WARNING {md} {hms} [protocol.py:58] The following fields were present in the request but "
            f"ignored: {{'{field_name}'}}"
        ),
    )


def _window(spec: dict[str, Any], start: datetime, default: str) -> tuple[datetime, datetime]:
    if "from" in spec or "to" in spec:
        begin = start + duration(spec.get("from", f"-{default}"))
        end = start + duration(spec.get("to", "0s"))
    else:
        begin, end = start - duration(spec.get("window", default)), start
    if end < begin:
        raise ValueError(f"log window ends before it begins: {spec!r}")
    return begin, end


def generate_logs(
    logs: dict[str, Any],
    *,
    project: str,
    start: datetime,
    node_id: str = "gemma4-qr-node",
    zone: str = "us-east5-a",
    cases_dir: Path | None = None,
) -> list[dict[str, Any]]:
    """Generate the log entries a scenario's `google.logs` section describes (see the module docstring).

    Deterministic for a given `seed`. Returns LogEntry JSON bodies sorted by timestamp (oldest first).

    Raises:
        ValueError: a malformed spec (bad severity, duration or window).
    """
    rng = random.Random(int(logs.get("seed", 20261129)))  # simulated data, not security
    node_id = str(logs.get("node_id", node_id))
    zone = str(logs.get("zone", zone))
    workers = max(1, int(logs.get("workers", 1)))
    log_id = str(logs.get("log_name", "syslog"))
    folder = Path(logs["cases_dir"]) if logs.get("cases_dir") else (cases_dir or CASES_DIR)
    out: list[dict[str, Any]] = []

    def labels(spec: dict[str, Any], worker: int) -> dict[str, str]:
        return {
            "project_id": project,
            "zone": str(spec.get("zone", zone)),
            "node_id": str(spec.get("node_id", node_id)),
            "worker_id": str(spec.get("worker_id", worker)),
        }

    def add(at: datetime, severity: str, payload: Any, spec: dict[str, Any], worker: int, lid: str) -> None:
        kind = spec.get("payload", "text")
        if isinstance(payload, dict):
            body = make_log_entry(
                project,
                at,
                severity,
                json_payload=payload,
                log_id=lid,
                labels=labels(spec, worker),
                insert_id=f"{rng.getrandbits(64):016x}",
            )
        elif kind == "json":
            body = make_log_entry(
                project,
                at,
                severity,
                json_payload={"message": payload},
                log_id=lid,
                labels=labels(spec, worker),
                insert_id=f"{rng.getrandbits(64):016x}",
            )
        else:
            body = make_log_entry(
                project,
                at,
                severity,
                text=payload,
                log_id=lid,
                labels=labels(spec, worker),
                insert_id=f"{rng.getrandbits(64):016x}",
            )
        out.append(body)

    noise = logs.get("noise") or {}
    if isinstance(noise, int):
        noise = {"count": noise}
    begin, end = _window(noise, start, "6h")
    span = (end - begin).total_seconds()
    for _ in range(int(noise.get("count", 0))):
        at = begin + timedelta(seconds=rng.uniform(0, span))
        severity, lid, payload = _noise_lines(rng, at)
        add(at, severity, payload, noise, rng.randrange(workers), lid)
    for case in logs.get("cases") or []:
        lines = case_lines(folder, str(case["file"]))
        severity = _log_severity(case.get("severity", "ERROR"))
        begin, end = _window(case, start, "6h")
        span = (end - begin).total_seconds()
        for _ in range(int(case.get("count", 1))):
            at = begin + timedelta(seconds=rng.uniform(0, span))
            worker = rng.randrange(workers)
            for i, line in enumerate(lines):
                when = at + timedelta(microseconds=i * 137)
                add(
                    when,
                    case_line_severity(line, severity),
                    vary_case_line(line, rng, when),
                    case,
                    worker,
                    str(case.get("log_name", log_id)),
                )
    for spec in logs.get("entries") or []:
        at = start + duration(spec.get("at", "0s"))
        add(
            at,
            _log_severity(spec.get("severity", "ERROR")),
            str(spec["text"]),
            spec,
            int(spec.get("worker_id", 0)),
            str(spec.get("log_name", log_id)),
        )
    out.sort(key=lambda body: body["timestamp"])
    return out


def audit_log_entries(world: World) -> list[dict[str, Any]]:
    """Admin Activity audit entries (protoPayload AuditLog) for the scenario's queued-resource creations:
    one at the request and one when the operation ended (create is an LRO). Illustrative shapes
    (docs/google-apis.md §4); their `resource.type` is unverified."""
    out = []
    for qr in world.queued_resources.values():
        method = "google.cloud.tpu.v2alpha1.Tpu.CreateQueuedResource"
        name = f"{world.parent(qr.zone)}/queuedResources/{qr.qr_id}"
        for at, last in ((qr.create_time, False), (qr.create_time + timedelta(seconds=60), True)):
            payload: dict[str, Any] = {
                "@type": "type.googleapis.com/google.cloud.audit.AuditLog",
                "serviceName": "tpu.googleapis.com",
                "methodName": method,
                "resourceName": name,
                "authenticationInfo": {
                    "principalEmail": "tpu-chatops@" + world.project + ".iam.gserviceaccount.com"
                },
            }
            if last and qr.error_message:
                payload["status"] = {"code": qr.error_code or 13, "message": qr.error_message}
            out.append(
                make_log_entry(
                    world.project,
                    at,
                    "ERROR" if last and qr.error_message else "NOTICE",
                    proto_payload=payload,
                    log_id="cloudaudit.googleapis.com/activity",
                    resource_type="audited_resource",
                    labels={"project_id": world.project, "service": "tpu.googleapis.com", "method": method},
                    insert_id=f"{zlib.crc32((name + str(last)).encode()):08x}",
                )
            )
    return out


class FilterError(ValueError):
    """A Logging query the simulator cannot parse."""


_OPERATORS = (">=", "<=", "!=", "=~", "!~", "=", "<", ">", ":")
_WORD_END = set(' \t\r\n()"') | set("=!<>:~")
Predicate = Callable[[SimLogEntry], bool]


def _get_path(body: dict[str, Any], path: str) -> Any:
    value: Any = body
    for part in path.split("."):
        if isinstance(value, dict) and part in value:
            value = value[part]
        else:
            return None
    return value


def _rank_of(value: str) -> int | None:
    name = value.upper()
    if name in _LOG_RANK:
        return _LOG_RANK[name]
    if value.isdigit():
        return min(int(value) // 100, len(LOG_SEVERITIES) - 1)
    return None


def _filter_time(value: str) -> datetime:
    text = value.strip()
    try:
        if re.match(r"^\d{4}-\d\d-\d\d$", text):
            return datetime.fromisoformat(text).replace(tzinfo=UTC)
        match = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)?$", text)
        if not match:
            raise ValueError(text)
        fraction = (match.group(2) or "0")[:6].ljust(6, "0")
        zone = "+00:00" if match.group(3) in (None, "Z") else match.group(3)
        return datetime.fromisoformat(f"{match.group(1)}.{fraction}{zone}").astimezone(UTC)
    except ValueError:
        raise FilterError(f"invalid timestamp {value!r}") from None


def _compare(op: str, left: Any, right: Any) -> bool:
    if op in ("=", ":"):
        return bool(left == right)
    if op == "!=":
        return bool(left != right)
    if op == ">=":
        return bool(left >= right)
    if op == "<=":
        return bool(left <= right)
    if op == ">":
        return bool(left > right)
    return bool(left < right)


def _comparison(field_path: str, op: str, value: str) -> Predicate:
    """The predicate of one `field OP value` restriction."""
    if field_path == "timestamp":
        if op in ("=~", "!~", ":"):
            raise FilterError("timestamp supports =, !=, <, <=, >, >=")
        moment = _filter_time(value)
        return lambda e: _compare(op, e.timestamp, moment)
    if field_path == "severity":
        rank = _rank_of(value)
        if rank is None:
            raise FilterError(f"invalid severity {value!r}")
        if op in ("=~", "!~"):
            raise FilterError("severity supports =, !=, <, <=, >, >=, :")
        return lambda e: _compare(op, _LOG_RANK.get(str(e.body.get("severity", "DEFAULT")), 0), rank)
    if op in ("=~", "!~"):
        # The Logging query language's regular expressions are RE2 (cloud.google.com/logging/docs/view/
        # logging-query-language#regular-expressions): no lookaround, no backreferences.
        try:
            pattern = re2.compile(value, options=_RE2_OPTIONS)
        except re2.error as exc:
            raise FilterError(f"invalid regular expression {value!r}: {exc}") from None
        wanted = op == "=~"

        def regex(e: SimLogEntry) -> bool:
            got = _get_path(e.body, field_path)
            if got is None:
                return not wanted
            return (pattern.search(str(got)) is not None) == wanted

        return regex
    if op == ":":
        needle = value.lower()

        def has(e: SimLogEntry) -> bool:
            got = _get_path(e.body, field_path)
            if got is None:
                return False
            if value == "*":
                return True
            return (
                needle in " ".join(_strings(got)).lower()
                if not isinstance(got, str)
                else needle in got.lower()
            )

        return has

    def cmp(e: SimLogEntry) -> bool:
        got = _get_path(e.body, field_path)
        if got is None:
            return op == "!="
        if isinstance(got, bool | int | float):
            try:
                return _compare(op, float(got), float(value))
            except ValueError:
                return op == "!="
        return _compare(op, str(got), value)

    return cmp


class _FilterParser:
    """Recursive-descent parser of the Logging query language subset the simulator serves.

    Precedence as documented for Cloud Logging: NOT (or a leading "-") binds tightest, then OR, then AND;
    juxtaposed restrictions are ANDed. Restrictions: `field OP value` with OP in = != < <= > >= : =~ !~
    (values quoted or bare), and free-text terms ("quoted" or bare words), matched case-insensitively
    anywhere in the entry.
    """

    def __init__(self, text: str) -> None:
        self.s, self.i = text, 0

    def parse(self) -> Predicate:
        self._ws()
        if self.i >= len(self.s):
            return lambda e: True
        node = self._and()
        self._ws()
        if self.i < len(self.s):
            raise FilterError(f"unexpected {self.s[self.i : self.i + 20]!r} at column {self.i + 1}")
        return node

    def _ws(self) -> None:
        while self.i < len(self.s) and self.s[self.i].isspace():
            self.i += 1

    def _keyword(self, word: str) -> bool:
        self._ws()
        end = self.i + len(word)
        if self.s.startswith(word, self.i) and (end >= len(self.s) or self.s[end] in ' \t\r\n()"'):
            self.i = end
            return True
        return False

    def _and(self) -> Predicate:
        parts = [self._or()]
        while True:
            self._ws()
            if self.i >= len(self.s) or self.s[self.i] == ")":
                break
            self._keyword("AND")
            parts.append(self._or())
        return parts[0] if len(parts) == 1 else (lambda e: all(p(e) for p in parts))

    def _or(self) -> Predicate:
        parts = [self._unary()]
        while self._keyword("OR"):
            parts.append(self._unary())
        return parts[0] if len(parts) == 1 else (lambda e: any(p(e) for p in parts))

    def _unary(self) -> Predicate:
        if self._keyword("NOT"):
            inner = self._unary()
            return lambda e: not inner(e)
        self._ws()
        if self.s.startswith("-", self.i) and self.i + 1 < len(self.s) and not self.s[self.i + 1].isspace():
            self.i += 1
            inner = self._unary()
            return lambda e: not inner(e)
        return self._primary()

    def _string(self) -> str:
        assert self.s[self.i] == '"'
        self.i += 1
        out = []
        while self.i < len(self.s):
            char = self.s[self.i]
            if char == "\\" and self.i + 1 < len(self.s):
                following = self.s[self.i + 1]  # \" and \\ unescape; other escapes (\d in a regex) stay
                out.append(following if following in '"\\' else char + following)
                self.i += 2
                continue
            if char == '"':
                self.i += 1
                return "".join(out)
            out.append(char)
            self.i += 1
        raise FilterError("unterminated string")

    def _primary(self) -> Predicate:
        self._ws()
        if self.i >= len(self.s):
            raise FilterError("unexpected end of filter")
        char = self.s[self.i]
        if char == "(":
            self.i += 1
            inner = self._and()
            self._ws()
            if not self.s.startswith(")", self.i):
                raise FilterError("missing )")
            self.i += 1
            return inner
        if char == ")":
            raise FilterError(f"unexpected ) at column {self.i + 1}")
        if char == '"':
            term = self._string().lower()
            return lambda e: term in e.blob
        start = self.i
        while self.i < len(self.s) and self.s[self.i] not in _WORD_END:
            self.i += 1
        word = self.s[start : self.i]
        if word == "sample" and self.s.startswith("(", self.i):
            return self._sample()
        self._ws()
        op = next((o for o in _OPERATORS if self.s.startswith(o, self.i)), None)
        if op is None:
            if not word or word in ("AND", "OR"):
                raise FilterError(f"unexpected {self.s[start : start + 20]!r} at column {start + 1}")
            term = word.lower()
            return lambda e: term in e.blob
        if not word:
            raise FilterError(f"operator {op} without a field at column {self.i + 1}")
        self.i += len(op)
        self._ws()
        if self.s.startswith('"', self.i):
            value = self._string()
        else:
            begin = self.i
            while self.i < len(self.s) and not self.s[self.i].isspace() and self.s[self.i] != ")":
                self.i += 1
            value = self.s[begin : self.i]
            if not value:
                raise FilterError(f"missing value after {word}{op}")
        return _comparison(word, op, value)

    def _sample(self) -> Predicate:
        """`sample(insertId, FRACTION)`: a deterministic FRACTION of the entries, chosen by a hash of the
        insertId (https://cloud.google.com/logging/docs/view/logging-query-language#sample). The hash
        (CRC-32) is the simulator's; a smaller fraction selects a subset of a larger one."""
        end = self.s.find(")", self.i)
        if end < 0:
            raise FilterError("missing ) after sample(")
        args = [a.strip() for a in self.s[self.i + 1 : end].split(",")]
        self.i = end + 1
        if len(args) != 2 or args[0] != "insertId":
            raise FilterError("sample() takes (insertId, FRACTION)")
        try:
            fraction = float(args[1])
        except ValueError:
            raise FilterError(f"invalid sample fraction {args[1]!r}") from None
        if not 0 <= fraction <= 1:
            raise FilterError("the sample fraction must be between 0 and 1")
        limit = fraction * 2**32
        return lambda e: zlib.crc32(_insert_id_of(e).encode()) < limit


def parse_log_filter(text: str) -> Callable[[SimLogEntry], bool]:
    """Compile a Logging query into a predicate on stored entries.

    Raises:
        FilterError: the text does not parse (the API answers 400 INVALID_ARGUMENT).
    """
    return _FilterParser(text).parse()


def stored_log_entry(body: dict[str, Any], seq: int) -> SimLogEntry:
    """Index one LogEntry JSON body for filtering."""
    return SimLogEntry(_filter_time(body["timestamp"]), seq, body, " ".join(_strings(body)).lower())


# --------------------------------------------------------------------------------------------------
# HTTP server
# --------------------------------------------------------------------------------------------------


@dataclass
class _Fault:
    pattern: re.Pattern[str]
    status: int
    remaining: int
    body: str | None
    delay_s: float
    after: bool = False  # answer the fault only after the request has been carried out
    method: str | None = None  # only requests with this HTTP method (None: any)


Handler = Callable[[re.Match[str], dict[str, str], bytes], dict[str, Any]]

_V = r"/(?P<api>v2alpha1|v2)/projects/(?P<project>[^/]+)/locations"
_Z = _V + r"/(?P<zone>[^/]+)"


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    sim: GcpSimulator


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        status, payload = self.server.sim.dispatch(self.command, self.path, body)
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json; charset=UTF-8")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout tests)
            self.close_connection = True

    do_GET = do_POST = do_DELETE = do_PATCH = _handle

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass


class GcpSimulator:
    """The simulated Google Cloud API server (see the module docstring).

    Args:
        scenario: a scenario mapping (`sim.scenario.load()`); uses `project` and the `google` section.
        host, port: where to listen; port 0 picks a free port (read it back from `url`).
        now: clock returning an aware UTC datetime; scenario times are relative to its value at
            construction. Defaults to the wall clock.
        speed: simulated seconds per real second of `now` (None: the scenario's `google.time_speed`, else
            1). A fixed `now` with any speed gives a clock that only `advance()` moves.

    Use `start()` / `stop()` (or a `with` block), then point the clients at `url`.
    """

    def __init__(
        self,
        scenario: dict[str, Any],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        now: Callable[[], datetime] | None = None,
        speed: float | None = None,
    ) -> None:
        self._clock = now or (lambda: datetime.now(UTC))
        self._base = self._clock()
        google = scenario.get("google") or {}
        self.speed = float(speed if speed is not None else google.get("time_speed", 1))
        if self.speed <= 0:
            raise ValueError("time speed must be positive")
        self._offset = timedelta(0)
        self.world = World.from_scenario(scenario, self._base)
        self._host, self._port = host, port
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._faults: list[_Fault] = []
        self._faults_lock = threading.Lock()
        self.requests: list[tuple[str, str]] = []  # (method, path with query) of every request seen
        # (method, path, parsed JSON body) of every TPU request with a body; Secret Manager never recorded.
        self.request_bodies: list[tuple[str, str, Any]] = []
        qr_path = _Z + r"/queuedResources/(?P<id>[^/:]+)"
        node_path = _Z + r"/nodes/(?P<id>[^/:]+)"
        quotas = r"/v1/projects/(?P<project>[^/]+)/locations/global/services/(?P<service>[^/]+)/quotaInfos"
        secret = r"/v1/projects/(?P<project>[^/]+)/secrets/(?P<secret>[^/:]+)"
        self._routes: list[tuple[str, re.Pattern[str], Handler]] = [
            ("GET", re.compile(_V + r"$"), self._list_locations),
            ("GET", re.compile(_Z + r"$"), self._get_location),
            ("GET", re.compile(_Z + r"/queuedResources$"), self._list_queued_resources),
            ("POST", re.compile(_Z + r"/queuedResources$"), self._create_queued_resource),
            ("GET", re.compile(qr_path + "$"), self._get_queued_resource),
            ("DELETE", re.compile(qr_path + "$"), self._delete_queued_resource),
            ("POST", re.compile(qr_path + ":reset$"), self._reset_queued_resource),
            ("GET", re.compile(_Z + r"/nodes$"), self._list_nodes),
            ("GET", re.compile(node_path + "$"), self._get_node),
            ("POST", re.compile(node_path + ":start$"), self._start_node),
            ("POST", re.compile(node_path + ":stop$"), self._stop_node),
            ("GET", re.compile(_Z + r"/acceleratorTypes$"), self._list_accelerator_types),
            ("GET", re.compile(_Z + r"/acceleratorTypes/(?P<id>[^/:]+)$"), self._get_accelerator_type),
            ("GET", re.compile(_Z + r"/operations/(?P<id>[^/:]+)$"), self._get_operation),
            ("GET", re.compile(quotas + "$"), self._list_quota_infos),
            ("GET", re.compile(quotas + r"/(?P<id>[^/:]+)$"), self._get_quota_info),
            ("POST", re.compile(r"/v1/projects/(?P<project>[^/]+)/secrets$"), self._create_secret),
            ("GET", re.compile(secret + "$"), self._get_secret),
            ("POST", re.compile(secret + ":addVersion$"), self._add_secret_version),
            ("GET", re.compile(secret + r"/versions/(?P<version>[^/:]+)$"), self._get_secret_version),
            ("GET", re.compile(secret + r"/versions/(?P<version>[^/:]+):access$"), self._access_secret),
            ("POST", re.compile(r"/v2/entries:list$"), self._list_log_entries),
        ]

    # ---- simulated time and controls
    def now(self) -> datetime:
        """The simulated time: start + (clock elapsed) x speed + everything `advance()` added."""
        elapsed = self._clock() - self._base
        return self._base + elapsed * self.speed + self._offset

    def advance(self, seconds: float) -> datetime:
        """Move simulated time forward by `seconds` and apply the transitions due. Returns the new time."""
        with self.world.lock:
            self._offset += timedelta(seconds=seconds)
            now = self.now()
            self.world.evolve(now)
            return now

    def preempt(self, zone: str, node_id: str) -> None:
        """Preempt a spot node now: its queued resource goes SUSPENDING, then SUSPENDED with the node
        deleted (see `preempt_now`).

        Raises:
            KeyError: no such node exists now; ValueError: the node is not spot.
        """
        with self.world.lock:
            self.world.evolve(self.now())
            try:
                qr = self.world.node_owner(zone, node_id)
            except ApiError as exc:
                raise KeyError(exc.message) from None
            if qr.provisioning_model != "SPOT":
                raise ValueError(
                    f"node {node_id} is {qr.provisioning_model}, not SPOT: it cannot be preempted"
                )
            preempt_now(qr, self.world.now)

    def set_capacity(self, zone: str, capacity: Any) -> None:
        """Change a zone's `capacity` (same values as the scenario key) for requests queued from now on."""
        with self.world.lock:
            sim_zone = self.world.zones[zone]
            sim_zone.capacity_after, sim_zone.provisioning = _capacity(capacity)

    def add_log_entry(
        self,
        text: str,
        *,
        severity: str = "ERROR",
        at: datetime | None = None,
        node_id: str = "gemma4-qr-node",
        zone: str = "us-east5-a",
        worker_id: str = "0",
        payload: str = "text",
        log_id: str = "syslog",
    ) -> dict[str, Any]:
        """Add one `tpu_worker` log entry (textPayload, or jsonPayload.message with payload="json").

        Args:
            text: the message; severity: a LogSeverity name; at: aware time (None: the simulated now).

        Returns:
            The stored LogEntry JSON body.
        """
        with self.world.lock:
            when = at or self.now()
            labels = {"project_id": self.project, "zone": zone, "node_id": node_id, "worker_id": worker_id}
            self.world.log_seq += 1
            insert_id = f"sim{self.world.log_seq:010d}"
            if payload == "json":
                body = make_log_entry(
                    self.project,
                    when,
                    severity,
                    json_payload={"message": text},
                    log_id=log_id,
                    labels=labels,
                    insert_id=insert_id,
                )
            else:
                body = make_log_entry(
                    self.project, when, severity, text=text, log_id=log_id, labels=labels, insert_id=insert_id
                )
            self.world.add_logs([body])
            return body

    def log_entries(self) -> list[dict[str, Any]]:
        """Every stored LogEntry JSON body, oldest first (copies)."""
        with self.world.lock:
            return [log_entry_json(e) for e in self.world.logs]

    # ---- lifecycle
    def start(self) -> GcpSimulator:
        """Bind the port and serve in a daemon thread. Returns self."""
        if self._server is None:
            self._server = _Server((self._host, self._port), _RequestHandler)
            self._server.sim = self
            self._thread = threading.Thread(
                target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, name="gcp-sim", daemon=True
            )
            self._thread.start()
        return self

    def stop(self) -> None:
        """Stop serving and close the port."""
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> GcpSimulator:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def url(self) -> str:
        """Base URL of the running server, e.g. "http://127.0.0.1:43121" (no trailing slash)."""
        if self._server is None:
            raise RuntimeError("GcpSimulator is not started")
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    @property
    def project(self) -> str:
        return self.world.project

    # ---- faults
    def inject_fault(
        self,
        path_pattern: str,
        status: int,
        *,
        count: int = 1,
        body: str | None = None,
        delay_s: float = 0,
        after: bool = False,
        method: str | None = None,
    ) -> None:
        """Make the next `count` requests whose path (without query) matches the regex misbehave.

        Each such request first sleeps `delay_s` seconds; then, if `status` >= 400, it is answered with
        that status and `body` (default: the Google error envelope for the status); a status below 400
        (e.g. 200) with a delay answers normally after the delay, which is how to simulate a slow
        backend / client timeout.

        With `after`, the request is first carried out (e.g. the queued resource IS created) and only
        then delayed and answered with the fault: the ambiguous case where a 503 or a client timeout hides
        a change that happened. Without it the fault comes before anything changes. `method` (e.g. "POST")
        limits the fault to requests with that HTTP method.
        """
        fault = _Fault(re.compile(path_pattern), status, count, body, delay_s, after, method)
        with self._faults_lock:
            self._faults.append(fault)

    def clear_faults(self) -> None:
        """Drop all pending injected faults."""
        with self._faults_lock:
            self._faults.clear()

    def _take_fault(self, method: str, path: str) -> _Fault | None:
        with self._faults_lock:
            for fault in self._faults:
                if fault.method not in (None, method):
                    continue
                if fault.remaining > 0 and fault.pattern.search(path):
                    fault.remaining -= 1
                    return fault
        return None

    # ---- dispatch
    def dispatch(self, method: str, raw_path: str, body: bytes) -> tuple[int, bytes]:
        """Answer one request: returns (HTTP status, JSON body bytes)."""
        self.requests.append((method, raw_path))
        split = urlsplit(raw_path)
        path = unquote(split.path)
        query = {k: v[-1] for k, v in parse_qs(split.query).items()}
        fault = self._take_fault(method, path)
        if fault is not None and not fault.after:
            answer = self._fault_answer(fault)
            if answer is not None:
                return answer
        status, text = self._route(method, raw_path, path, query, body)
        if fault is not None and fault.after:
            return self._fault_answer(fault) or (status, text)
        return status, text

    @staticmethod
    def _fault_answer(fault: _Fault) -> tuple[int, bytes] | None:
        """Sleep the fault's delay; its error answer, or None when it only delays."""
        if fault.delay_s:
            time.sleep(fault.delay_s)
        if fault.status < 400:
            return None
        message = _FAULT_MESSAGES.get(fault.status, f"Simulated HTTP {fault.status}.")
        text = fault.body if fault.body is not None else json.dumps(error_envelope(fault.status, message))
        return fault.status, text.encode()

    def _route(
        self, method: str, raw_path: str, path: str, query: dict[str, str], body: bytes
    ) -> tuple[int, bytes]:
        try:
            for route_method, pattern, handler in self._routes:
                match = pattern.match(path)
                if match and route_method == method:
                    if body and "/secrets" not in path:
                        self.request_bodies.append((method, raw_path, _json_or_text(body)))
                    with self.world.lock:
                        now = self.now()
                        self.world.evolve(now)
                        result = handler(match, query, body)
                        self.world.evolve(now)
                        return 200, json.dumps(result).encode()
            if any(p.match(path) for _, p, _ in self._routes):
                raise ApiError(501, f"The simulator does not implement {method} {path}.")
            raise ApiError(404, f"The requested URL {path} was not found on this server.")
        except ApiError as exc:
            envelope = error_envelope(exc.status, exc.message, exc.status_name, exc.details)
            return exc.status, json.dumps(envelope).encode()

    # ---- handlers (called with world.lock held)
    def _list_locations(self, m: re.Match[str], query: dict[str, str], _: bytes) -> dict[str, Any]:
        w = self.world
        w.check(m["project"])
        page, token = paginate([location_json(w, z) for z in w.zones.values()], query, w.page_size)
        return {"locations": page, **({"nextPageToken": token} if token else {})}

    def _get_location(self, m: re.Match[str], query: dict[str, str], _: bytes) -> dict[str, Any]:
        self.world.check(m["project"], m["zone"])
        return location_json(self.world, self.world.zones[m["zone"]])

    def _list_queued_resources(self, m: re.Match[str], query: dict[str, str], _: bytes) -> dict[str, Any]:
        w = self.world
        w.check(m["project"], m["zone"])
        page, token = paginate(w.qrs_in(m["zone"]), query, w.page_size)
        body: dict[str, Any] = {"queuedResources": [queued_resource_json(w, qr, m["api"]) for qr in page]}
        return {**body, "nextPageToken": token} if token else body

    def _get_queued_resource(self, m: re.Match[str], query: dict[str, str], _: bytes) -> dict[str, Any]:
        w = self.world
        w.check(m["project"], m["zone"])
        return queued_resource_json(w, w.qr(m["zone"], m["id"]), m["api"])

    def _list_nodes(self, m: re.Match[str], query: dict[str, str], _: bytes) -> dict[str, Any]:
        w = self.world
        w.check(m["project"], m["zone"])
        page, token = paginate(w.nodes_in(m["zone"]), query, w.page_size)
        body: dict[str, Any] = {"nodes": [node_json(w, qr, m["api"]) for qr in page]}
        return {**body, "nextPageToken": token} if token else body

    def _get_node(self, m: re.Match[str], query: dict[str, str], _: bytes) -> dict[str, Any]:
        w = self.world
        w.check(m["project"], m["zone"])
        return node_json(w, w.node_owner(m["zone"], m["id"]), m["api"])

    def _list_accelerator_types(self, m: re.Match[str], query: dict[str, str], _: bytes) -> dict[str, Any]:
        w = self.world
        w.check(m["project"], m["zone"])
        types = [accelerator_type_json(w, m["zone"], t) for t in w.zones[m["zone"]].accelerator_types]
        page, token = paginate(types, query, w.page_size)
        return {"acceleratorTypes": page, **({"nextPageToken": token} if token else {})}

    def _get_accelerator_type(self, m: re.Match[str], query: dict[str, str], _: bytes) -> dict[str, Any]:
        w = self.world
        w.check(m["project"], m["zone"])
        if m["id"] not in w.zones[m["zone"]].accelerator_types:
            raise ApiError(404, f'Resource "{w.parent(m["zone"])}/acceleratorTypes/{m["id"]}" was not found')
        return accelerator_type_json(w, m["zone"], m["id"])

    def _get_operation(self, m: re.Match[str], query: dict[str, str], _: bytes) -> dict[str, Any]:
        w = self.world
        w.check(m["project"], m["zone"])
        return operation_json(w, w.operation(m["zone"], m["id"]), m["api"])

    # ---- TPU changes (LROs)
    def _create_queued_resource(self, m: re.Match[str], query: dict[str, str], raw: bytes) -> dict[str, Any]:
        w, zone, api = self.world, m["zone"], m["api"]
        w.check(m["project"], zone)
        qr_id = query.get("queuedResourceId", "")
        if not _RESOURCE_ID.match(qr_id):
            raise ApiError(
                400, f"Invalid queued resource id {qr_id!r}: use 1-63 lowercase letters, digits, hyphens."
            )
        if (zone, qr_id) in w.queued_resources:
            raise ApiError(409, f"Resource '{w.parent(zone)}/queuedResources/{qr_id}' already exists")
        body = _json_body(raw)
        qr = _qr_from_request(w, zone, qr_id, body)
        w.evolve(w.now)
        if qr.provisioning_model != "FLEX_START" or w.zones[zone].flex_start:  # refused below otherwise
            w.check_quota(zone, qr)
        target = f"{w.parent(zone)}/queuedResources/{qr_id}"
        done_at = w.now + w.operation_duration
        op = w.new_operation(zone, "create", target, done_at=done_at)
        if qr.provisioning_model == "FLEX_START" and not w.zones[zone].flex_start:
            op.error_code = CODE_INVALID_ARGUMENT
            op.error_message = MODEL_NOT_SUPPORTED.format(
                model="FLEX_START", type=qr.node.accelerator_type, zone=zone
            )
        else:
            w.queued_resources[(zone, qr_id)] = qr
            w.schedule(qr, w.now)
            op.response_qr = qr_id
        w.evolve(w.now)
        return operation_json(w, op, api)

    def _delete_queued_resource(self, m: re.Match[str], query: dict[str, str], _: bytes) -> dict[str, Any]:
        w, zone = self.world, m["zone"]
        w.check(m["project"], zone)
        qr = w.qr(zone, m["id"])
        force = query.get("force", "").lower() in ("true", "1")
        if qr.state != "DELETING":
            if qr.node_visible and qr.state not in ("ACCEPTED", "FAILED", "SUSPENDED") and not force:
                raise ApiError(
                    400,
                    f"Queued resource {qr.qr_id} is {qr.state} and its nodes exist: delete them first or set "
                    "force=true.",
                    status_name="FAILED_PRECONDITION",
                )
            qr.state, qr.state_initiator = "DELETING", "USER"
            qr.delete_at = w.now + w.delete_duration
            qr.node.state, qr.node.health = "DELETING", None
        done_at = qr.delete_at or w.now
        op = w.new_operation(zone, "delete", f"{w.parent(zone)}/queuedResources/{qr.qr_id}", done_at=done_at)
        w.evolve(w.now)
        return operation_json(w, op, m["api"])

    def _reset_queued_resource(self, m: re.Match[str], query: dict[str, str], _: bytes) -> dict[str, Any]:
        w, zone = self.world, m["zone"]
        w.check(m["project"], zone)
        qr = w.qr(zone, m["id"])
        if qr.state != "FAILED":
            raise ApiError(
                400,
                f"Queued resource {qr.qr_id} is {qr.state}: only a FAILED queued resource can be reset"
                + (
                    " (a SUSPENDED one has lost its resources: delete it and create it again)."
                    if qr.state == "SUSPENDED"
                    else "."
                ),
                status_name="FAILED_PRECONDITION",
            )
        qr.state, qr.state_initiator = _WAITING, "USER"
        qr.error_code = qr.error_message = None
        qr.active_time = None
        qr.node.state, qr.node.health, qr.node.preempt_at = "CREATING", None, None
        qr.node.pending_state = qr.node.pending_at = None
        if qr.valid_for is not None:
            qr.valid_until = w.now + qr.valid_for
        w.schedule(qr, w.now)
        op = w.new_operation(
            zone,
            "reset",
            f"{w.parent(zone)}/queuedResources/{qr.qr_id}",
            done_at=w.now + w.operation_duration,
        )
        op.response_qr = qr.qr_id
        w.evolve(w.now)
        return operation_json(w, op, m["api"])

    def _node_change(self, m: re.Match[str], verb: str, need: str, during: str, then: str) -> dict[str, Any]:
        w, zone = self.world, m["zone"]
        w.check(m["project"], zone)
        qr = w.node_owner(zone, m["id"])
        if qr.state != "ACTIVE" or qr.node.state != need:
            raise ApiError(
                400,
                f"Node {qr.node.node_id} is {qr.node.state}: it must be {need} to {verb}.",
                status_name="FAILED_PRECONDITION",
            )
        done_at = w.now + w.operation_duration
        qr.node.state, qr.node.pending_state, qr.node.pending_at = during, then, done_at
        op = w.new_operation(zone, verb, f"{w.parent(zone)}/nodes/{qr.node.node_id}", done_at=done_at)
        op.response_node = qr.node.node_id
        w.evolve(w.now)
        return operation_json(w, op, m["api"])

    def _start_node(self, m: re.Match[str], query: dict[str, str], _: bytes) -> dict[str, Any]:
        return self._node_change(m, "start", "STOPPED", "STARTING", "READY")

    def _stop_node(self, m: re.Match[str], query: dict[str, str], _: bytes) -> dict[str, Any]:
        return self._node_change(m, "stop", "READY", "STOPPING", "STOPPED")

    # ---- Cloud Quotas
    def _list_quota_infos(self, m: re.Match[str], query: dict[str, str], _: bytes) -> dict[str, Any]:
        w = self.world
        w.check(m["project"])
        infos = quota_infos(w) if m["service"] == QUOTA_SERVICE else {}
        items = [quota_info_json(w, quota_id, values) for quota_id, values in infos.items()]
        page, token = paginate(items, query, w.page_size)
        return {"quotaInfos": page, **({"nextPageToken": token} if token else {})}

    def _get_quota_info(self, m: re.Match[str], query: dict[str, str], _: bytes) -> dict[str, Any]:
        w = self.world
        w.check(m["project"])
        infos = quota_infos(w) if m["service"] == QUOTA_SERVICE else {}
        if m["id"] not in infos:
            raise ApiError(404, f"QuotaInfo {m['id']} of service {m['service']} was not found.")
        return quota_info_json(w, m["id"], infos[m["id"]])

    # ---- Cloud Logging
    def _list_log_entries(self, m: re.Match[str], query: dict[str, str], raw: bytes) -> dict[str, Any]:
        """entries.list: resourceNames, filter, orderBy ("timestamp asc" | "timestamp desc"), pageSize
        (default 50, at most 1000), pageToken."""
        w = self.world
        self._charge_log_read()
        body = _json_body(raw)
        names = body.get("resourceNames") or [f"projects/{p}" for p in body.get("projectIds") or []]
        if not names:
            raise ApiError(400, "resourceNames: at least one resource name is required.")
        for name in names:
            match = re.match(r"^projects/([^/]+)$", str(name))
            if match is None:
                raise ApiError(400, f"Invalid resource name {name!r}: the simulator serves projects/* only.")
            w.check(match.group(1))
        filter_text = str(body.get("filter") or "")
        order = " ".join(str(body.get("orderBy") or "timestamp asc").lower().split())
        if order not in ("timestamp asc", "timestamp desc", "timestamp"):
            raise ApiError(
                400, f'Invalid orderBy {body.get("orderBy")!r}: use "timestamp asc" or "timestamp desc".'
            )
        descending = order == "timestamp desc"
        key = (filter_text, descending)
        matched = w.log_cache.get(key)
        if matched is None:
            try:
                predicate = parse_log_filter(filter_text)
            except FilterError as exc:
                raise ApiError(400, f"Unparseable filter: {exc}") from None
            matched = [e for e in w.logs if predicate(e)]
            if descending:
                matched.reverse()
            if len(w.log_cache) > 64:
                w.log_cache.clear()
            w.log_cache[key] = matched
        try:
            size = int(body.get("pageSize") or LOG_PAGE_SIZE_DEFAULT)
        except (TypeError, ValueError):
            raise ApiError(400, "Invalid pageSize.") from None
        if size < 0:  # "If the value is negative, the request is rejected." (entries.list, pageSize)
            raise ApiError(400, f"Invalid pageSize {size}: it must not be negative.")
        size = min(max(size, 1), LOG_PAGE_SIZE_MAX)
        signature = f"{zlib.crc32(repr(key).encode()):08x}"
        offset = 0
        token = body.get("pageToken")
        if token:
            try:
                decoded = json.loads(base64.urlsafe_b64decode(str(token).encode()))
                offset, token_signature = int(decoded["o"]), str(decoded["s"])
            except (ValueError, KeyError, TypeError, binascii.Error):
                raise ApiError(400, "Invalid page token.") from None
            if token_signature != signature or not 0 <= offset <= len(matched):
                raise ApiError(400, "Invalid page token: the query changed.")
        page = matched[offset : offset + size]
        result: dict[str, Any] = {}
        if page:
            result["entries"] = [log_entry_json(e) for e in page]
        if offset + size < len(matched):
            next_token = json.dumps({"o": offset + size, "s": signature}).encode()
            result["nextPageToken"] = base64.urlsafe_b64encode(next_token).decode()
        return result

    def _charge_log_read(self) -> None:
        """Count one entries.list call against the project's read quota: more than `log_read_quota` calls in
        the last 60 simulated seconds are refused with Google's 429 (body as captured in
        tests/fixtures/cases/logging-read-quota-429.json). Refused calls do not count."""
        w = self.world
        horizon = w.now - timedelta(seconds=60)
        while w.log_reads and w.log_reads[0] <= horizon:
            w.log_reads.popleft()
        if len(w.log_reads) >= w.log_read_quota:
            number = zlib.crc32(w.project.encode()) % 10**12  # a simulated project number
            metadata = {
                "quota_limit": "ReadRequestsPerMinutePerProject",
                "quota_limit_value": str(w.log_read_quota),
                "quota_metric": "logging.googleapis.com/read_requests",
                "service": "logging.googleapis.com",
                "consumer": f"projects/{number}",
            }
            raise ApiError(
                429,
                "Quota exceeded for quota metric 'Read requests' and limit 'Read requests per minute' of "
                f"service 'logging.googleapis.com' for consumer 'project_number:{number}'.",
                details=[
                    {
                        "@type": "type.googleapis.com/google.rpc.ErrorInfo",
                        "reason": "RATE_LIMIT_EXCEEDED",
                        "domain": "googleapis.com",
                        "metadata": metadata,
                    }
                ],
            )
        w.log_reads.append(w.now)

    # ---- Secret Manager (payloads never appear in a message)
    def _secret(self, m: re.Match[str]) -> SimSecret:
        w = self.world
        w.check(m["project"])
        secret = w.secrets.get(m["secret"])
        if secret is None:
            raise ApiError(
                404, f"Secret [projects/{w.project}/secrets/{m['secret']}] not found or has no versions."
            )
        return secret

    def _create_secret(self, m: re.Match[str], query: dict[str, str], raw: bytes) -> dict[str, Any]:
        w = self.world
        w.check(m["project"])
        secret_id = query.get("secretId", "")
        if not _SECRET_ID.match(secret_id):
            raise ApiError(400, "Invalid secret id: use 1-255 letters, digits, hyphens and underscores.")
        if secret_id in w.secrets:
            raise ApiError(409, f"Secret [projects/{w.project}/secrets/{secret_id}] already exists.")
        body = _json_body(raw)
        if not isinstance(body.get("replication"), dict) or not body["replication"]:
            raise ApiError(400, "Secret.replication is required.")
        labels = body.get("labels") or {}
        w.secrets[secret_id] = SimSecret(secret_id, w.now, labels={str(k): str(v) for k, v in labels.items()})
        return secret_json(w, w.secrets[secret_id])

    def _get_secret(self, m: re.Match[str], query: dict[str, str], _: bytes) -> dict[str, Any]:
        return secret_json(self.world, self._secret(m))

    def _add_secret_version(self, m: re.Match[str], query: dict[str, str], raw: bytes) -> dict[str, Any]:
        secret = self._secret(m)
        payload = _json_body(raw).get("payload") or {}
        try:
            data = base64.b64decode(str(payload.get("data", "")), validate=True)
        except (binascii.Error, ValueError):
            raise ApiError(400, "Invalid value at 'payload.data': not valid base64.") from None
        checksum = payload.get("dataCrc32c")
        if checksum is not None and str(checksum) != str(crc32c(data)):
            raise ApiError(400, "The checksum in field payload.data_crc32c is incorrect.")
        secret.versions.append((data, self.world.now, checksum is not None))
        return secret_version_json(self.world, secret, len(secret.versions))

    def _version_number(self, secret: SimSecret, version: str) -> int:
        number = len(secret.versions) if version == "latest" else int(version) if version.isdigit() else 0
        if not 1 <= number <= len(secret.versions):
            raise ApiError(
                404,
                f"Secret Version [projects/{self.world.project}/secrets/{secret.secret_id}/versions/"
                f"{version}] not found.",
            )
        return number

    def _get_secret_version(self, m: re.Match[str], query: dict[str, str], _: bytes) -> dict[str, Any]:
        secret = self._secret(m)
        return secret_version_json(self.world, secret, self._version_number(secret, m["version"]))

    def _access_secret(self, m: re.Match[str], query: dict[str, str], _: bytes) -> dict[str, Any]:
        secret = self._secret(m)
        number = self._version_number(secret, m["version"])
        data = secret.versions[number - 1][0]
        return {
            "name": f"projects/{self.world.project}/secrets/{secret.secret_id}/versions/{number}",
            "payload": {"data": base64.b64encode(data).decode(), "dataCrc32c": str(crc32c(data))},
        }


# --------------------------------------------------------------------------------------------------
# Request parsing
# --------------------------------------------------------------------------------------------------


def _json_or_text(raw: bytes) -> Any:
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")


def _json_body(raw: bytes) -> dict[str, Any]:
    """The request's JSON object (an empty body is {}). Raises ApiError 400 for anything else."""
    if not raw:
        return {}
    try:
        body = json.loads(raw)
    except ValueError:
        raise ApiError(400, "Invalid JSON payload received.") from None
    if not isinstance(body, dict):
        raise ApiError(400, "Invalid JSON payload received. Expected an object.")
    return body


def _enum_name(value: Any, ints: dict[int, str]) -> str:
    """An enum field given as a name (google-api-python-client) or an int (GAPIC REST)."""
    if isinstance(value, bool):
        raise ApiError(400, f"Invalid enum value {value!r}.")
    if isinstance(value, int):
        if value not in ints:
            raise ApiError(400, f"Invalid enum value {value}.")
        return ints[value]
    return str(value)


def _accelerator_type_of(node: dict[str, Any]) -> str:
    """`node.acceleratorType`, else one built from `node.acceleratorConfig{type, topology}`."""
    if node.get("acceleratorType"):
        return str(node["acceleratorType"])
    config = node.get("acceleratorConfig") or {}
    family_enum = _enum_name(config.get("type", 0), {0: "", **_ACCEL_TYPE_INTS})
    family = {v: k for k, v in _ACCEL_FAMILY.items()}.get(family_enum)
    topology = str(config.get("topology") or "")
    if not family or not re.match(r"^\d+(x\d+)+$", topology):
        raise ApiError(
            400, "Either node.acceleratorType or node.acceleratorConfig{type, topology} is required."
        )
    chips = 1
    for part in topology.split("x"):
        chips *= int(part)
    return f"{family}-{chips * 2 if family in ('v4', 'v5p') else chips}"


def _request_duration(value: Any, field_name: str) -> timedelta:
    match = re.match(r"^(\d+(?:\.\d+)?)s$", str(value))
    if not match:
        raise ApiError(400, f"Invalid value at '{field_name}': expected a duration such as \"3600s\".")
    return timedelta(seconds=float(match.group(1)))


def _qr_from_request(w: World, zone: str, qr_id: str, body: dict[str, Any]) -> SimQueuedResource:
    """Validate a QueuedResource create body (v2alpha1 or v2) and build the QR it asks for.

    Raises:
        ApiError: 400 INVALID_ARGUMENT for a malformed body, or (the real text) for an accelerator type the
            zone does not offer.
    """
    specs = (body.get("tpu") or {}).get("nodeSpec") or []
    if len(specs) != 1 or not isinstance(specs[0], dict):
        raise ApiError(400, "tpu.nodeSpec must hold exactly one node spec (multi-node is not simulated).")
    spec = specs[0]
    node_id = str(spec.get("nodeId") or "")
    if not _RESOURCE_ID.match(node_id):
        raise ApiError(400, f"Invalid tpu.nodeSpec[0].nodeId {node_id!r}.")
    if spec.get("parent") != w.parent(zone):
        raise ApiError(400, f"tpu.nodeSpec[0].parent must be {w.parent(zone)}.")
    node = spec.get("node") or {}
    accelerator_type = _accelerator_type_of(node)
    if accelerator_type not in w.zones[zone].accelerator_types:
        raise ApiError(400, ACCELERATOR_NOT_IN_ZONE.format(type=accelerator_type, zone=zone))
    if not node.get("runtimeVersion"):
        raise ApiError(400, "tpu.nodeSpec[0].node.runtimeVersion is required.")
    model = _enum_name(
        body.get("provisioningModel", "PROVISIONING_MODEL_UNSPECIFIED"), _PROVISIONING_MODEL_INTS
    )
    if model not in (*PROVISIONING_MODELS, "PROVISIONING_MODEL_UNSPECIFIED"):
        raise ApiError(400, f"Invalid value at 'provisioning_model': {model!r}.")
    guaranteed = body.get("guaranteed") or {}
    if model == "PROVISIONING_MODEL_UNSPECIFIED" or (model == "STANDARD" and guaranteed.get("reserved")):
        if "spot" in body:
            model = "SPOT"
        elif guaranteed.get("reserved") or body.get("reservationName"):
            model = "RESERVATION_BOUND"
        else:
            model = "STANDARD"
    run = body.get("runDuration") or {}
    max_run = _request_duration(run["maxRunDuration"], "run_duration.max_run_duration") if run else None
    if model == "FLEX_START" and max_run is None:
        raise ApiError(400, "runDuration.maxRunDuration is required for the FLEX_START provisioning model.")
    if max_run is not None and model != "FLEX_START":
        raise ApiError(400, "runDuration is only supported with the FLEX_START provisioning model.")
    if max_run is not None and not timedelta(0) < max_run <= MAX_RUN_DURATION_LIMIT:
        raise ApiError(400, "runDuration.maxRunDuration must be more than 0s and at most 7 days.")
    policy = body.get("queueingPolicy") or {}
    if len(policy) > 1:
        raise ApiError(400, "queueingPolicy: only one of its start timing constraints may be set.")
    valid_for = (
        _request_duration(policy["validUntilDuration"], "queueing_policy.valid_until_duration")
        if "validUntilDuration" in policy
        else None
    )
    valid_until = w.now + valid_for if valid_for is not None else None
    if "validUntilTime" in policy:
        valid_until = _parse_request_time(policy["validUntilTime"])
    labels = _request_labels(node.get("labels") or {})
    network = node.get("networkConfig") or {}
    account = node.get("serviceAccount")
    reservation = str(body.get("reservationName") or "").rsplit("/", 1)[-1] or None
    return SimQueuedResource(
        qr_id=qr_id,
        zone=zone,
        state=_WAITING,
        state_initiator="USER",
        provisioning_model=model,
        create_time=w.now,
        node=SimNode(
            node_id=node_id,
            accelerator_type=accelerator_type,
            runtime_version=str(node["runtimeVersion"]),
            state="CREATING",
            health=None,
            enable_external_ips=bool(network.get("enableExternalIps", False)),
            network=str(network["network"]) if network.get("network") else None,
            labels=labels,
            metadata={str(k): str(v) for k, v in (node.get("metadata") or {}).items()},
            service_account=dict(account) if isinstance(account, dict) and account else None,
        ),
        max_run_duration=max_run,
        valid_until=valid_until,
        valid_for=valid_for,
        reservation=reservation if reservation != "-" else None,
    )


# Label rules of Google Cloud (https://cloud.google.com/compute/docs/labeling-resources#requirements):
# keys 1-63 chars starting with a lowercase letter; keys and values lowercase letters, digits, _ and -;
# values at most 63 chars; at most 64 labels.
_LABEL_KEY = re.compile(r"^[a-z][a-z0-9_-]{0,62}$")
_LABEL_VALUE = re.compile(r"^[a-z0-9_-]{0,63}$")


def _request_labels(raw: Any) -> dict[str, str]:
    """The node labels of a create body, checked as Google checks them (400 INVALID_ARGUMENT)."""
    if not isinstance(raw, dict) or len(raw) > 64:
        raise ApiError(400, "tpu.nodeSpec[0].node.labels must be a map of at most 64 labels.")
    for key, value in raw.items():
        if not _LABEL_KEY.match(str(key)) or not _LABEL_VALUE.match(str(value)):
            raise ApiError(
                400,
                f"Invalid label {key!r}={value!r}: keys and values must be lowercase letters, digits, "
                "underscores or dashes, at most 63 characters, keys starting with a letter.",
            )
    return {str(k): str(v) for k, v in raw.items()}


def _parse_request_time(value: Any) -> datetime:
    try:
        return datetime.fromisoformat(str(value).replace("Z", "+00:00")).astimezone(UTC)
    except ValueError:
        raise ApiError(400, f"Invalid timestamp {value!r}.") from None
