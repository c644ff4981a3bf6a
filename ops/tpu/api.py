"""The Cloud TPU client: read queued resources (QRs) and nodes, and the calls that change them.

Queued resources and node listings are read through the v2alpha1 REST API (google-api-python-client,
see `ops.gcp.google.tpu_v2alpha1`), because only v2alpha1 defines the flex-start fields
(`provisioningModel`, `runDuration`, `schedulingConfig.terminationTimestamp`) and the google-cloud-tpu
protos silently drop them. `TpuOps.get_node`, `host_keys`, `start_node` and `stop_node` use the GAPIC
`tpu_v2` REST client. Creating, deleting and resetting queued resources goes through v2alpha1 too
(flex-start's `provisioningModel` and `runDuration` exist only there); every change returns a long-running
operation name (`projects/P/locations/Z/operations/ID`) that `TpuOps.wait_operation` polls.

The values it returns (`QueuedResourceInfo`, `NodeInfo`, `ZoneListing`) and the create request
(`CreateSpec`) are in `ops.tpu.model`. Every failure is raised, through `ops.gcp.google.map_error` and
`create_error`, as an `ops.errors.OpsError` subclass with a one-line message naming the API and
a hint; raw library exceptions never escape. Transient failures (HTTP 429 and 5xx) of reads are first
retried by the libraries themselves (`execute(num_retries=...)`, google-api-core `Retry`) a small bounded
number of times; changes are sent once (a retried create could collide with its own first attempt).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from google.api_core import exceptions as core_exceptions
from google.api_core import retry as core_retry
from google.auth.credentials import Credentials
from google.cloud import tpu_v2

from ops.errors import (
    BackendTimeout,
    BackendUnavailable,
    BadInput,
    Cancelled,
    NotFound,
    OpsError,
    QuotaExceeded,
)
from ops.gcp import google
from ops.gcp.google import create_error, map_error, one_line, operation_error
from ops.linear import linear
from ops.tpu.model import (
    RESOURCE_ID,
    CreateSpec,
    NodeInfo,
    QueuedResourceInfo,
    ZoneListing,
    ZoneNodes,
    check_create_spec,
    check_zone,
    node_from_api,
    queued_resource_body,
    queued_resource_from_api,
    zone_of,
)

__all__ = ["CALLS_PER_ZONE", "TpuOps", "pool_size", "unknown_zone"]

CALLS_PER_ZONE = 2
"""A zone's listing is one `queuedResources.list` and one `nodes.list`, sent at once."""
LISTINGS_AT_ONCE = 2
"""Listings of the configured zones a pool serves at once before calls queue (e.g. /tpu status while the
alert tick lists)."""
POOL_FLOOR = 24
"""Threads any pool may grow to: a `--all-zones` listing of a dozen zones sends all its calls at once."""
POOL_CEILING = 64
"""Threads no pool grows past, however many zones are configured; further calls wait for a free thread."""


def pool_size(zones: int) -> int:
    """Zone-listing threads for a deployment of `zones` configured zones: CALLS_PER_ZONE x LISTINGS_AT_ONCE
    per zone, at least POOL_FLOOR and at most POOL_CEILING. A ThreadPoolExecutor starts a thread only when a
    call finds none idle, so a pool holds as many threads as its busiest moment needed, never more."""
    return max(POOL_FLOOR, min(POOL_CEILING, CALLS_PER_ZONE * LISTINGS_AT_ONCE * max(1, zones)))


_ID = linear(r"(?i)^[a-z0-9][-a-z0-9_]*$")
_PROJECT = linear(r"^[a-z0-9][-a-z0-9.:]*$")
# The TPU API answers a call under a location the project does not have with HTTP 404 "Location
# projects/P/locations/Z is not found." (the location collection of
# https://cloud.google.com/tpu/docs/reference/rest/v2alpha1/projects.locations/list).
_UNKNOWN_LOCATION = linear(r"Location projects/[^/ ]+/locations/(?P<zone>[a-z0-9-]+) is not found")
_QR_PATH = linear(r"^projects/(?P<project>[^/]+)/locations/(?P<zone>[^/]+)/queuedResources/(?P<id>[^/]+)$")
_OP_PATH = linear(r"^projects/(?P<project>[^/]+)/locations/(?P<zone>[^/]+)/operations/(?P<id>[^/]+)$")


def unknown_zone(project: str, zones: Sequence[str]) -> BadInput:
    """The one refusal of zones that are not TPU locations of `project`, e.g. "unknown zone for TPUs in
    project demo-project: us-east5-z (see the zones with /tpu zones)", whether the bot checked the zone
    first (`bot.shared.safety.check_zones`) or the API refused it (`TpuOps`).

    Args:
        project: the Google Cloud project id.
        zones: the refused zone ids, in the order given.

    Returns:
        A BadInput naming the zones, its hint the command that lists the valid ones.
    """
    noun = "zone" if len(zones) == 1 else "zones"
    return BadInput(
        f"unknown {noun} for TPUs in project {project}: {', '.join(zones)}",
        "see the zones with /tpu zones",
        backend="tpu",
    )


def _zone_known(error: OpsError, project: str) -> OpsError:
    """`error`, or the unknown-zone refusal when it is the API's 404 for a location the project lacks."""
    found = _UNKNOWN_LOCATION.search(error.message) if isinstance(error, NotFound) else None
    return unknown_zone(project, [found["zone"]]) if found else error


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
            Default Credentials (see `ops.gcp.google`).
        max_workers: most threads of the zone-listing pool (`pool_size`); they start when calls need them.
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

    def warm(self, zones: int) -> None:
        """Start the threads of one listing of `zones` zones (CALLS_PER_ZONE each, at most max_workers) and
        build their clients (`_collection`) now, not during a burst; the calling thread's too. Further
        threads start when calls need them."""
        pool = self._executor()
        threads = min(self._max_workers, CALLS_PER_ZONE * max(1, zones))
        barrier = threading.Barrier(threads + 1)

        def build() -> None:
            self.warm_thread()
            barrier.wait(60)

        futures = [pool.submit(build) for _ in range(threads)]
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
            raise _zone_known(map_error(exc, what), self.project) from exc

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

    def _list_qr_dicts(self, zone: str) -> list[dict[str, Any]]:
        qrs = self._collection("queuedResources")
        what = f"TPU API v2alpha1 queuedResources.list {zone}"
        return self._list_all(qrs, qrs.list(parent=self._parent(zone)), "queuedResources", what)

    def _list_node_dicts(self, zone: str) -> list[dict[str, Any]]:
        nodes = self._collection("nodes")
        what = f"TPU API v2alpha1 nodes.list {zone}"
        return self._list_all(nodes, nodes.list(parent=self._parent(zone)), "nodes", what)

    def _zone_qrs(self, zone: str) -> list[dict[str, Any]]:
        check_zone(zone)
        return self._list_qr_dicts(zone)

    def _zone_nodes(self, zone: str) -> list[dict[str, Any]]:
        check_zone(zone)
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
        return sorted({str(loc.get("locationId") or zone_of(str(loc.get("name", "")))) for loc in items})

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
            zone_nodes = ZoneNodes(node_dicts)
            resources.extend(queued_resource_from_api(raw, zone_nodes) for raw in raw_qrs)
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
            check_zone(zone)
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
        check_zone(zone)
        if not _ID.match(node_id or ""):
            raise BadInput(f"bad node id {node_id!r}", "use the node id shown by describe")
        what = f"TPU API v2 nodes.get {zone}/{node_id}"
        client = self._v2()
        try:
            node = client.get_node(
                name=f"{self._parent(zone)}/nodes/{node_id}", retry=self._gapic_retry, timeout=self._timeout_s
            )
        except Exception as exc:
            raise _zone_known(map_error(exc, what), self.project) from exc
        return node_from_api(json.loads(tpu_v2.Node.to_json(node, use_integers_for_enums=False)))

    def host_keys(self, zone: str, node_id: str, *, worker: int = 0) -> dict[str, str]:
        """The SSH host keys a TPU VM worker published, from its guest attributes (`nodes.getGuestAttributes`
        through the GAPIC `tpu_v2` REST client, query path "hostkeys/").

        On first boot the Google guest agent generates the VM's sshd host keys and writes each public key to
        the guest attribute `hostkeys/<type>` (value: the base64 key); `gcloud compute tpus tpu-vm ssh`
        reads the same attributes for its known_hosts (GoogleCloudPlatform/guest-agent,
        google_guest_agent/instance_setup.go `generateSSHKeys`; reference:
        https://cloud.google.com/tpu/docs/reference/rest/v2/projects.locations.nodes/getGuestAttributes).

        Args:
            zone: e.g. "us-east5-a".
            node_id: node id, e.g. "gemma4-qr-node".
            worker: the 0-based worker id (worker 0 is the node's first network endpoint, the one SSH uses).

        Returns:
            key type -> base64 public key, e.g. {"ssh-ed25519": "AAAAC3...", "ecdsa-sha2-nistp256": ...};
            {} when none is published yet (the guest agent has not run its first boot).

        Raises:
            BadInput: malformed zone or node id.
            NotFound: no such node.
            PermissionDenied, QuotaExceeded, BackendUnavailable, BackendTimeout: see `map_error`.
        """
        check_zone(zone)
        if not _ID.match(node_id or ""):
            raise BadInput(f"bad node id {node_id!r}", "use the node id shown by describe")
        name = f"{self._parent(zone)}/nodes/{node_id}"
        request = {"name": name, "query_path": "hostkeys/", "worker_ids": [str(worker)]}
        try:
            response = self._v2().get_guest_attributes(
                request=request, retry=self._gapic_retry, timeout=self._timeout_s
            )
        except Exception as exc:
            raise _zone_known(
                map_error(exc, f"TPU API v2 nodes.getGuestAttributes {zone}/{node_id}"), self.project
            ) from exc
        keys: dict[str, str] = {}
        for attributes in response.guest_attributes[:1]:
            for item in attributes.query_value.items:
                if item.namespace == "hostkeys" and item.key and item.value:
                    keys.setdefault(item.key, item.value.strip())
        return keys

    # ---- changes (long-running operations)
    def _check_id(self, value: str, label: str) -> None:
        if not RESOURCE_ID.match(value or ""):
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
            raise _zone_known(create_error(exc, what), self.project) from exc
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
                    one_line(f"TPU operation {match['id']} not done after {timeout_s:g} s{polled}"),
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
        check_zone(zone)
        self._check_id(name, "queued resource name")
        qrs = self._collection("queuedResources")
        qr_name = f"{self._parent(zone)}/queuedResources/{name}"
        request = qrs.delete(name=qr_name, force=True) if force else qrs.delete(name=qr_name)
        what = f"TPU API v2alpha1 queuedResources.delete {zone}/{name}"
        try:
            operation: dict[str, Any] = request.execute(num_retries=0)
        except Exception as exc:
            error = _zone_known(create_error(exc, what), self.project)
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
        check_zone(zone)
        self._check_id(name, "queued resource name")
        qrs = self._collection("queuedResources")
        request = qrs.reset(name=f"{self._parent(zone)}/queuedResources/{name}", body={})
        try:
            operation: dict[str, Any] = request.execute(num_retries=0)
        except Exception as exc:
            what = f"TPU API v2alpha1 queuedResources.reset {zone}/{name}"
            raise _zone_known(create_error(exc, what), self.project) from exc
        return str(operation.get("name", ""))

    def _node_operation(self, verb: str, zone: str, node_id: str) -> str:
        check_zone(zone)
        self._check_id(node_id, "node id")
        client = self._v2()
        request = {"name": f"{self._parent(zone)}/nodes/{node_id}"}
        try:
            if verb == "start":
                operation = client.start_node(request=request, timeout=self._timeout_s)
            else:
                operation = client.stop_node(request=request, timeout=self._timeout_s)
        except Exception as exc:
            what = f"TPU API v2 nodes.{verb} {zone}/{node_id}"
            raise _zone_known(create_error(exc, what), self.project) from exc
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
            BadInput: malformed zone, or unknown zone (HTTP 404 for the location: `unknown_zone`).
            PermissionDenied, QuotaExceeded, BackendUnavailable, BackendTimeout: see `map_error`.
        """
        check_zone(zone)
        types = self._collection("acceleratorTypes")
        what = f"TPU API v2alpha1 acceleratorTypes.list {zone}"
        items = self._list_all(types, types.list(parent=self._parent(zone)), "acceleratorTypes", what)
        return sorted({str(t.get("type") or str(t.get("name", "")).rsplit("/", 1)[-1]) for t in items})
