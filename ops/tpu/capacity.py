"""Where can we get TPUs now? A capacity search across zones.

`CapacitySearch` requests a queued resource, under the same name, in several zones at
once, keeps the first that becomes ACTIVE, deletes every other request and checks that each one is gone,
and remembers permanent failures in the `Store` so the next search skips those zones.

Each zone's request carries ownership labels (`ops.tpu.ownership`: search id, request id, user) and is written
to the state store before it is sent. Clean-up deletes only what carries the request's own label: after a
503 or a timeout on a create whose name already exists (the live primary, say), the existing resource is
read back, found not ours, and left alone.
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from types import MappingProxyType

from ops.diagnosis.zonefit import classify
from ops.errors import (
    BackendTimeout,
    BackendUnavailable,
    BadInput,
    Cancelled,
    CapacityUnavailable,
    NotFound,
    OpsError,
    QuotaExceeded,
    UnsupportedInZone,
)
from ops.store.state import Store
from ops.tpu.api import TpuOps
from ops.tpu.model import CreateSpec, QueuedResourceInfo, check_create_spec
from ops.tpu.ownership import (
    NameTaken,
    create_owned,
    delete_owned,
    labels_of,
    new_request_id,
    ownership_labels,
    record_ambiguous,
    record_sending,
)

__all__ = ["CapacitySearch", "SearchResult"]

log = logging.getLogger(__name__)

MAX_ID_CHARS = 63  # queued resource and node ids are RFC 1035 labels


def _node_id(qr_name: str) -> str:
    return qr_name[: MAX_ID_CHARS - len("-node")].rstrip("-") + "-node"


@dataclass(frozen=True)
class SearchResult:
    """The outcome of `CapacitySearch.run`.

    Attributes:
        winner: the ACTIVE queued resource kept (with its nodes), or None.
        zones: zone -> final state string, in the order tried (see CapacitySearch for the strings).
        elapsed_s: wall time of the search, seconds.
        leftovers: queued resources the search created, besides the winner, that it could not verify as
            deleted (0 unless the API kept failing; they are named in `zones`).
        cancelled: the cancel event was set before a winner was found.
        error: the error that stopped the whole search (e.g. PermissionDenied, a bad request), else None.
        search_id: the id in every request's `tpu-chatops-search` label.
        left_alone: one sentence per existing resource the search found under its name and did not touch
            (e.g. after an ambiguous create whose name was the live primary's).
        found_s: seconds from the start until the winner was seen ACTIVE (the time to capacity; the rest of
            `elapsed_s` is deleting and verifying the other requests), None without a winner.
        unresolved: zone -> request id, for the zones whose create was answered ambiguously (timeout,
            lost or duplicated answer) and whose request was never seen, so nothing proves it was not
            made: it may still appear. Their in-flight records stay open; reconciliation deletes such a
            request if it appears (it carries the search's label) until the watch ends.
    """

    winner: QueuedResourceInfo | None
    zones: Mapping[str, str]
    elapsed_s: float
    leftovers: int
    cancelled: bool = False
    error: OpsError | None = None
    search_id: str = ""
    left_alone: tuple[str, ...] = ()
    found_s: float | None = None
    unresolved: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    @property
    def all_deleted(self) -> bool:
        """Whether every request the search made, besides the winner, is known to be gone (none left over,
        none unresolved): the only case in which "every request was deleted" may be said."""
        return not self.leftovers and not self.unresolved


@dataclass
class _Run:
    """Mutable state of one search, shared by its worker threads (guarded by `lock`)."""

    name: str
    accelerator_type: str
    provisioning_model: str
    template: CreateSpec
    progress: Callable[[Mapping[str, str]], None] | None
    cancel: threading.Event
    search_id: str
    user_id: str
    channel_id: str
    zone_index: dict[str, int] = field(default_factory=dict)
    requests: dict[str, tuple[str, datetime]] = field(default_factory=dict)  # zone -> (request id, sent)
    left_alone: list[str] = field(default_factory=list)
    unsure: dict[str, str] = field(default_factory=dict)  # zone -> reason of its ambiguous answer
    unresolved: dict[str, str] = field(default_factory=dict)  # unsure zone -> request id, unseen at the end
    stop: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    progress_lock: threading.Lock = field(default_factory=threading.Lock)
    states: dict[str, str] = field(default_factory=dict)
    queue: deque[str] = field(default_factory=deque)
    created: dict[str, str] = field(default_factory=dict)  # zone -> QR id not yet verified gone
    winner: QueuedResourceInfo | None = None
    error: OpsError | None = None
    found_at: float | None = None  # time.monotonic() when the winner was seen ACTIVE


class CapacitySearch:
    """Request a queued resource in several zones at once and keep the first that becomes ACTIVE.

    Zone states reported to `progress` (and in SearchResult.zones): "pending", "skipped (remembered:
    <reason>, <YYYY-MM-DD HH:MM>)", "skipped (not offered: <type>)" (the zone's acceleratorTypes.list lacks
    the type: dropped before any create), "requesting", the queued resource's state ("WAITING_FOR_RESOURCES",
    "PROVISIONING", "ACTIVE", ...), "failed: <reason>[ (remembered)]", "deleted" (a request deleted because
    another zone won), "cancelled", "not tried" (a winner was found first), "leftover: <QR id>" (its
    deletion could not be verified), "unresolved: ..." (an ambiguous create never seen: it may still
    appear, see SearchResult.unresolved).

    Args:
        tpu: the TPU API.
        store: zone memory (`Store.zone_failures`, `Store.remember_zone_failure`).
        poll_s: seconds between state polls (and operation polls).
        operation_timeout_s: seconds to wait for a create or delete operation.
        zone_timeout_s: give up on a zone still not ACTIVE after this many seconds (transient "still
            waiting"); None: wait until the request's own valid-until fails it.
        delete_timeout_s: seconds to wait for a deleted queued resource to disappear.
        now: clock for the zone memory timestamps (aware UTC).
    """

    def __init__(
        self,
        tpu: TpuOps,
        store: Store,
        *,
        poll_s: float = 5.0,
        operation_timeout_s: float = 600.0,
        zone_timeout_s: float | None = None,
        delete_timeout_s: float = 600.0,
        now: Callable[[], datetime] | None = None,
    ) -> None:
        self.tpu = tpu
        self.store = store
        self.poll_s = poll_s
        self.operation_timeout_s = operation_timeout_s
        self.zone_timeout_s = zone_timeout_s
        self.delete_timeout_s = delete_timeout_s
        self._now = now or (lambda: datetime.now(UTC))
        self._store_lock = threading.Lock()

    # ---- zones
    def candidate_zones(self, accelerator_type: str) -> list[str]:
        """Every zone of the project (`locations.list`) whose `acceleratorTypes.list` has the type.

        Zones whose accelerator types cannot be read are left out.

        Raises:
            OpsError: the locations cannot be listed.
        """
        zones = self.tpu.list_zones()

        def offers(zone: str) -> bool:
            try:
                return accelerator_type in self.tpu.list_accelerator_types(zone)
            except OpsError as exc:
                log.warning("capacity search: skipping %s: %s", zone, exc)
                return False

        with ThreadPoolExecutor(max_workers=8, thread_name_prefix="capacity-zones") as pool:
            flags = list(pool.map(offers, zones))
        return [zone for zone, ok in zip(zones, flags, strict=True) if ok]

    def offered(self, zones: Sequence[str], accelerator_type: str) -> dict[str, bool | None]:
        """Whether each zone offers `accelerator_type`, from `acceleratorTypes.list` called for all zones in
        parallel (one thread per zone, at most 16).

        Returns:
            zone -> True (offered), False (not in the zone's list), None (the list could not be read: an
            OpsError, logged; the caller should not drop the zone on that).
        """

        def offers(zone: str) -> bool | None:
            try:
                return accelerator_type in self.tpu.list_accelerator_types(zone)
            except OpsError as exc:
                log.warning("capacity search: accelerator types of %s unknown: %s", zone, exc)
                return None

        if not zones:
            return {}
        with ThreadPoolExecutor(min(16, len(zones)), thread_name_prefix="capacity-types") as pool:
            return dict(zip(zones, pool.map(offers, zones), strict=True))

    def _drop_not_offered(self, run: _Run) -> None:
        """Before any create: skip the queued zones whose accelerator types (as the API lists them) do not
        include the request's type. A create there could only fail ("accelerator not offered")."""
        offered = self.offered(list(run.queue), run.accelerator_type)
        for zone, ok in offered.items():
            if ok is False:
                run.queue.remove(zone)
                run.states[zone] = f"skipped (not offered: {run.accelerator_type})"

    # ---- the search
    def run(
        self,
        name: str,
        accelerator_type: str,
        provisioning_model: str,
        zones: Sequence[str] | None = None,
        *,
        parallel: int = 1,
        retry_all: bool = False,
        runtime_version: str = "v2-alpha-tpuv6e",
        max_run_duration: timedelta | None = None,
        valid_until: timedelta | None = None,
        startup_script: str = "",
        labels: Mapping[str, str] | None = None,
        service_account: str | None = None,
        ssh_keys: str = "",
        progress: Callable[[Mapping[str, str]], None] | None = None,
        cancel: threading.Event | None = None,
        search_id: str | None = None,
        user_id: str = "",
        channel_id: str = "",
    ) -> SearchResult:
        """Search for capacity.

        Args:
            name: the queued resource id, the same in every zone: an id is unique per parent
                `projects/P/locations/ZONE` (https://cloud.google.com/tpu/docs/reference/rest/v2alpha1/
                projects.locations.queuedResources/create), so the winner has the name asked for.
            accelerator_type: e.g. "v6e-8".
            provisioning_model: "flex-start" | "spot" | "on-demand" | "reserved".
            zones: zones to try, in order; None: `candidate_zones(accelerator_type)`.
            parallel: at most this many requests outstanding at once (K >= 1).
            retry_all: also try zones with a remembered permanent failure.
            runtime_version, max_run_duration, valid_until, startup_script, labels, service_account,
                ssh_keys: as in CreateSpec (max_run_duration is required for flex-start; valid_until bounds
                how long each zone's request waits for capacity).
            progress: called with an immutable snapshot (zone -> state) after every change, from the
                search's threads, one call at a time; its exceptions are logged and ignored.
            cancel: set it to stop: every request made is deleted (and verified gone) before returning.
            search_id: the search's id (labels, in-flight records, the operation lease); None: a new one.
            user_id, channel_id: who asked and where (labels and in-flight records).

        Returns:
            SearchResult. Never leaves a request besides the winner unless deletions kept failing
            (`leftovers` counts them).

        Raises:
            BadInput: malformed arguments (nothing is requested).
            OpsError: the zones could not be listed (when `zones` is None).
            Any unexpected exception of the search itself, after deleting everything it created (winner
            included).
        """
        if parallel < 1:
            raise BadInput(f"parallel must be at least 1, not {parallel}", "use e.g. --parallel 4")
        started = time.monotonic()
        template = CreateSpec(
            name=name,
            node_id=_node_id(name),
            zone="us-east5-a",  # replaced per zone
            accelerator_type=accelerator_type,
            runtime_version=runtime_version,
            provisioning_model=provisioning_model,
            max_run_duration=max_run_duration,
            valid_until=valid_until,
            startup_script=startup_script,
            labels=dict(labels or {}),
            service_account=service_account,
            ssh_keys=ssh_keys,
        )
        check_create_spec(template)
        order = list(dict.fromkeys(zones if zones is not None else self.candidate_zones(accelerator_type)))
        run = _Run(
            name=name,
            accelerator_type=accelerator_type,
            provisioning_model=provisioning_model,
            template=template,
            progress=progress,
            cancel=cancel or threading.Event(),
            search_id=search_id or new_request_id(),
            user_id=user_id,
            channel_id=channel_id,
            zone_index={zone: index for index, zone in enumerate(order)},
        )
        with self._store_lock:
            remembered = self.store.zone_failures(accelerator_type, provisioning_model)
        for zone in order:
            failure = remembered.get(zone)
            if failure is not None and not retry_all:
                when = failure.at.astimezone(UTC).strftime("%Y-%m-%d %H:%M")
                run.states[zone] = f"skipped (remembered: {failure.message.split(':', 1)[0]}, {when})"
            else:
                run.states[zone] = "pending"
                run.queue.append(zone)
        if zones is not None:  # candidate_zones already kept only the zones offering the type
            self._drop_not_offered(run)
        self._report(run)
        watcher = threading.Thread(
            target=self._watch_cancel, args=(run,), name="capacity-cancel", daemon=True
        )
        watcher.start()
        workers = [
            threading.Thread(target=self._worker, args=(run,), name=f"capacity-{i}", daemon=True)
            for i in range(min(parallel, max(1, len(run.queue))))
        ]
        try:
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
        except BaseException:
            run.stop.set()
            for worker in workers:
                if worker.is_alive():
                    worker.join()
            self._sweep(run, include_winner=True)
            raise
        finally:
            run.stop.set()
        leftovers = self._sweep(run, include_winner=False)
        with run.lock:
            for zone, state in run.states.items():
                if state == "pending":
                    run.states[zone] = "cancelled" if run.cancel.is_set() else "not tried"
        self._report(run)
        return SearchResult(
            winner=run.winner,
            zones=MappingProxyType(dict(run.states)),
            elapsed_s=time.monotonic() - started,
            leftovers=leftovers,
            cancelled=run.cancel.is_set() and run.winner is None,
            error=run.error,
            search_id=run.search_id,
            left_alone=tuple(run.left_alone),
            found_s=None if run.found_at is None else run.found_at - started,
            unresolved=MappingProxyType(dict(run.unresolved)),
        )

    # ---- internals
    def _watch_cancel(self, run: _Run) -> None:
        while not run.stop.is_set():
            if run.cancel.wait(0.02):
                run.stop.set()
                return

    def _report(self, run: _Run) -> None:
        if run.progress is None:
            return
        with run.progress_lock:
            with run.lock:
                snapshot = MappingProxyType(dict(run.states))
            try:
                run.progress(snapshot)
            except Exception:  # a broken progress display must not break the search or its cleanup
                log.exception("capacity search: progress callback failed")

    def _set(self, run: _Run, zone: str, state: str) -> None:
        with run.lock:
            if run.states.get(zone) == state:
                return
            run.states[zone] = state
        self._report(run)

    def _next_zone(self, run: _Run) -> str | None:
        with run.lock:
            if run.stop.is_set() or not run.queue:
                return None
            return run.queue.popleft()

    def _worker(self, run: _Run) -> None:
        while True:
            zone = self._next_zone(run)
            if zone is None:
                return
            try:
                self._try_zone(run, zone)
            except Exception as exc:  # unexpected: stop the search; run() cleans up
                log.exception("capacity search: %s failed unexpectedly", zone)
                with run.lock:
                    if run.error is None:
                        run.error = (
                            exc
                            if isinstance(exc, OpsError)
                            else OpsError(f"capacity search failed in {zone}: {type(exc).__name__}: {exc}")
                        )
                run.stop.set()
                self._remove(run, zone, final="failed: unexpected error")

    def _fail(self, run: _Run, zone: str, error: OpsError) -> None:
        """Record a zone failure: remember it if permanent for the zone; stop all if about the request."""
        verdict = classify(error)
        state = f"failed: {verdict.reason}"
        if verdict.remember:
            with self._store_lock:
                self.store.remember_zone_failure(
                    zone,
                    run.accelerator_type,
                    run.provisioning_model,
                    f"{verdict.reason}: {error.message}"[:1000],
                    now=self._now(),
                )
            state += " (remembered)"
        elif verdict.scope == "request":
            with run.lock:
                if run.error is None:
                    run.error = error
            run.stop.set()
        self._remove(run, zone, final=state)

    def _try_zone(self, run: _Run, zone: str) -> None:
        qr_name = run.name
        request_id = f"{run.search_id}-{run.zone_index.get(zone, 0)}"
        owner = ownership_labels(request_id, run.user_id, run.search_id)
        spec = replace(run.template, zone=zone, labels=labels_of(run.template.labels, owner))
        self._set(run, zone, "requesting")
        sent_at = self._now()
        with self._store_lock:
            record_sending(
                self.store, spec, request_id=request_id, operation_id=run.search_id, kind="find",
                project=self.tpu.project, user_id=run.user_id, channel_id=run.channel_id, now=sent_at,
            )  # fmt: skip
        with run.lock:
            run.requests[zone] = (request_id, sent_at)
        try:
            outcome = create_owned(self.tpu, spec, request_id, sent_at, pause_s=self.poll_s)
        except NameTaken as exc:
            with run.lock:
                run.left_alone.append(exc.message)
            self._inflight(run, zone, "not ours", exc.message)
            self._fail(run, zone, exc)
            return
        except (BackendTimeout, BackendUnavailable) as exc:
            self._ambiguous(run, zone, qr_name, exc, "could not be read back")
            return
        except OpsError as exc:
            self._inflight(run, zone, "failed", exc.message)
            self._fail(run, zone, exc)  # nothing was created (AlreadyExists: someone else's; left alone)
            return
        with run.lock:
            run.created[zone] = qr_name
        if outcome.operation is None:
            if outcome.resource is None:
                assert outcome.ambiguous is not None
                self._ambiguous(run, zone, qr_name, outcome.ambiguous, "not there when read back")
                return
            self._inflight(run, zone, "created", "read back after an ambiguous create")
            self._watch_zone(run, zone, qr_name)
            return
        self._inflight(run, zone, "created")
        try:
            self.tpu.wait_operation(
                outcome.operation, timeout_s=self.operation_timeout_s, poll_s=self.poll_s, cancel=run.stop
            )
        except Cancelled:
            self._remove(run, zone, final=self._stopped_state(run))
            return
        except OpsError as exc:
            self._fail(run, zone, exc)
            return
        self._watch_zone(run, zone, qr_name)

    def _stopped_state(self, run: _Run) -> str:
        return "cancelled" if run.cancel.is_set() and run.winner is None else "deleted"

    def _watch_zone(self, run: _Run, zone: str, qr_name: str) -> None:
        """Poll the request until ACTIVE (claim the win), FAILED, a stop, or the zone timeout."""
        since = time.monotonic()
        while not run.stop.is_set():
            try:
                qr = self.tpu.get_queued_resource(qr_name, [zone])
            except NotFound:
                self._fail(run, zone, CapacityUnavailable(f"queued resource {qr_name} disappeared in {zone}"))
                return
            except (BackendUnavailable, BackendTimeout, QuotaExceeded) as exc:
                log.info("capacity search: polling %s: %s", zone, exc)
            else:
                if qr.state == "ACTIVE":
                    with run.lock:
                        won = run.winner is None and not run.cancel.is_set()
                        if won:
                            run.winner = qr
                            run.found_at = time.monotonic()
                            run.created.pop(zone, None)
                    if won:
                        self._inflight(run, zone, "kept", "the search's winner")
                        run.stop.set()
                        self._set(run, zone, "ACTIVE")
                        return
                    break
                if qr.state in ("FAILED", "SUSPENDED", "SUSPENDING", "DELETING"):
                    text = qr.error or f"queued resource went {qr.state}"
                    self._fail(run, zone, CapacityUnavailable(text) if qr.error is None else _from_text(text))
                    return
                self._set(run, zone, qr.state)
            if self.zone_timeout_s is not None and time.monotonic() - since > self.zone_timeout_s:
                self._fail(
                    run, zone, CapacityUnavailable(f"still waiting after {self.zone_timeout_s:g} s in {zone}")
                )
                return
            run.stop.wait(self.poll_s)
        self._remove(run, zone, final=self._stopped_state(run))

    def _remove(self, run: _Run, zone: str, *, final: str) -> bool:
        """Delete this search's request in `zone` (force) and verify it is gone; set the zone's state."""
        with run.lock:
            qr_name = run.created.get(zone)
        if qr_name is None:
            self._set(run, zone, final)
            return True
        with run.lock:
            request_id, sent_at = run.requests[zone]
        result = delete_owned(
            self.tpu, qr_name, zone, request_id, sent_at, timeout_s=self.delete_timeout_s, poll_s=self.poll_s
        )
        gone = result != "not verified"
        with run.lock:
            if gone:
                run.created.pop(zone, None)
            if result == "not ours":
                run.left_alone.append(
                    f"{qr_name} in {zone} exists but was not made by this search: left alone"
                )
        if result == "absent" and zone in run.unsure:
            # Still not seen: nothing proves it was not made. Its record stays open in the store, so a
            # late create is reconciled (deleted by its label) after the search.
            with run.lock:
                run.unresolved[zone] = request_id
            reason = run.unsure[zone]
            self._set(run, zone, f"unresolved: ambiguous create ({reason}), request not seen (see below)")
            return True
        if gone:
            self._inflight(run, zone, result)
        self._set(run, zone, final if gone else f"leftover: {qr_name}")
        return gone

    def _ambiguous(self, run: _Run, zone: str, qr_name: str, error: OpsError, seen: str) -> None:
        """A create answered ambiguously and no resource of ours is known: the request may still appear
        (a late create), so the zone stays on the list that the search's final sweep checks by label."""
        with run.lock:
            run.created[zone] = qr_name
            run.unsure[zone] = classify(error).reason
            request = run.requests.get(zone)
        if request is not None:
            with self._store_lock:
                record_ambiguous(self.store, request[0], error, now=self._now())
        self._set(run, zone, f"failed: {classify(error).reason} ({seen}; checked again at the end)")

    def _inflight(self, run: _Run, zone: str, state: str, note: str = "") -> None:
        """Record what became of this search's request in `zone` (the store keeps it for restarts)."""
        with run.lock:
            request = run.requests.get(zone)
        if request is None:
            return
        with self._store_lock:
            self.store.update_inflight(request[0], state, now=self._now(), note=note)

    def _sweep(self, run: _Run, *, include_winner: bool) -> int:
        """Delete what is still recorded as created (and the winner if asked); count what is not gone."""
        if include_winner and run.winner is not None:
            with run.lock:
                run.created[run.winner.zone] = run.winner.name
                run.winner = None
        with run.lock:
            pending = dict(run.created)
        leftovers = 0
        for zone in pending:
            if not self._remove(run, zone, final=self._stopped_state(run)):
                leftovers += 1
        return leftovers


def _from_text(text: str) -> OpsError:
    """An OpsError for a FAILED queued resource's `failedData.error.message`, typed by `classify`."""
    verdict = classify(text)
    if verdict.remember:
        return UnsupportedInZone(text, "try another zone", backend="tpu")
    if verdict.reason == "quota exceeded":
        return QuotaExceeded(text, "free some quota or ask for more", backend="tpu")
    return CapacityUnavailable(text, "try another zone or later", backend="tpu")
