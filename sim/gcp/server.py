"""The Google simulator's HTTP server (`GcpSimulator`): one 127.0.0.1 port serving the TPU, Cloud Quotas,
Secret Manager and Cloud Logging APIs of this package (see their modules for the paths), the simulated
clock, fault injection and the controls tests use.

Errors use the Google envelope `{"error": {"code": 404, "message": "...", "status": "NOT_FOUND"}}`.
Controls for tests: `GcpSimulator.now()`, `.advance(seconds)`, `.preempt(zone, node_id)`,
`.publish_host_key(zone, node_id, key_type, b64)`,
`.set_capacity(zone, spec)`, `.inject_fault(...)`, `.add_log_entry(text, severity=, at=, ...)`,
`.log_entries()`, `.cut_log_searches(count, keep=)`, `.log_reads_served()`, `.requests` and
`.request_bodies` (JSON bodies sent to TPU and Logging paths; Secret Manager bodies are never recorded).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from sim.gcp.api import ApiError, error_envelope, json_or_text
from sim.gcp.logentry import log_entry_json, make_container_entry, make_log_entry
from sim.gcp.loggen import DEFAULT_CONTAINER, container_line
from sim.gcp.logging import ROUTES as LOGGING_ROUTES
from sim.gcp.quotas import ROUTES as QUOTAS_ROUTES
from sim.gcp.secrets import ROUTES as SECRETS_ROUTES
from sim.gcp.tpu import ROUTES as TPU_ROUTES
from sim.gcp.world import SimMaintenance, SimQueuedResource, World, preempt_now, zone_capacity
from sim.http_server import SimHttpServer

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


@dataclass
class _Fault:
    pattern: re.Pattern[str]
    status: int
    remaining: int
    body: str | None
    delay_s: float
    after: bool = False  # answer the fault only after the request has been carried out
    method: str | None = None  # only requests with this HTTP method (None: any)
    drop: bool = False  # carry the request out, then close the connection without any answer


# Every API the simulator serves on its one port, in match order.
_ROUTES = [
    (method, re.compile(pattern), handler)
    for method, pattern, handler in TPU_ROUTES + QUOTAS_ROUTES + SECRETS_ROUTES + LOGGING_ROUTES
]


class _Server(SimHttpServer):
    sim: GcpSimulator


class _RequestHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def _handle(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        answer = self.server.sim.dispatch(self.command, self.path, body)
        if answer is None:  # a dropped answer: the connection closes before any status line
            self.close_connection = True
            return
        status, payload = answer
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
    """The simulated Google Cloud API server (see the package docstring of `sim.gcp`).

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
        self._log_readers: list[Callable[[], None]] = []  # called before each entries.list (on_log_read)

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
            qr = self._owner_now(zone, node_id)
            if qr.provisioning_model != "SPOT":
                raise ValueError(
                    f"node {node_id} is {qr.provisioning_model}, not SPOT: it cannot be preempted"
                )
            preempt_now(qr, self.world.now)

    def publish_host_key(self, zone: str, node_id: str, key_type: str, b64: str) -> None:
        """Publish an SSH host key in a node's guest attributes (`hostkeys/<key_type>` = `b64`), as the VM's
        Google guest agent does on first boot (SIMULATED: the test plays the guest agent).

        Raises:
            KeyError: no such node exists now.
        """
        with self.world.lock:
            self._owner_now(zone, node_id).node.guest_attributes[f"hostkeys/{key_type}"] = b64

    def schedule_maintenance(
        self,
        zone: str,
        node_id: str,
        *,
        starts_in: float,
        lasts: float = 4 * 3600,
        kind: str = "SCHEDULED",
        can_reschedule: bool = True,
    ) -> None:
        """Announce host maintenance for a node: its window starts `starts_in` simulated seconds from now
        and lasts `lasts` seconds (`Node.upcomingMaintenance`, see `SimMaintenance`).

        Raises:
            KeyError: no such node exists now.
        """
        with self.world.lock:
            qr = self._owner_now(zone, node_id)
            start = self.world.now + timedelta(seconds=starts_in)
            qr.node.maintenance = SimMaintenance(
                kind, start, start + timedelta(seconds=lasts), can_reschedule
            )

    def _owner_now(self, zone: str, node_id: str) -> SimQueuedResource:
        """The queued resource owning node `node_id` now (the world evolved first; `world.lock` held).

        Raises:
            KeyError: no such node exists now.
        """
        self.world.evolve(self.now())
        try:
            return self.world.node_owner(zone, node_id)
        except ApiError as exc:
            raise KeyError(exc.message) from None

    def set_capacity(self, zone: str, capacity: Any) -> None:
        """Change a zone's `capacity` (same values as the scenario key) for requests queued from now on."""
        with self.world.lock:
            sim_zone = self.world.zones[zone]
            sim_zone.capacity_after, sim_zone.provisioning = zone_capacity(capacity)

    def set_quota(self, zone: str, quota_id: str, limit: int) -> None:
        """Change a zone's Cloud Quotas value (same keys as the scenario's `quota`), e.g. a preemptible
        quota lowered to 0, for the quota reads and creates from now on."""
        with self.world.lock:
            self.world.zones[zone].quota[quota_id] = limit

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
        """Add one `tpu_worker` log entry (textPayload, or jsonPayload.message with payload="json"), or
        with payload="container" one line of the vLLM container as Docker's gcplogs driver writes it (no
        severity; `severity` and `log_id` are not used).

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
            if payload == "container":
                body = container_line(
                    self.project,
                    when,
                    text,
                    node_id=node_id,
                    zone=zone,
                    worker=worker_id,
                    container=DEFAULT_CONTAINER,
                    insert_id=insert_id,
                )
            elif payload == "json":
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

    def write_container_lines(
        self,
        lines: Sequence[tuple[datetime, str]],
        *,
        container: dict[str, Any],
        zone: str,
        instance_name: str,
        labels: dict[str, str],
    ) -> None:
        """Store lines a container printed through Docker's gcplogs driver on a TPU VM linked to this
        project (`sim.host.HostSimulator.link_cloud_logging`): one entry per line, stamped with the line's
        own time, in the shape of the scenario's container lines (`sim.gcp.logentry.make_container_entry`).

        Args:
            lines: (aware time, text) each.
            container: {"name", "image", "created"} of the container, as its logger started.
            zone, instance_name: the VM's, as its metadata server gives them.
            labels: the container labels its `--log-opt labels=` names, e.g. {"tpu_node": "gemma4-qr-node"}.
        """
        with self.world.lock:
            bodies = []
            for when, text in lines:
                self.world.log_seq += 1
                bodies.append(
                    make_container_entry(
                        self.project,
                        when,
                        text,
                        container=container,
                        zone=zone,
                        instance_name=instance_name,
                        labels=labels,
                        insert_id=f"sim{self.world.log_seq:010d}",
                    )
                )
            self.world.add_logs(bodies)

    def on_log_read(self, callback: Callable[[], None]) -> None:
        """Call `callback` before answering each entries.list, outside the world's lock (a linked VM prints
        what is due then, which may write entries here)."""
        self._log_readers.append(callback)

    def cut_log_searches(self, count: int, *, keep: int = 0) -> None:
        """Make the next `count` entries.list answers that have more entries to give end after `keep`
        entries (0: none) with a nextPageToken, as Cloud Logging answers a search that ran out of time
        (https://cloud.google.com/logging/docs/reference/v2/rest/v2/entries/list, nextPageToken)."""
        with self.world.lock:
            self.world.log_search_cuts = (count, keep)

    def log_reads_served(self) -> int:
        """entries.list calls answered so far (those refused with the read quota's 429 apart)."""
        with self.world.lock:
            return self.world.log_reads_served

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
        drop: bool = False,
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

        With `drop` (SIMULATED lost answer), the request is carried out and the connection is then closed
        without a status line (`status` is ignored). The client sees "Remote end closed connection without
        response"; httplib2, under google-api-python-client, sends a request whose first answer was such a
        bad status line once more on a new connection, whatever its method (`httplib2.Http._conn_request`),
        so a dropped create reaches the API twice: the second delivery is refused as ALREADY_EXISTS
        although the first made the resource (a duplicated create).

        Three ambiguous creates, then: late (`status=200, delay_s` above the client's timeout: carried out
        after the client gave up), lost (`after=True` with a 503, or a delay: carried out, answer lost)
        and duplicated (`drop=True`).
        """
        fault = _Fault(re.compile(path_pattern), status, count, body, delay_s, after, method, drop)
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
    def dispatch(self, method: str, raw_path: str, body: bytes) -> tuple[int, bytes] | None:
        """Answer one request: returns (HTTP status, JSON body bytes), or None to close the connection
        without an answer (an injected `drop` fault)."""
        self.requests.append((method, raw_path))
        split = urlsplit(raw_path)
        path = unquote(split.path)
        query = {k: v[-1] for k, v in parse_qs(split.query).items()}
        if path.endswith("/entries:list"):
            for reader in list(self._log_readers):
                reader()
        fault = self._take_fault(method, path)
        if fault is not None and not fault.after and not fault.drop:
            answer = self._fault_answer(fault)
            if answer is not None:
                return answer
        status, text = self._route(method, raw_path, path, query, body)
        if fault is not None and fault.drop:
            return None
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
            for route_method, pattern, handler in _ROUTES:
                match = pattern.match(path)
                if match and route_method == method:
                    if body and "/secrets" not in path:
                        self.request_bodies.append((method, raw_path, json_or_text(body)))
                    with self.world.lock:
                        now = self.now()
                        self.world.evolve(now)
                        result = handler(self.world, match, query, body)
                        self.world.evolve(now)
                        return 200, json.dumps(result).encode()
            if any(p.match(path) for _, p, _ in _ROUTES):
                raise ApiError(501, f"The simulator does not implement {method} {path}.")
            raise ApiError(404, f"The requested URL {path} was not found on this server.")
        except ApiError as exc:
            envelope = error_envelope(exc.status, exc.message, exc.status_name, exc.details)
            return exc.status, json.dumps(envelope).encode()
