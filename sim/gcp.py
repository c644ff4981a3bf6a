"""Local SIMULATOR of the Google Cloud TPU REST API (no Google project is contacted).

`GcpSimulator` serves, on one 127.0.0.1 port, the subset of `tpu.googleapis.com` that the bot reads, in
the exact JSON shapes of the discovery documents google-api-python-client ships (`tpu.v2alpha1.json`,
`tpu.v2.json`), so the REAL clients can be pointed at it by changing only the endpoint
(`ops.google.tpu_v2alpha1(url)`, `ops.google.tpu_v2(url)`):

    GET /{v2alpha1|v2}/projects/{p}/locations                      locations.list (the scenario's zones)
    GET /{v}/projects/{p}/locations/{zone}                         locations.get
    GET /{v}/projects/{p}/locations/{zone}/queuedResources[/{id}]  list (pageSize/pageToken) / get
    GET /{v}/projects/{p}/locations/{zone}/nodes[/{id}]            list / get
    GET /{v}/projects/{p}/locations/{zone}/acceleratorTypes[/{t}]  list / get
    GET /{v}/projects/{p}/locations/{zone}/operations/{op}         operations.get

v2 responses drop what only v2alpha1 defines (provisioningModel, runDuration, bestEffort,
guaranteed.reserved, schedulingConfig.provisioningModel/terminationTimestamp/reservationName). Errors
use the Google envelope `{"error": {"code": 404, "message": "...", "status": "NOT_FOUND"}}`.

The world comes from a scenario's `google` section (see `sim/scenarios/default.yaml`); times there are
relative to the moment the simulator is built (`created: -90m`, `valid_until: 3h`, `max_run_duration: 4h`).
Besides the keys used in the default scenario, the section accepts:

    page_size: 50                 # default page size of list calls without pageSize
    operations:                   # finished (or running) LROs served by operations.get
      - {id: operation-1, zone: us-east5-a, verb: create, queued_resource: gemma4-qr,
         created: -91m, done: true, error: {code: 8, message: "..."}}
    queued_resources[].reservation: my-res        # reservationName (RESERVATION_BOUND)
    queued_resources[].node.health_description / internal_ip / external_ip (a string or a list)
    queued_resources[].node.enable_external_ips: true

Layout, for whoever extends it (create/delete/reset LROs, stockouts, provisioning delays, Cloud Logging
`POST /v2/entries:list`, Cloud Quotas, Secret Manager): the world state is a small dataclass model
(`World`) guarded by `World.lock`; JSON rendering is in the `*_json` functions; HTTP routing is the
`GcpSimulator._routes` table of (method, path regex, handler). Add a route and a handler method; the
handler reads or changes the `World` under its lock and returns a JSON-able dict or raises `ApiError`.
"""

from __future__ import annotations

import json
import re
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

from sim.scenario import duration

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
PROVISIONING_MODELS = ("STANDARD", "SPOT", "RESERVATION_BOUND", "FLEX_START")
# QR states whose nodes exist (are returned by nodes.list/get).
NODE_VISIBLE_STATES = frozenset({"ACTIVE", "PROVISIONING"})
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

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


def error_envelope(status: int, message: str) -> dict[str, Any]:
    """The JSON body Google sends with an HTTP error: {"error": {code, message, status}}."""
    return {"error": {"code": status, "message": message, "status": STATUS_NAMES.get(status, "UNKNOWN")}}


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


@dataclass
class SimZone:
    """A TPU zone of the simulated project and the accelerator types it offers."""

    name: str
    accelerator_types: list[str] = field(default_factory=list)

    @property
    def region(self) -> str:
        return self.name.rsplit("-", 1)[0]


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


@dataclass
class SimQueuedResource:
    """A queued resource (QR) with one node spec."""

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

    @property
    def termination_time(self) -> datetime | None:
        """runDuration.terminationTime: createTime + maxRunDuration once ACTIVE (flex-start only)."""
        if self.max_run_duration is None or self.state not in ("ACTIVE", "SUSPENDING"):
            return None
        return self.create_time + self.max_run_duration

    @property
    def node_visible(self) -> bool:
        return self.state in NODE_VISIBLE_STATES


@dataclass
class SimOperation:
    """A long-running operation as returned by operations.get."""

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


@dataclass
class World:
    """The simulated Google state. Read and change it only while holding `lock`."""

    project: str
    start: datetime
    zones: dict[str, SimZone] = field(default_factory=dict)
    queued_resources: dict[tuple[str, str], SimQueuedResource] = field(default_factory=dict)
    operations: dict[tuple[str, str], SimOperation] = field(default_factory=dict)
    page_size: int = DEFAULT_PAGE_SIZE
    lock: threading.RLock = field(default_factory=threading.RLock, repr=False)

    @classmethod
    def from_scenario(cls, scenario: dict[str, Any], start: datetime) -> World:
        """Build the world from a scenario mapping (see the module docstring for the `google` keys).

        Raises:
            ValueError: a required key is missing or a value is malformed.
        """
        google = scenario.get("google") or {}
        world = cls(project=str(scenario["project"]), start=start)
        world.page_size = int(google.get("page_size", DEFAULT_PAGE_SIZE))
        for name, spec in (google.get("zones") or {}).items():
            world.zones[name] = SimZone(name, list((spec or {}).get("accelerator_types", [])))
        for spec in google.get("queued_resources") or []:
            qr = _qr_from_scenario(spec, start)
            if qr.zone not in world.zones:
                world.zones[qr.zone] = SimZone(qr.zone, [qr.node.accelerator_type])
            world.queued_resources[(qr.zone, qr.qr_id)] = qr
        for spec in google.get("operations") or []:
            op = _op_from_scenario(spec, world, start)
            world.operations[(op.zone, op.op_id)] = op
        return world

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


def _qr_key(qr: SimQueuedResource) -> str:
    return qr.qr_id


def _ips(value: Any) -> list[str]:
    if value is None:
        return []
    return [str(v) for v in value] if isinstance(value, list) else [str(value)]


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
        internal_ips=_ips(node_spec.get("internal_ip", "10.0.0.2")),
        external_ips=_ips(node_spec.get("external_ip")),
        enable_external_ips=bool(node_spec.get("enable_external_ips", True)),
        create_time=created + duration(node_spec.get("created_after", "2m")),
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
                    },
                }
            ]
        },
        "state": state,
    }
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
    return body


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
    else:
        body["response"] = {"@type": "type.googleapis.com/google.protobuf.Empty"}
    return body


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
# HTTP server
# --------------------------------------------------------------------------------------------------


@dataclass
class _Fault:
    pattern: re.Pattern[str]
    status: int
    remaining: int
    body: str | None
    delay_s: float


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
    """The simulated Google TPU API server (see the module docstring).

    Args:
        scenario: a scenario mapping (`sim.scenario.load()`); uses `project` and the `google` section.
        host, port: where to listen; port 0 picks a free port (read it back from `url`).
        now: clock returning an aware UTC datetime; scenario times are relative to its value at
            construction. Defaults to the wall clock.

    Use `start()` / `stop()` (or a `with` block), then point the clients at `url`.
    """

    def __init__(
        self,
        scenario: dict[str, Any],
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        now: Callable[[], datetime] | None = None,
    ) -> None:
        self._now = now or (lambda: datetime.now(UTC))
        self.world = World.from_scenario(scenario, self._now())
        self._host, self._port = host, port
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None
        self._faults: list[_Fault] = []
        self._faults_lock = threading.Lock()
        self.requests: list[tuple[str, str]] = []  # (method, path with query) of every request seen
        self._routes: list[tuple[str, re.Pattern[str], Handler]] = [
            ("GET", re.compile(_V + r"$"), self._list_locations),
            ("GET", re.compile(_Z + r"$"), self._get_location),
            ("GET", re.compile(_Z + r"/queuedResources$"), self._list_queued_resources),
            ("GET", re.compile(_Z + r"/queuedResources/(?P<id>[^/:]+)$"), self._get_queued_resource),
            ("GET", re.compile(_Z + r"/nodes$"), self._list_nodes),
            ("GET", re.compile(_Z + r"/nodes/(?P<id>[^/:]+)$"), self._get_node),
            ("GET", re.compile(_Z + r"/acceleratorTypes$"), self._list_accelerator_types),
            ("GET", re.compile(_Z + r"/acceleratorTypes/(?P<id>[^/:]+)$"), self._get_accelerator_type),
            ("GET", re.compile(_Z + r"/operations/(?P<id>[^/:]+)$"), self._get_operation),
        ]

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
        self, path_pattern: str, status: int, *, count: int = 1, body: str | None = None, delay_s: float = 0
    ) -> None:
        """Make the next `count` requests whose path (without query) matches the regex misbehave.

        Each such request first sleeps `delay_s` seconds; then, if `status` >= 400, it is answered with
        that status and `body` (default: the Google error envelope for the status); a status below 400
        (e.g. 200) with a delay answers normally after the delay, which is how to simulate a slow
        backend / client timeout.
        """
        with self._faults_lock:
            self._faults.append(_Fault(re.compile(path_pattern), status, count, body, delay_s))

    def clear_faults(self) -> None:
        """Drop all pending injected faults."""
        with self._faults_lock:
            self._faults.clear()

    def _take_fault(self, path: str) -> _Fault | None:
        with self._faults_lock:
            for fault in self._faults:
                if fault.remaining > 0 and fault.pattern.search(path):
                    fault.remaining -= 1
                    return fault
        return None

    # ---- dispatch
    def dispatch(self, method: str, raw_path: str, body: bytes) -> tuple[int, bytes]:
        """Answer one request: returns (HTTP status, JSON body bytes)."""
        self.requests.append((method, raw_path))
        split = urlsplit(raw_path)
        path = split.path
        query = {k: v[-1] for k, v in parse_qs(split.query).items()}
        fault = self._take_fault(path)
        if fault is not None:
            if fault.delay_s:
                time.sleep(fault.delay_s)
            if fault.status >= 400:
                message = _FAULT_MESSAGES.get(fault.status, f"Simulated HTTP {fault.status}.")
                text = (
                    fault.body
                    if fault.body is not None
                    else json.dumps(error_envelope(fault.status, message))
                )
                return fault.status, text.encode()
        try:
            for route_method, pattern, handler in self._routes:
                match = pattern.match(path)
                if match and route_method == method:
                    with self.world.lock:
                        return 200, json.dumps(handler(match, query, body)).encode()
            if any(p.match(path) for _, p, _ in self._routes):
                raise ApiError(501, f"The simulator does not implement {method} {path}.")
            raise ApiError(404, f"The requested URL {path} was not found on this server.")
        except ApiError as exc:
            return exc.status, json.dumps(error_envelope(exc.status, exc.message)).encode()

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
