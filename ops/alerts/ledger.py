"""Alerts: pure evaluation of what is due, and an exactly-once ledger in the state store.

`evaluate` turns a listing of queued resources (and what was seen last time) into `Alert`s; it does no I/O.
`ops.vllm.watch.evaluate_vllm` does the same for one vLLM check. `AlertLedger` records every alert key as
sent, superseded or suppressed with an atomic insert-if-absent (a UNIQUE key; the losing insert raises
IntegrityError on SQLite and PostgreSQL alike), so a restarted bot never sends a key twice. Its tables
(`ops.alerts.tables`) live on `ops.store.state.metadata`; the migrations (`ops.store.schema`) create and
change them.

Keys: `"{zone}/{name}@{create time}|{kind}|{threshold}"`, e.g.
`"us-east5-a/gemma4-qr@2026-11-30T00:00:00Z|expiry|15"`. Times are timezone-aware UTC; thresholds are
minutes before the deadline.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import ColumnElement, delete, insert, select, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from ops.alerts.alert import Alert
from ops.alerts.planned import DEFAULT_DEPLOYMENT
from ops.alerts.tables import (
    chunks,
    kv_table,
    ledger_table,
    mutes_table,
    observations_table,
    observers_table,
    owners_table,
)
from ops.store import schema
from ops.store.state import Store
from ops.times import from_rfc3339, iso_utc, utc_text
from ops.tpu.model import QueuedResourceInfo

__all__ = [
    "DEFAULT_THRESHOLDS",
    "Alert",
    "AlertLedger",
    "LedgerRow",
    "Observation",
    "aware",
    "evaluate",
    "identity",
    "lapsed_countdowns",
    "mute_subjects",
    "qr_alert",
    "subject_alert",
]

DEFAULT_THRESHOLDS: tuple[int, ...] = (60, 15, 5)
WAITING_STATES = frozenset({"WAITING_FOR_RESOURCES", "ACCEPTED", "CREATING"})
STALE_STATES = frozenset({"SUSPENDED", "FAILED"})
GONE_STATES = frozenset({"DELETING"})
NEW = "NEW"  # the "previous state" of a resource first seen after watching began
# Recorded kinds that are news, not problems someone must act on (never listed as open).
NOT_OPEN_KINDS = frozenset(
    {"state", "vllm_up", "test", "slo_ok", "serving", "recovery", "digest", "lapsed", "maintenance_over"}
)


def aware(moment: datetime | None) -> datetime | None:
    """`moment` with UTC as its zone when it has none (SQLite returns naive datetimes); None stays None."""
    if moment is None:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def identity(qr: QueuedResourceInfo) -> str:
    """The resource part of every key: "zone/name@create time" (a recreated QR is a new identity)."""
    return f"{qr.zone}/{qr.name}@{iso_utc(qr.create_time)}"


def qr_alert(
    qr: QueuedResourceInfo, kind: str, suffix: str, title: str, text: str = "", **fields: Any
) -> Alert:
    """The Alert of `kind` about queued resource `qr`: key "{identity}|{kind}|{suffix}", its identity as
    resource, its name and zone; `fields` are the other Alert attributes (state, node, buttons...)."""
    base = identity(qr)
    return Alert(f"{base}|{kind}|{suffix}", kind, base, qr.name, qr.zone, title, text, **fields)


def subject_alert(key: str, kind: str, resource: str, title: str, text: str = "", **fields: Any) -> Alert:
    """An Alert about no queued resource (a vLLM endpoint "vllm:<url>", a maintenance window, the digest):
    `key`, `kind` and `resource` as given, no name or zone."""
    return Alert(key, kind, resource, "", "", title, text, **fields)


@dataclass(frozen=True)
class Observation:
    """What the scheduler saw of a resource last time: its state and its nodes' states."""

    state: str
    nodes: Mapping[str, str] = field(default_factory=dict)


def _deadlines(qr: QueuedResourceInfo) -> list[tuple[str, datetime]]:
    """(kind, deadline) pairs of a resource: the termination time while it runs, valid-until while waiting."""
    found: list[tuple[str, datetime]] = []
    if qr.state in ("ACTIVE", "PROVISIONING"):
        end = qr.termination_time
        if end is None and qr.state == "ACTIVE" and qr.create_time and qr.max_run_duration:
            end = qr.create_time + qr.max_run_duration
        if end is not None:
            found.append(("expiry", end))
    if qr.state in WAITING_STATES and qr.valid_until is not None:
        found.append(("valid_until", qr.valid_until))
    return found


def _left(delta: timedelta) -> str:
    """Time left to the nearest minute ("15 min" for 14 min 40 s; "1 h 0 min"); "under a minute" below."""
    if delta < timedelta(seconds=30):
        return "under a minute"
    hours, minutes = divmod(round(delta.total_seconds() / 60), 60)
    return f"{hours} h {minutes} min" if hours else f"{minutes} min"


def _threshold_alert(
    qr: QueuedResourceInfo,
    kind: str,
    deadline: datetime,
    now: datetime,
    thresholds: Sequence[int],
    lead: timedelta,
) -> Alert | None:
    left = deadline - now
    if left <= timedelta(0):
        return None
    # Due at the last evaluation before the threshold: the next one (`lead` away) would be past it.
    crossed = sorted(t for t in thresholds if left <= timedelta(minutes=t) + lead)
    if not crossed:
        return None
    urgent, passed = crossed[0], crossed[1:]
    base = identity(qr)
    what = "terminates" if kind == "expiry" else "stops waiting for capacity (valid-until)"
    title = f"`{qr.name}` ({qr.zone}) {what} in {_left(left)}"
    return qr_alert(
        qr,
        kind,
        str(urgent),
        title,
        text=f"{qr.state} {qr.provisioning_model} {qr.accelerator_type}, deadline {utc_text(deadline)}",
        threshold=urgent,
        deadline=deadline,
        state=qr.state,
        supersedes=tuple(f"{base}|{kind}|{t}" for t in passed),
        buttons=True,
    )


def _state_text(qr: QueuedResourceInfo) -> str:
    if qr.state == "FAILED":
        return f"FAILED: {qr.error or 'no error message'}"
    if qr.state == "SUSPENDED":
        return f"SUSPENDED (initiated by {qr.state_initiator or 'unknown'})"
    return qr.state


def evaluate(
    resources: Iterable[QueuedResourceInfo],
    now: datetime,
    *,
    thresholds: Sequence[int] = DEFAULT_THRESHOLDS,
    previous: Mapping[str, Observation] | None = None,
    watch_since: datetime | None = None,
    stale_after: timedelta = timedelta(days=1),
    lead: timedelta = timedelta(0),
) -> list[Alert]:
    """The alerts due now for a listing of queued resources. Pure: no I/O, no clock.

    Expiry: for each deadline (`termination_time`, else create time + max run duration, of an ACTIVE or
    PROVISIONING QR; `valid_until` of a waiting QR), only the MOST URGENT threshold already crossed is
    returned (e.g. 40 min left with (60, 15, 5) -> the 60-minute alert; 3 min left -> the 5-minute alert,
    with the 60 and 15 keys in `supersedes`). A threshold counts as crossed up to `lead` early, so with
    evaluations `lead` apart it fires at the last one before it rather than up to `lead` after; the title
    gives the real time left to the nearest minute. Nothing once the deadline is past (the state change
    says it).
    Whether a key was already sent is the ledger's business: the same alert is returned on every call.

    State changes: compared with `previous` (identity -> Observation). A resource absent from `previous` is
    a baseline (no alert) unless it was created after `watch_since`, when its first state is announced
    ("NEW -> state"). A spot preemption (a node newly PREEMPTED, or the QR newly SUSPENDING/SUSPENDED by
    the service with its node deleted: `QueuedResourceInfo.preempted`) gives one "preempted" alert per node;
    a node seen before that no longer exists under a still ACTIVE queued resource gives a "node_gone"
    alert. DELETING resources give nothing.

    Stale: SUSPENDED or FAILED and created more than `stale_after` ago (one alert per resource).

    Args:
        resources: the listed QRs (only zones that answered: a missing QR is not treated as deleted here).
        now: timezone-aware current time.
        thresholds: minutes before a deadline, any order (default 60, 15, 5).
        previous: last observation per identity; None: everything is a baseline.
        watch_since: when the bot started watching (None: never announce first sightings).
        stale_after: age after which SUSPENDED/FAILED QRs are reported.
        lead: the time until the next evaluation (the caller's tick interval); 0 fires at the threshold
            or after it.

    Returns:
        Alerts in listing order (threshold alerts, then state, preemption and stale alerts per resource).

    Raises:
        ValueError: `now` is naive or a threshold is not a positive number of minutes.
    """
    if now.tzinfo is None:
        raise ValueError("now must be timezone-aware")
    if any(t <= 0 for t in thresholds):
        raise ValueError("thresholds are positive minutes")
    if lead < timedelta(0):
        raise ValueError("lead is a time to the next evaluation, not negative")
    seen = previous or {}
    alerts: list[Alert] = []
    for qr in resources:
        if qr.state in GONE_STATES:
            continue
        base = identity(qr)
        for kind, deadline in _deadlines(qr):
            alert = _threshold_alert(qr, kind, deadline, now, thresholds, lead)
            if alert is not None:
                alerts.append(alert)
        before = seen.get(base)
        prev_state = before.state if before else None
        if prev_state is None and watch_since is not None and qr.create_time and qr.create_time > watch_since:
            prev_state = NEW
        if prev_state is not None and prev_state != qr.state:
            alerts.append(
                qr_alert(
                    qr,
                    "state",
                    f"{prev_state}->{qr.state}",
                    f"`{qr.name}` ({qr.zone}): {prev_state} -> {_state_text(qr)}",
                    state=qr.state,
                    previous=prev_state,
                )
            )
        old_nodes = before.nodes if before else {}
        present = {node.name for node in qr.nodes}
        for name in old_nodes:  # a node that vanished while its queued resource is still ACTIVE
            if qr.state == "ACTIVE" and name not in present:
                alerts.append(
                    qr_alert(
                        qr,
                        "node_gone",
                        name,
                        f"`{qr.name}` ({qr.zone}): node `{name}` is gone (NOT_FOUND)",
                        state=qr.state,
                        node=name,
                    )
                )
        for node_name in _preempted_nodes(qr):
            was = before is not None and (
                old_nodes.get(node_name) == "PREEMPTED" or before.state in SUSPENDED
            )
            if before is not None and not was:
                alerts.append(
                    qr_alert(
                        qr,
                        "preempted",
                        node_name,
                        f"`{qr.name}` ({qr.zone}): spot node `{node_name}` was PREEMPTED; the queued "
                        f"resource is {qr.state} and must be deleted and created again",
                        state=qr.state,
                        node=node_name,
                    )
                )
        if qr.state in STALE_STATES and qr.create_time and now - qr.create_time > stale_after:
            alerts.append(
                qr_alert(
                    qr,
                    "stale",
                    "",
                    f"`{qr.name}` ({qr.zone}) is {qr.state} for over a day (holds quota until deleted)",
                    text=_state_text(qr),
                    state=qr.state,
                    buttons=True,
                )
            )
    return alerts


def mute_subjects(alert: Alert) -> frozenset[str]:
    """The `/alerts mute` subjects that silence `alert`: its queued resource name, its node, its kind, and
    for vLLM alerts "vllm" and the endpoint URL (e.g. "http://10.0.0.5:8000")."""
    subjects = {alert.kind}
    if alert.kind == "slo_ok":
        subjects.add("slo")
    subjects.update(s for s in (alert.name, alert.node) if s)
    if alert.resource.startswith("vllm:"):
        subjects.update({"vllm", alert.resource.removeprefix("vllm:")})
    return frozenset(subjects)


SUSPENDED = frozenset({"SUSPENDING", "SUSPENDED"})


def _preempted_nodes(qr: QueuedResourceInfo) -> list[str]:
    """Names of the nodes a spot preemption took: those shown PREEMPTED, else (the node already deleted, as
    Google does, see `QueuedResourceInfo.preempted`) the QR's node ids."""
    shown = [node.name for node in qr.nodes if node.state == "PREEMPTED"]
    if shown or not qr.preempted:
        return shown
    return list(qr.node_ids[:1]) or [qr.name]


def observe(qr: QueuedResourceInfo) -> Observation:
    """The Observation to remember for a listed QR."""
    return Observation(qr.state, {node.name: node.state for node in qr.nodes})


# ---- the ledger ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class LedgerRow:
    """One recorded alert key."""

    key: str
    kind: str
    resource: str
    status: str
    at: datetime
    text: str
    channel: str | None
    ts: str | None
    acked_by: str | None
    resolved_at: datetime | None


COUNTDOWN_KINDS = frozenset({"expiry", "valid_until"})


def lapsed_countdowns(
    open_rows: Iterable[LedgerRow], resources: Iterable[QueuedResourceInfo], answered: Iterable[str]
) -> list[Alert]:
    """Resolutions of open countdown alerts ("terminates in", "stops waiting ... (valid-until)") whose
    deadline no longer applies: their queued resource left the states it belongs to (see `evaluate`: a
    waiting one now ACTIVE, SUSPENDED or FAILED; a running one now SUSPENDED...), is DELETING, or is no
    longer listed in a zone that answered (deleted). Pure: no I/O.

    Args:
        open_rows: the ledger's open alerts (`AlertLedger.open_alerts`); other kinds are ignored.
        resources: the listed queued resources; answered: the zones whose listing succeeded.

    Returns:
        One Alert of kind "lapsed" per such row, keyed "{row key}|lapsed", `resolves` the row's key, titled
        "<the countdown's title>: no longer applies: now SUSPENDED" (or "... : deleted").
    """
    listed = {identity(qr): qr for qr in resources}
    zones = set(answered)
    found: list[Alert] = []
    for row in open_rows:
        if row.kind not in COUNTDOWN_KINDS:
            continue
        qr = listed.get(row.resource)
        if qr is None:
            if row.resource.split("/", 1)[0] not in zones:
                continue  # its zone did not answer: nothing is known
            now_what = "deleted"
        elif qr.state in GONE_STATES or row.kind not in {kind for kind, _ in _deadlines(qr)}:
            now_what = f"now {qr.state}"
        else:
            continue
        found.append(
            subject_alert(
                f"{row.key}|lapsed",
                "lapsed",
                row.resource,
                f"{row.text}: no longer applies: {now_what}",
                resolves=row.key,
            )
        )
    return found


def _row(row: Any) -> LedgerRow:
    return LedgerRow(
        key=row["key"],
        kind=row["kind"],
        resource=row["resource"],
        status=row["status"],
        at=aware(row["at"]) or datetime.now(UTC),
        text=row["text"],
        channel=row["channel"],
        ts=row["ts"],
        acked_by=row["acked_by"],
        resolved_at=aware(row["resolved_at"]),
    )


class AlertLedger:
    """The exactly-once ledger, mutes, observations and small watcher state, in the state store.

    Several deployments share one store. A ledger of a named deployment records which keys it claimed
    (`rows`, `counts` and `open_alerts` list only those) and namespaces its watcher values
    ("vllm_watch@staging"); keys stay unique across deployments, so `get`, `acknowledge` and `resolve` by
    key, mutes and observations are shared. Each ledger records which observations it made
    (`alert_observers`), so that `prune` forgets only its own history. The `default` deployment's ledger (no
    DEPLOYMENTS_FILE) is unscoped: it reads and writes exactly what a single-deployment bot always did.

    Args:
        store: a `Store` (its engine is used), or an Engine (its database is upgraded: `ops.store.schema`).
        deployment: the deployment whose alerts this ledger records (bot/deployments.py).
    """

    def __init__(self, store: Store | Engine, deployment: str = DEFAULT_DEPLOYMENT) -> None:
        self.engine: Engine = store.engine if isinstance(store, Store) else store
        self.deployment = deployment
        self.scoped = deployment != DEFAULT_DEPLOYMENT
        if not isinstance(store, Store):
            schema.upgrade(self.engine)  # a Store has done it

    def _kv_name(self, name: str) -> str:
        return f"{name}@{self.deployment}" if self.scoped else name

    # ---- keys
    def claim(self, alert: Alert, status: str, *, now: datetime) -> bool:
        """Insert the key with `status` ("sending", "superseded", "suppressed") if absent; atomic.

        Returns:
            True if this call inserted it (the caller may send); False if the key was already recorded.
        """
        try:
            with self.engine.begin() as conn:
                conn.execute(
                    insert(ledger_table).values(
                        key=alert.key,
                        kind=alert.kind,
                        resource=alert.resource,
                        status=status,
                        at=now,
                        text=alert.title[:1000],
                    )
                )
                if self.scoped:
                    conn.execute(delete(owners_table).where(owners_table.c.key == alert.key))
                    conn.execute(insert(owners_table).values(key=alert.key, deployment=self.deployment))
        except IntegrityError:
            return False
        return True

    def known(self, keys: Iterable[str]) -> set[str]:
        """The subset of `keys` (`Alert.key`s, superseded threshold keys) recorded already, any status and
        deployment, in one read per KEYS_PER_READ keys: a tick claims only new keys, not one failing insert
        per key."""
        wanted = sorted(set(keys))
        found: set[str] = set()
        with self.engine.connect() as conn:
            for chunk in chunks(wanted, self.engine):
                found.update(
                    conn.execute(select(ledger_table.c.key).where(ledger_table.c.key.in_(chunk))).scalars()
                )
        return found

    def prune(
        self, *, now: datetime, keep_days: int, listed: Iterable[str], zones: Iterable[str]
    ) -> tuple[int, int]:
        """Forget what is left of this deployment's resources that are gone: its ledger rows (with their owner
        rows) and its last observations older than `keep_days` whose resource is not in `listed`, in the
        `zones` that answered this listing (a resource of a zone that did not answer may still exist). A row
        still "sending" is kept (its post is under way).

        Another deployment's history is never read as gone: the same zone name in another project, or a
        resource of this project that only another deployment lists. Only the rows this deployment owns
        (`alert_owners`; for the `default` ledger, the rows no deployment owns) are deleted, and of an
        observation only this deployment's `alert_observers` row, the observation itself once no
        deployment observes it any more. The resources listed now are first recorded as this deployment's
        (an observation made before revision 0004, or first made by another deployment), so that they can
        be forgotten once they are gone.

        Args:
            now: timezone-aware current time; keep_days: retention, days (ALERT_RETENTION_DAYS).
            listed: identities (`identity(qr)`) of the QRs listed now; zones: the zones that answered.

        Returns: (ledger rows deleted, observations deleted).
        """
        cutoff = now - timedelta(days=keep_days)
        alive = set(listed)
        prefixes = tuple(f"{zone}/" for zone in zones)
        if not prefixes:
            return 0, 0
        self._adopt(sorted(alive))
        owners, observers = owners_table, observers_table
        owned = select(owners.c.key).where(owners.c.key == ledger_table.c.key)
        observed = select(observers.c.resource).where(observers.c.resource == observations_table.c.resource)
        mine: ColumnElement[bool] = observed.where(observers.c.deployment == self.deployment).exists()
        rows_query: ColumnElement[bool] = owned.where(owners.c.deployment == self.deployment).exists()
        if not self.scoped:  # the unscoped ledger's are also the rows and observations no deployment claims
            rows_query, mine = ~owned.exists(), mine | ~observed.exists()
        with self.engine.begin() as conn:
            old_rows = conn.execute(
                select(ledger_table.c.key, ledger_table.c.resource).where(
                    ledger_table.c.at < cutoff, ledger_table.c.status != "sending", rows_query
                )
            ).all()
            keys = [
                key for key, resource in old_rows if resource.startswith(prefixes) and resource not in alive
            ]
            old_seen = conn.execute(
                select(observations_table.c.resource).where(observations_table.c.at < cutoff, mine)
            ).scalars()
            gone = [
                resource for resource in old_seen if resource.startswith(prefixes) and resource not in alive
            ]
            for chunk in chunks(keys, self.engine):
                conn.execute(delete(ledger_table).where(ledger_table.c.key.in_(chunk)))
                conn.execute(delete(owners).where(owners.c.key.in_(chunk)))
            forgotten = 0
            for chunk in chunks(gone, self.engine):
                conn.execute(
                    delete(observers).where(
                        observers.c.resource.in_(chunk), observers.c.deployment == self.deployment
                    )
                )
                unobserved = observations_table.c.resource.in_(chunk), ~observed.exists()
                forgotten += conn.execute(delete(observations_table).where(*unobserved)).rowcount
        return len(keys), forgotten

    def _adopt(self, resources: Sequence[str]) -> None:
        """Record this deployment as an observer of the observed `resources` it is not recorded for yet (one
        read per KEYS_PER_READ of them). Two replicas adopting at once: the loser's insert fails on the key,
        and the winner's rows are the same."""
        table, observers = observations_table, observers_table
        mine = select(observers.c.resource).where(
            observers.c.resource == table.c.resource, observers.c.deployment == self.deployment
        )
        with contextlib.suppress(IntegrityError), self.engine.begin() as conn:
            for chunk in chunks(resources, self.engine):
                query = select(table.c.resource).where(table.c.resource.in_(chunk), ~mine.exists())
                new = [{"resource": r, "deployment": self.deployment} for r in conn.execute(query).scalars()]
                if new:
                    conn.execute(insert(observers), new)

    def claim_key(self, key: str, kind: str, resource: str, status: str, *, now: datetime) -> bool:
        """`claim` for a bare key (e.g. a superseded threshold)."""
        return self.claim(subject_alert(key, kind, resource, ""), status, now=now)

    def mark_sent(self, key: str, channel: str, ts: str | None) -> None:
        """Record that a claimed key was posted (its message channel and ts)."""
        with self.engine.begin() as conn:
            conn.execute(
                update(ledger_table)
                .where(ledger_table.c.key == key)
                .values(status="sent", channel=channel, ts=ts)
            )

    def release(self, key: str) -> None:
        """Forget a claim whose post failed, so a later tick retries it."""
        with self.engine.begin() as conn:
            released = conn.execute(
                delete(ledger_table).where(ledger_table.c.key == key, ledger_table.c.status == "sending")
            )
            if released.rowcount:
                conn.execute(delete(owners_table).where(owners_table.c.key == key))

    def get(self, key: str) -> LedgerRow | None:
        """The recorded key, or None."""
        with self.engine.connect() as conn:
            row = conn.execute(select(ledger_table).where(ledger_table.c.key == key)).mappings().first()
        return None if row is None else _row(row)

    def owner(self, key: str) -> str | None:
        """The deployment that claimed `key`: the named one recorded with it, `default` for a key claimed
        by the unscoped ledger; None for a key never recorded."""
        with self.engine.connect() as conn:
            owner = conn.execute(select(owners_table.c.deployment).where(owners_table.c.key == key)).scalar()
            known = (
                owner is not None
                or conn.execute(select(ledger_table.c.key).where(ledger_table.c.key == key)).first()
            )
        if not known:
            return None
        return str(owner) if owner is not None else DEFAULT_DEPLOYMENT

    def rows(
        self, *, since: datetime | None = None, status: str | None = None, open_only: bool = False
    ) -> list[LedgerRow]:
        """Recorded keys (of this ledger's deployment), oldest first, optionally only those at/after `since`,
        with `status`, or (`open_only`) neither acknowledged nor resolved."""
        query = select(ledger_table).order_by(ledger_table.c.at)
        if open_only:
            query = query.where(ledger_table.c.acked_by.is_(None), ledger_table.c.resolved_at.is_(None))
        if self.scoped:  # each row found checked against its owner, not a list of every key it owns
            mine = select(owners_table.c.key).where(
                owners_table.c.key == ledger_table.c.key, owners_table.c.deployment == self.deployment
            )
            query = query.where(mine.exists())
        if since is not None:
            query = query.where(ledger_table.c.at >= since)
        if status is not None:
            query = query.where(ledger_table.c.status == status)
        with self.engine.connect() as conn:
            return [_row(r) for r in conn.execute(query).mappings().all()]

    def counts(self) -> dict[str, int]:
        """Number of keys per status, e.g. {"sent": 12, "superseded": 3, "suppressed": 2}."""
        out: dict[str, int] = {}
        for row in self.rows():
            out[row.status] = out.get(row.status, 0) + 1
        return out

    def open_alerts(self, *, since: datetime) -> list[LedgerRow]:
        """Sent alerts since `since`, neither acknowledged nor resolved (state changes excluded)."""
        rows = self.rows(since=since, status="sent", open_only=True)
        return [r for r in rows if r.kind not in NOT_OPEN_KINDS]

    @staticmethod
    def open_alerts_by_deployment(
        store: Store | Engine, deployments: Iterable[str], *, since: datetime
    ) -> dict[str, list[LedgerRow]]:
        """`open_alerts(since=since)` of each deployment's ledger in `store`, the named ones in one query (a
        fleet's 50 ledgers read one by one were 50 queries of the same rows' table).

        Args:
            store: the state store the deployments share; deployments: their names; since: aware datetime.

        Returns:
            deployment name -> its open alerts, oldest first ([] for one with none).
        """
        engine: Engine = store.engine if isinstance(store, Store) else store
        names = list(dict.fromkeys(deployments))
        out: dict[str, list[LedgerRow]] = {name: [] for name in names}
        if DEFAULT_DEPLOYMENT in out:
            out[DEFAULT_DEPLOYMENT] = AlertLedger(store).open_alerts(since=since)
        scoped = [name for name in names if name != DEFAULT_DEPLOYMENT]
        if not scoped:
            return out
        table = ledger_table
        query = (
            select(table, owners_table.c.deployment.label("owner"))
            .join(owners_table, owners_table.c.key == table.c.key)
            .where(
                owners_table.c.deployment.in_(scoped),
                table.c.status == "sent",
                table.c.acked_by.is_(None),
                table.c.resolved_at.is_(None),
                table.c.at >= since,
            )
            .order_by(table.c.at)
        )
        with engine.connect() as conn:
            for found in conn.execute(query).mappings():
                row = _row(found)
                if row.kind not in NOT_OPEN_KINDS:
                    out[found["owner"]].append(row)
        return out

    def acknowledge(self, key: str, user_id: str) -> LedgerRow | None:
        """Mark a sent alert acknowledged by `user_id`. Returns the row, None if the key is unknown."""
        with self.engine.begin() as conn:
            conn.execute(update(ledger_table).where(ledger_table.c.key == key).values(acked_by=user_id))
        return self.get(key)

    def resolve(self, key: str, *, now: datetime) -> None:
        """Mark an alert resolved (e.g. vLLM recovered)."""
        with self.engine.begin() as conn:
            conn.execute(update(ledger_table).where(ledger_table.c.key == key).values(resolved_at=now))

    # ---- mutes
    def mute(self, name: str, until: datetime, *, by: str) -> None:
        """Mute every alert of subject `name` (see `mute_subjects`) until `until` (replaces an older mute)."""
        with self.engine.begin() as conn:
            conn.execute(delete(mutes_table).where(mutes_table.c.resource == name))
            conn.execute(insert(mutes_table).values(resource=name, until=until, by=by))

    def unmute(self, name: str) -> bool:
        """Remove a mute. Returns whether there was one."""
        with self.engine.begin() as conn:
            result = conn.execute(delete(mutes_table).where(mutes_table.c.resource == name))
        return bool(result.rowcount)

    def mutes(self, now: datetime) -> dict[str, tuple[datetime, str]]:
        """Active mutes: name -> (until, who muted)."""
        with self.engine.connect() as conn:
            rows = conn.execute(select(mutes_table)).mappings().all()
        out: dict[str, tuple[datetime, str]] = {}
        for row in rows:
            until = aware(row["until"])
            if until is not None and until > now:
                out[row["resource"]] = (until, row["by"])
        return out

    # ---- observations (state changes) and watcher state
    def observations(self, of: Iterable[str] | None = None) -> dict[str, Observation]:
        """identity -> last Observation, of every resource observed or only of the identities `of` (one read
        per KEYS_PER_READ of them: a tick reads the fleet it listed, not the history of resources gone)."""
        table = observations_table
        with self.engine.connect() as conn:
            if of is None:
                rows = list(conn.execute(select(table)).mappings())
            else:
                wanted = sorted(set(of))
                rows = []
                for chunk in chunks(wanted, self.engine):
                    rows += conn.execute(select(table).where(table.c.resource.in_(chunk))).mappings().all()
        return {r["resource"]: Observation(r["state"], json.loads(r["nodes"] or "{}")) for r in rows}

    def thread(self, resource: str) -> tuple[str | None, str | None]:
        """(channel, ts) of the resource's state message, (None, None) if none was posted."""
        with self.engine.connect() as conn:
            row = (
                conn.execute(select(observations_table).where(observations_table.c.resource == resource))
                .mappings()
                .first()
            )
        return (None, None) if row is None else (row["channel"], row["ts"])

    def observe(
        self,
        resource: str,
        seen: Observation,
        *,
        now: datetime,
        channel: str | None = None,
        ts: str | None = None,
    ) -> None:
        """Remember the last state of a resource (and, when given, its state message's channel and ts)."""
        values: dict[str, Any] = {"state": seen.state, "nodes": json.dumps(dict(seen.nodes)), "at": now}
        if ts is not None:
            values.update(channel=channel, ts=ts)
        with self.engine.begin() as conn:
            table = observations_table
            done = conn.execute(update(table).where(table.c.resource == resource).values(**values))
            if done.rowcount == 0:
                try:
                    with conn.begin_nested():
                        conn.execute(insert(table).values(resource=resource, **values))
                        self._observed(conn, resource)
                except IntegrityError:
                    conn.execute(update(table).where(table.c.resource == resource).values(**values))

    def _observed(self, conn: Connection, resource: str) -> None:
        """Record this deployment as an observer of `resource`, whose observation `conn` just inserted (a row
        left by an observation deleted under a concurrent write is replaced, as `claim` replaces an owner)."""
        observers = observers_table
        mine = observers.c.resource == resource, observers.c.deployment == self.deployment
        conn.execute(delete(observers).where(*mine))
        conn.execute(insert(observers).values(resource=resource, deployment=self.deployment))

    def observe_many(self, seen: Mapping[str, Observation], *, now: datetime) -> None:
        """Remember several resources' last states in one transaction (keeps their message ts)."""
        if not seen:
            return
        table = observations_table
        with self.engine.begin() as conn:
            known: set[str] = set()
            for chunk in chunks(sorted(seen), self.engine):
                query = select(table.c.resource).where(table.c.resource.in_(chunk))
                known.update(conn.execute(query).scalars())
            for resource, obs in seen.items():
                values: dict[str, Any] = {"state": obs.state, "nodes": json.dumps(dict(obs.nodes)), "at": now}
                if resource in known:
                    conn.execute(update(table).where(table.c.resource == resource).values(**values))
                else:
                    conn.execute(insert(table).values(resource=resource, **values))
                    self._observed(conn, resource)

    def get_value(self, name: str) -> str | None:
        """A stored watcher value (JSON text) of this ledger's deployment, or None."""
        with self.engine.connect() as conn:
            query = select(kv_table).where(kv_table.c.name == self._kv_name(name))
            row = conn.execute(query).mappings().first()
        return None if row is None else str(row["value"])

    def set_value(self, name: str, value: str) -> None:
        """Store a watcher value (JSON text) of this ledger's deployment."""
        name = self._kv_name(name)
        with self.engine.begin() as conn:
            conn.execute(delete(kv_table).where(kv_table.c.name == name))
            conn.execute(insert(kv_table).values(name=name, value=value))

    def watch_since(self, now: datetime) -> datetime:
        """When alerting of this ledger's deployment first ran on this store (set to `now` on the first
        call; atomic). Read first: every tick asks, and an insert that fails on the key costs a write."""
        text = self.get_value("watch_since")
        if text is None:
            with contextlib.suppress(IntegrityError), self.engine.begin() as conn:
                conn.execute(insert(kv_table).values(name=self._kv_name("watch_since"), value=iso_utc(now)))
            text = self.get_value("watch_since") or iso_utc(now)
        return from_rfc3339(text)
