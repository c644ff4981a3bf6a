"""The simulated Google state (SIMULATED): zones, queued resources and their nodes, operations, secrets
and stored log entries, built from a scenario's `google` section and evolved lazily on the simulated clock.

Scenario keys (times relative to the simulator's start; the default scenario is
`sim/scenarios/default.yaml`), besides those used there:

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
    queued_resources[].node.maintenance: {type: SCHEDULED, starts: 3h, lasts: 4h, can_reschedule: true}
                                  # host maintenance announced (Node.upcomingMaintenance): PENDING until
                                  # `starts`, then ONGOING (canReschedule false, health
                                  # UNHEALTHY_MAINTENANCE) for `lasts`, then gone (HEALTHY); times from
                                  # the simulator's start (`GcpSimulator.schedule_maintenance` at run time)
    queued_resources[].node.labels: {managed-by: tpu-chatops, ...}   # node labels, echoed in nodeSpec
    secrets: {hf-token: "value"}  # Secret Manager secrets with one version each
    logs: ...                     # Cloud Logging entries, GENERATED (see sim/gcp/loggen.py)
    logging_reads_per_minute: 60  # entries.list quota (see LOG_READS_PER_MINUTE)

Lifecycle, computed lazily from the simulated clock on every request (no background thread): a created
(or reset) queued resource is WAITING_FOR_RESOURCES, then follows its zone's `capacity`; scenario QRs that
are WAITING_FOR_RESOURCES follow it from their `created` time. An ACTIVE flex-start QR reaching
(time it became ACTIVE, else createTime) + maxRunDuration goes SUSPENDED with stateInitiator SERVICE and its
node is deleted. A preempted spot node (scenario `preempt_after`, zone `spot_preempt_after`, or
`preempt()`) makes its QR SUSPENDING (stateInitiator SERVICE, node PREEMPTED) and `SUSPEND_DURATION` later
SUSPENDED with the node deleted ("SUSPENDED: the resources have been deleted", cloud.google.com/tpu/docs/
queued-resources; spot TPUs "must be recreated" after preemption, cloud.google.com/tpu/docs/spot). A create
that would take a zone over its Cloud Quotas limit is refused at once with 429 RESOURCE_EXHAUSTED
"Quota '<id>' exhausted. Limit N in zone Z." (spot and flex-start count against the preemptible id; every
queued resource of the zone holds its chips until deleted, FAILED and SUSPENDED ones included).

Read and change a `World` only while holding `World.lock`; the API modules (tpu, quotas, secrets, logging)
serve requests on it through their `ROUTES`.
"""

from __future__ import annotations

import re
import threading
import zlib
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sim.gcp.api import DEFAULT_PAGE_SIZE, ApiError
from sim.gcp.logentry import SimLogEntry, insert_id_of, make_log_entry
from sim.gcp.logfilter import stored_log_entry
from sim.gcp.loggen import generate_logs, stream_log_entries
from sim.scenario import duration
from sim.vllm.metrics import SEEDED_PREEMPTIONS

LOG_READS_PER_MINUTE = 60
"""entries.list calls allowed per minute per project: Cloud Logging's default "Read requests per minute"
quota (https://cloud.google.com/logging/quotas#api-limits); `google.logging_reads_per_minute` overrides it."""
PROVISIONING_MODELS = ("STANDARD", "SPOT", "RESERVATION_BOUND", "FLEX_START")
# QR states whose nodes exist (are returned by nodes.list/get).
NODE_VISIBLE_STATES = frozenset({"ACTIVE", "PROVISIONING", "SUSPENDING"})
# Real error text (tpu-create-zone-stockout.txt in sim/cases), with the zone substituted.
STOCKOUT = (
    'There is no more capacity in the zone "{zone}"; you can try in another zone where Cloud TPU Nodes are '
    "offered (see https://cloud.google.com/tpu/docs/regions)"
)
# google.rpc.Code of a stockout in failedData.
CODE_RESOURCE_EXHAUSTED = 8
WAITING = "WAITING_FOR_RESOURCES"
_PROVISIONING_DEFAULT = timedelta(minutes=1)


def zone_capacity(value: Any) -> tuple[timedelta | None, timedelta | None]:
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
        after, provisioning = zone_capacity(spec.get("capacity"))
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
class SimMaintenance:
    """Host maintenance announced for a node: its type, window and whether it can be started early; the
    status follows the clock (see `SimNode.maintenance_status`)."""

    kind: str
    start: datetime
    end: datetime
    can_reschedule: bool = True
    latest_start: datetime | None = None

    @classmethod
    def from_scenario(cls, spec: dict[str, Any], start: datetime) -> SimMaintenance:
        begins = start + duration(spec.get("starts", "3h"))
        kind = str(spec.get("type", "SCHEDULED"))
        if kind not in ("SCHEDULED", "UNSCHEDULED"):
            raise ValueError(f"maintenance type {kind!r}: use SCHEDULED or UNSCHEDULED")
        return cls(
            kind=kind,
            start=begins,
            end=begins + duration(spec.get("lasts", "4h")),
            can_reschedule=bool(spec.get("can_reschedule", True)),
            latest_start=begins + duration(spec["latest_after"]) if "latest_after" in spec else None,
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
    maintenance: SimMaintenance | None = None
    gone: bool = False  # deleted behind its ACTIVE queued resource's back (the API lists the QR, no node)
    # "namespace/key" -> value, as the VM's guest agent writes them (e.g. "hostkeys/ssh-ed25519"); a new
    # node (a recreated one too) starts with none.
    guest_attributes: dict[str, str] = field(default_factory=dict)

    def maintenance_status(self, now: datetime) -> str | None:
        """PENDING before the announced window, ONGOING inside it, None without one (or after it)."""
        if self.maintenance is None or self.maintenance.end <= now:
            return None
        return "PENDING" if now < self.maintenance.start else "ONGOING"


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
        return self.state in NODE_VISIBLE_STATES and not self.node.gone


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
    # (filter, descending) -> its sim.gcp.logging.LogScan, the matches found so far
    log_cache: dict[tuple[str, bool], object] = field(default_factory=dict, repr=False)
    # positions in `logs` by insertId hash bucket (sim.gcp.logging.sample_candidates), built on first use
    log_sample_index: list[list[int]] | None = field(default=None, repr=False)
    quota_defaults: dict[str, int] = field(default_factory=dict)
    log_read_quota: int = LOG_READS_PER_MINUTE
    log_reads: deque[datetime] = field(default_factory=deque, repr=False)  # accepted entries.list calls
    log_reads_served: int = 0  # entries.list calls answered since the start (429s apart)
    # (answers left, entries each keeps): searches cut short (GcpSimulator.cut_log_searches)
    log_search_cuts: tuple[int, int] = (0, 0)
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
            if qr.state == WAITING:
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
                serving_since=serving_since(scenario, start),
                serving_preemptions=SEEDED_PREEMPTIONS,
            )
            bodies = world.since_node_created(
                bodies, str(logs.get("node_id") or (first.node.node_id if first else ""))
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

    def since_node_created(self, bodies: list[dict[str, Any]], node_id: str) -> list[dict[str, Any]]:
        """The generated entries of `node_id` from its creation on: a VM writes nothing before it exists,
        so a generator window reaching further back (noise over 2h, a case over 6h) is cut at the node's
        `createTime`, the entries after it staying as drawn. Entries of a node the scenario does not
        create are all kept.

        Args:
            bodies: LogEntry JSON bodies (`timestamp` RFC 3339).
            node_id: the node the generated entries are labelled with.
        """
        born = next(
            (qr.node.create_time for qr in self.queued_resources.values() if qr.node.node_id == node_id), None
        )
        if born is None:
            return bodies
        return [body for body in bodies if datetime.fromisoformat(body["timestamp"]) >= born]

    def add_logs(self, bodies: list[dict[str, Any]]) -> None:
        """Store LogEntry JSON bodies (kept sorted by timestamp, then insertion order)."""
        for body in bodies:
            self.log_seq += 1
            self.logs.append(stored_log_entry(body, self.log_seq))
        self.logs.sort(key=_log_key)
        self.log_cache.clear()
        self.log_sample_index = None

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
        if qr.state == WAITING and qr.requested_at is not None:
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
            _evolve_maintenance(node, now)
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


def _evolve_maintenance(node: SimNode, now: datetime) -> None:
    """A READY node is UNHEALTHY_MAINTENANCE inside its maintenance window and HEALTHY again after it (the
    announcement then disappears)."""
    status = node.maintenance_status(now)
    if status == "ONGOING" and node.state == "READY":
        node.health, node.health_description = "UNHEALTHY_MAINTENANCE", "host maintenance is under way"
    elif status is None and node.maintenance is not None:
        node.maintenance = None
        if node.state == "READY":
            node.health, node.health_description = "HEALTHY", ""


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
    return entry.timestamp, insert_id_of(entry)


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


def serving_since(scenario: dict[str, Any], start: datetime) -> datetime | None:
    """When the vLLM container serving now started: the scenario's `host` container named its
    `linked_container` (default `vllm`), if running (its `started`, relative to `start`); else None."""
    host = scenario.get("host") or {}
    name = host.get("linked_container", "vllm")
    running = next(
        (c for c in host.get("containers") or [] if c.get("name") == name and c.get("state") == "running"),
        None,
    )
    return start + duration(running.get("started", "0s")) if running else None


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
        maintenance=SimMaintenance.from_scenario(node_spec["maintenance"], start)
        if node_spec.get("maintenance")
        else None,
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


# ---- the world's own log entries


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


Handler = Callable[[World, re.Match[str], dict[str, str], bytes], dict[str, Any]]
"""An API method: (world, path match, query parameters, raw request body) -> the JSON-able answer.
Called with `world.lock` held; raises `ApiError` for an error answer."""
Route = tuple[str, str, Handler]
"""(HTTP method, path regex matched from the start of the path, handler)."""
