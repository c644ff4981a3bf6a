"""The state store (SQLAlchemy Core): audit trail, confirmations, zone memory, benchmark results, model
answers with their Helpful / Not helpful feedback, and
for several replicas sharing one database: named leases (one replica runs the scheduler) and processed Slack
event ids (a retried or duplicated event is handled once).

SQLite by default (`sqlite:///tpu-chatops.db`); a PostgreSQL URL (`postgresql+psycopg://user:pw@host/db`)
works through the same code. The schema is Alembic's (`ops.store.schema`): `Store(url)` upgrades the database
to
the newest revision at start, keeping its rows (and refuses one written by a newer release). Every
timestamp is timezone-aware UTC; callers pass `now` so tests control time.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, fields
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import (
    Column,
    DateTime,
    Float,
    ForeignKey,
    Integer,
    MetaData,
    String,
    Table,
    Text,
    UniqueConstraint,
    case,
    create_engine,
    delete,
    insert,
    literal,
    select,
    update,
)
from sqlalchemy.engine import Engine, RowMapping
from sqlalchemy.exc import IntegrityError

from ops.errors import NotFound, OpsError
from ops.store import schema

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

_Record = TypeVar("_Record", bound="DataclassInstance")

metadata = MetaData()
"""The one MetaData of every table of the state store: this module's and those ops.alerts.ledger,
ops.alerts.outbox,
ops.store.followups, ops.vllm.history, ops.alerts.planned and ops.tpu.recovery define on it (the migrations'
target)."""

audit_table = Table(
    "audit",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at", DateTime(timezone=True), nullable=False, index=True),
    Column("user_id", String(32), nullable=False),
    Column("channel_id", String(32), nullable=False),
    Column("action", String(32), nullable=False),  # command | confirm | refuse | result
    Column("command", Text, nullable=False),
    Column("outcome", String(200), nullable=False),
    Column("duration_s", Float, nullable=True),
    # The Slack thread the request came from or was answered in (None: the channel itself, e.g. a slash
    # command), so a question in a thread can read what was run there.
    Column("thread_ts", String(32), nullable=True),
)

confirmations_table = Table(
    "confirmations",
    metadata,
    Column("token", String(64), primary_key=True),
    Column("command", Text, nullable=False),
    Column("plan", Text, nullable=False, default=""),
    Column("requested_by", String(32), nullable=False),
    Column("channel_id", String(32), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),
    Column("used_at", DateTime(timezone=True), nullable=True),
    Column("used_by", String(32), nullable=True),
)

zone_failures_table = Table(
    "zone_failures",
    metadata,
    Column("zone", String(64), nullable=False),
    Column("accelerator_type", String(64), nullable=False),
    Column("provisioning_model", String(32), nullable=False),
    Column("message", Text, nullable=False),
    Column("at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("zone", "accelerator_type", "provisioning_model"),
)

bench_table = Table(
    "bench_results",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at", DateTime(timezone=True), nullable=False),
    Column("kind", String(32), nullable=False),
    Column("params", Text, nullable=False),
    Column("results", Text, nullable=False),
)

leases_table = Table(
    "leases",
    metadata,
    Column("name", String(64), primary_key=True),
    Column("holder", String(128), nullable=False),
    Column("acquired_at", DateTime(timezone=True), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),
)

# One operation per name: a row per (project, zone-or-"search", name) held by the running request.
operation_leases_table = Table(
    "operation_leases",
    metadata,
    Column("key", String(255), primary_key=True),
    Column("request_id", String(64), nullable=False, index=True),
    Column("user_id", String(32), nullable=False),
    Column("command", Text, nullable=False),
    Column("started_at", DateTime(timezone=True), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),
)

# Every create the bot sends, written BEFORE it is sent, so a restart knows what may exist.
inflight_table = Table(
    "inflight_requests",
    metadata,
    Column("request_id", String(64), primary_key=True),
    Column("operation_id", String(64), nullable=False, index=True),
    Column("kind", String(16), nullable=False),  # find | create | ensure | recover
    Column("project", String(64), nullable=False),
    Column("zone", String(64), nullable=False),
    Column("name", String(64), nullable=False),
    Column("user_id", String(32), nullable=False),
    Column("channel_id", String(32), nullable=False),
    Column("state", String(16), nullable=False, index=True),
    Column("sent_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Column("note", Text, nullable=False, default=""),
)

# In-flight states that may still have a resource in the cloud (the others are final).
INFLIGHT_OPEN = ("sending", "created")

processed_events_table = Table(
    "processed_events",
    metadata,
    Column("event_id", String(128), primary_key=True),
    Column("at", DateTime(timezone=True), nullable=False, index=True),
)

answers_table = Table(
    "answers",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    # What the buttons and `/gemma rate` carry: random, so an answer cannot be found by counting.
    Column("public_id", String(32), nullable=True, unique=True),
    Column("at", DateTime(timezone=True), nullable=False, index=True),
    Column("user_id", String(32), nullable=False),
    Column("channel_id", String(32), nullable=False),
    Column("question", Text, nullable=False),
    Column("model", String(300), nullable=False),
    Column("tools", Text, nullable=False),  # comma-separated: pre-fetched facts and tool calls
    # Superseded by answer_ratings (one verdict per user); no longer written.
    Column("verdict", String(16), nullable=True),
    Column("rated_by", String(32), nullable=True),
    Column("rated_at", DateTime(timezone=True), nullable=True),
)

# One verdict per user and answer; a user's later click replaces only their own.
answer_ratings_table = Table(
    "answer_ratings",
    metadata,
    Column("answer_id", Integer, ForeignKey("answers.id"), nullable=False, index=True),
    Column("user_id", String(32), nullable=False),
    Column("verdict", String(16), nullable=False),  # helpful | not helpful
    Column("rated_at", DateTime(timezone=True), nullable=False),
    UniqueConstraint("answer_id", "user_id"),
)


@dataclass(frozen=True)
class AnswerRecord:
    """A model answer kept for feedback: its public id (random hex, what its buttons carry), the question
    (redacted by the caller), who asked where, the model, the facts and tools it was given, and one user's
    verdict ("helpful" | "not helpful"), the rater and when (None until rated)."""

    id: str
    at: datetime
    user_id: str
    channel_id: str
    question: str
    model: str
    tools: tuple[str, ...]
    verdict: str | None
    rated_by: str | None
    rated_at: datetime | None


@dataclass(frozen=True)
class AuditEntry:
    """One audit line: who did what where, and how it ended (duration in seconds, when known)."""

    at: datetime
    user_id: str
    channel_id: str
    action: str
    command: str
    outcome: str
    duration_s: float | None = None
    thread_ts: str | None = None


@dataclass(frozen=True)
class Confirmation:
    """A pending change: the exact command line, who asked for it, where, and until when it may be run."""

    token: str
    command: str
    plan: str
    requested_by: str
    channel_id: str
    created_at: datetime
    expires_at: datetime


class ConfirmationRefused(OpsError):
    """The confirmation is unknown, expired or already used."""


@dataclass(frozen=True)
class ZoneFailure:
    """A permanent create failure remembered for (zone, accelerator type, provisioning model)."""

    zone: str
    accelerator_type: str
    provisioning_model: str
    message: str
    at: datetime


@dataclass(frozen=True)
class OperationLease:
    """Who runs an operation on a name: the request, the Slack user, the command and since when."""

    key: str
    request_id: str
    user_id: str
    command: str
    started_at: datetime
    expires_at: datetime


class OperationBusy(OpsError):
    """Another request holds the name: `holder` says who started it and when."""

    def __init__(self, holder: OperationLease, who: str | None = None) -> None:
        """`who` names the holder's user for people (the bot passes a live Slack mention); default the id."""
        when = holder.started_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
        super().__init__(
            f"`{holder.command}` started by {who or holder.user_id} at {when} is still running on this name",
            "wait for it to finish (or cancel it), then try again",
        )
        self.holder = holder


@dataclass(frozen=True)
class InflightRequest:
    """A create the bot sent (or was about to send) and what became of it.

    Attributes:
        request_id: the id in the resource's ownership label.
        operation_id: the operation (search or command) it belongs to; its lease says whether it runs.
        kind: "find" | "create" | "ensure" | "recover".
        state: "sending" (written before the call), "created" (the API has it), or final: "kept",
            "deleted", "absent", "adopted", "not ours", "failed".
    """

    request_id: str
    operation_id: str
    kind: str
    project: str
    zone: str
    name: str
    user_id: str
    channel_id: str
    state: str
    sent_at: datetime
    updated_at: datetime
    note: str = ""


@dataclass(frozen=True)
class BenchRun:
    """One stored benchmark run: its id, when it ran (UTC), "bench" or "sweep", and its parameters and
    figures as stored (for "bench": `BenchParams` fields and `BenchResult` fields)."""

    run_id: int
    at: datetime
    kind: str
    params: dict[str, Any]
    results: dict[str, Any]


def _aware(moment: datetime | None) -> datetime | None:
    """SQLite returns naive datetimes; everything here is stored in UTC."""
    if moment is None:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _from_row(cls: type[_Record], row: RowMapping, **values: Any) -> _Record:
    """A `cls` dataclass from one table row: each field from the column of the same name (a column the class
    lacks, such as an autoincrement id or `used_at`, is left out), times made UTC-aware, and `values`
    (converted columns, e.g. JSON text) given as they are."""
    for field in fields(cls):
        if field.name not in values and field.name in row:
            value = row[field.name]
            values[field.name] = _aware(value) if isinstance(value, datetime) else value
    return cls(**values)


def _bench_run(row: RowMapping) -> BenchRun:
    params, results = json.loads(row["params"]), json.loads(row["results"])
    return _from_row(BenchRun, row, run_id=int(row["id"]), params=params, results=results)


def _answer(row: RowMapping, rating: Mapping[str, Any] | None = None) -> AnswerRecord:
    """An answer row with one of its ratings (`user_id`, `verdict`, `rated_at`; None: unrated)."""
    return AnswerRecord(
        id=str(row["public_id"]),
        at=_aware(row["at"]) or datetime.min.replace(tzinfo=UTC),
        user_id=row["user_id"],
        channel_id=row["channel_id"],
        question=row["question"],
        model=row["model"],
        tools=tuple(t for t in str(row["tools"]).split(",") if t),
        verdict=rating["verdict"] if rating else None,
        rated_by=rating["user_id"] if rating else None,
        rated_at=_aware(rating["rated_at"]) if rating else None,
    )


ANSWER_ID_BYTES = 12
"""Random bytes of an answer's public id (24 hex characters): `secrets.token_hex`."""


class Store:
    """The state store.

    Args:
        url: a SQLAlchemy URL, e.g. "sqlite:///tpu-chatops.db" or "postgresql+psycopg://user@host/db".

    Raises:
        SchemaTooNew: the database was migrated by a newer release (`ops.store.schema.upgrade`).
    """

    def __init__(self, url: str) -> None:
        self.engine: Engine = create_engine(url, pool_pre_ping=True)
        try:
            self.revision = schema.upgrade(self.engine)
        except BaseException:
            self.engine.dispose()
            raise

    def close(self) -> None:
        self.engine.dispose()

    # ---- audit

    def record(self, entry: AuditEntry) -> None:
        """Append one audit line."""
        with self.engine.begin() as conn:
            conn.execute(insert(audit_table).values(**entry.__dict__))

    def audit(self, last: int = 20) -> list[AuditEntry]:
        """The `last` audit lines, newest first."""
        query = select(audit_table).order_by(audit_table.c.id.desc()).limit(last)
        with self.engine.connect() as conn:
            rows = conn.execute(query).mappings().all()
        return [_from_row(AuditEntry, row) for row in rows]

    def channel_audit(
        self, channel_id: str, *, since: datetime, thread_ts: str | None = None, last: int = 50
    ) -> list[AuditEntry]:
        """The audit lines of one channel since `since` (UTC), oldest first, at most the `last` newest: with
        `thread_ts`, only those of that thread and of no thread (slash commands); else all of the channel."""
        table = audit_table
        query = select(table).where(table.c.channel_id == channel_id, table.c.at >= since)
        if thread_ts is not None:
            query = query.where((table.c.thread_ts == thread_ts) | table.c.thread_ts.is_(None))
        with self.engine.connect() as conn:
            rows = conn.execute(query.order_by(table.c.id.desc()).limit(last)).mappings().all()
        return [_from_row(AuditEntry, row) for row in reversed(rows)]

    # ---- confirmations

    def create_confirmation(
        self,
        command: str,
        requested_by: str,
        channel_id: str,
        *,
        ttl: timedelta,
        now: datetime,
        plan: str = "",
    ) -> Confirmation:
        """Store a pending change and return it with an unguessable token (32 hex characters).

        `plan` is a fingerprint of what the confirmation showed (see `bot.slack.render.Reply.plan`).
        """
        confirmation = Confirmation(
            secrets.token_hex(16), command, plan, requested_by, channel_id, now, now + ttl
        )
        with self.engine.begin() as conn:
            conn.execute(insert(confirmations_table).values(**confirmation.__dict__))
        return confirmation

    def get_confirmation(self, token: str) -> Confirmation | None:
        """The confirmation with this token, used or not; None if unknown."""
        table = confirmations_table
        with self.engine.connect() as conn:
            row = conn.execute(select(table).where(table.c.token == token)).mappings().first()
        return None if row is None else _from_row(Confirmation, row)

    def consume_confirmation(self, token: str, used_by: str, *, now: datetime) -> Confirmation:
        """Mark a confirmation used, atomically: it works once, and only before it expires.

        Raises:
            ConfirmationRefused: unknown token, already used, or expired.
        """
        table = confirmations_table
        with self.engine.begin() as conn:
            row = conn.execute(select(table).where(table.c.token == token)).mappings().first()
            if row is None:
                raise ConfirmationRefused("this confirmation is unknown", "run the command again")
            if row["used_at"] is not None:
                raise ConfirmationRefused(
                    f"this confirmation was already used by <@{row['used_by']}>", "run the command again"
                )
            expires_at = _aware(row["expires_at"])
            assert expires_at is not None
            if now >= expires_at:
                raise ConfirmationRefused("this confirmation has expired", "run the command again")
            claimed = conn.execute(
                update(table)
                .where(table.c.token == token, table.c.used_at.is_(None))
                .values(used_at=now, used_by=used_by)
            )
            if claimed.rowcount != 1:
                raise ConfirmationRefused("this confirmation was already used", "run the command again")
        return _from_row(Confirmation, row)

    # ---- zone memory (capacity search)

    def remember_zone_failure(
        self, zone: str, accelerator_type: str, provisioning_model: str, message: str, *, now: datetime
    ) -> None:
        """Remember that `zone` permanently rejects this type and provisioning model (replaces older)."""
        table = zone_failures_table
        key = (
            (table.c.zone == zone)
            & (table.c.accelerator_type == accelerator_type)
            & (table.c.provisioning_model == provisioning_model)
        )
        with self.engine.begin() as conn:
            conn.execute(delete(table).where(key))
            conn.execute(
                insert(table).values(
                    zone=zone,
                    accelerator_type=accelerator_type,
                    provisioning_model=provisioning_model,
                    message=message,
                    at=now,
                )
            )

    def zone_failures(self, accelerator_type: str, provisioning_model: str) -> dict[str, ZoneFailure]:
        """Remembered permanent failures for this type and provisioning model, by zone."""
        table = zone_failures_table
        query = select(table).where(
            table.c.accelerator_type == accelerator_type, table.c.provisioning_model == provisioning_model
        )
        with self.engine.connect() as conn:
            rows = conn.execute(query).mappings().all()
        return {row["zone"]: _from_row(ZoneFailure, row) for row in rows}

    # ---- benchmark results

    def save_bench(self, kind: str, params: dict[str, Any], results: dict[str, Any], *, now: datetime) -> int:
        """Store one benchmark run (parameters and figures as JSON) and return its id."""
        with self.engine.begin() as conn:
            result = conn.execute(
                insert(bench_table).values(
                    at=now, kind=kind, params=json.dumps(params, default=str), results=json.dumps(results)
                )
            )
        key = result.inserted_primary_key
        if key is None:
            raise NotFound("benchmark row was not stored")
        return int(key[0])

    def bench_runs(self, last: int = 20) -> list[BenchRun]:
        """The `last` stored benchmark runs, newest first."""
        query = select(bench_table).order_by(bench_table.c.id.desc()).limit(last)
        with self.engine.connect() as conn:
            return [_bench_run(row) for row in conn.execute(query).mappings()]

    def bench_run(self, run_id: int) -> BenchRun:
        """One stored benchmark run.

        Raises:
            NotFound: no run has that id.
        """
        with self.engine.connect() as conn:
            row = conn.execute(select(bench_table).where(bench_table.c.id == run_id)).mappings().first()
        if row is None:
            raise NotFound(f"no stored benchmark run {run_id}", "list them with /vllm bench list")
        return _bench_run(row)

    # ---- model answers and their feedback

    def save_answer(
        self,
        question: str,
        model: str,
        tools: list[str],
        *,
        user_id: str,
        channel_id: str,
        now: datetime,
    ) -> str:
        """Keep a model answer's question, model and tools (facts and tool calls) for feedback.

        Returns:
            The answer's public id (ANSWER_ID_BYTES random bytes as hex), which the Helpful / Not helpful
            buttons carry; ids are random so that no answer can be reached by counting.
        """
        public_id = secrets.token_hex(ANSWER_ID_BYTES)
        with self.engine.begin() as conn:
            conn.execute(
                insert(answers_table).values(
                    public_id=public_id,
                    at=now,
                    user_id=user_id,
                    channel_id=channel_id,
                    question=question,
                    model=model,
                    tools=",".join(tools),
                )
            )
        return public_id

    def rate_answer(
        self,
        answer_id: str,
        verdict: str,
        *,
        user_id: str,
        channel_id: str | None,
        now: datetime,
    ) -> AnswerRecord:
        """Record `user_id`'s verdict ("helpful" or "not helpful") on an answer; their later verdict replaces
        their own earlier one, never another user's.

        Args:
            answer_id: the answer's public id.
            channel_id: the channel the rating comes from: only answers given there can be rated; None for
                any channel (an admin).

        Raises:
            NotFound: no answer has that id in that channel (the same message whether it exists elsewhere
                or not at all, so nothing leaks across channels).
        """
        answers, ratings = answers_table, answer_ratings_table
        query = select(answers).where(answers.c.public_id == answer_id)
        if channel_id is not None:
            query = query.where(answers.c.channel_id == channel_id)
        values = {"verdict": verdict, "rated_at": now}
        with self.engine.begin() as conn:
            row = conn.execute(query).mappings().first()
            if row is None:
                raise NotFound(f"no answer {answer_id} in this channel", "rate it from its own message")
            mine = (ratings.c.answer_id == row["id"]) & (ratings.c.user_id == user_id)
            if conn.execute(update(ratings).where(mine).values(**values)).rowcount != 1:
                conn.execute(insert(ratings).values(answer_id=row["id"], user_id=user_id, **values))
            rating = conn.execute(select(ratings).where(mine)).mappings().one()
        return _answer(row, dict(rating))

    def rated_answers(self, last: int = 20, *, channel_id: str | None = None) -> list[AnswerRecord]:
        """The `last` most recent ratings, newest first, each with its answer (one record per rating).

        Args:
            channel_id: only answers given in this channel; None for every channel (an admin).
        """
        answers, ratings = answers_table, answer_ratings_table
        rating = (
            ratings.c.user_id.label("rater"),
            ratings.c.verdict.label("rating"),
            ratings.c.rated_at.label("rated"),
        )
        query = select(answers, *rating).join(ratings, ratings.c.answer_id == answers.c.id)
        if channel_id is not None:
            query = query.where(answers.c.channel_id == channel_id)
        query = query.order_by(ratings.c.rated_at.desc(), answers.c.id.desc()).limit(last)
        with self.engine.connect() as conn:
            rows = conn.execute(query).mappings().all()
        return [
            _answer(row, {"user_id": row["rater"], "verdict": row["rating"], "rated_at": row["rated"]})
            for row in rows
        ]

    # ---- leases (several replicas: exactly one runs the scheduler)

    def acquire_lease(self, name: str, holder: str, ttl_s: float, now: datetime) -> bool:
        """Take the lease `name` for `holder` until `now + ttl_s`, atomically: taken if nobody holds it or
        the holder's lease has expired, renewed if `holder` already holds it; refused otherwise.

        The holder calls this again well within `ttl_s` (e.g. every ttl_s / 3) to keep the lease; when it
        dies, another replica gets it at its first call after the lease expires.

        Returns:
            True if `holder` holds the lease until `now + ttl_s`.
        """
        now = now.astimezone(UTC)
        expires_at = now + timedelta(seconds=ttl_s)
        table = leases_table
        with self.engine.begin() as conn:
            # One conditional UPDATE: PostgreSQL re-checks the WHERE clause on the locked row after a
            # concurrent update commits, and SQLite serializes writers, so two replicas cannot both win.
            taken = conn.execute(
                update(table)
                .where(table.c.name == name, (table.c.holder == holder) | (table.c.expires_at <= now))
                .values(
                    holder=holder,
                    expires_at=expires_at,
                    acquired_at=_case_acquired(table, holder, now),
                )
            )
            if taken.rowcount == 1:
                return True
        try:
            with self.engine.begin() as conn:
                conn.execute(
                    insert(table).values(name=name, holder=holder, acquired_at=now, expires_at=expires_at)
                )
        except IntegrityError:
            return False  # someone else holds it (or inserted it first)
        return True

    def release_lease(self, name: str, holder: str) -> bool:
        """Give the lease up (on shutdown) so another replica takes it at once. True if `holder` held it."""
        table = leases_table
        with self.engine.begin() as conn:
            gone = conn.execute(delete(table).where(table.c.name == name, table.c.holder == holder))
        return gone.rowcount == 1

    def lease_holder(self, name: str, now: datetime) -> str | None:
        """Who holds the lease `name` at `now` (None if nobody, or it has expired)."""
        table = leases_table
        with self.engine.connect() as conn:
            row = conn.execute(select(table).where(table.c.name == name)).mappings().first()
        if row is None:
            return None
        expires_at = _aware(row["expires_at"])
        assert expires_at is not None
        return str(row["holder"]) if now < expires_at else None

    # ---- one operation per name, and the creates in flight

    def acquire_operation(
        self, keys: list[str], request_id: str, user_id: str, command: str, *, ttl_s: float, now: datetime
    ) -> None:
        """Hold every key in `keys` for `request_id` until `now + ttl_s`, all or none, atomically.

        A key held by another request whose lease has not expired refuses the whole set; an expired one
        (its holder died and stopped renewing) is taken over.

        Raises:
            OperationBusy: another live request holds one of the keys (it names who and since when).
        """
        now = now.astimezone(UTC)
        table = operation_leases_table
        try:
            with self.engine.begin() as conn:
                for key in sorted(keys):  # one order everywhere: two requests never wait on each other
                    row = conn.execute(select(table).where(table.c.key == key)).mappings().first()
                    if row is not None:
                        held = _from_row(OperationLease, row)
                        if held.request_id != request_id and held.expires_at > now:
                            raise OperationBusy(held)
                        conn.execute(
                            delete(table).where(table.c.key == key, table.c.request_id == held.request_id)
                        )
                    conn.execute(
                        insert(table).values(
                            key=key,
                            request_id=request_id,
                            user_id=user_id,
                            command=command,
                            started_at=now,
                            expires_at=now + timedelta(seconds=ttl_s),
                        )
                    )
        except IntegrityError:  # another replica inserted the same key between our read and insert
            holder = self.operation_holder(keys, now)
            if holder is None:
                raise OpsError("the name was taken at the same moment", "try again") from None
            raise OperationBusy(holder) from None

    def operation_holder(self, keys: list[str], now: datetime) -> OperationLease | None:
        """The live lease on any of `keys`, or None."""
        table = operation_leases_table
        with self.engine.connect() as conn:
            rows = conn.execute(select(table).where(table.c.key.in_(keys))).mappings().all()
        live = [_from_row(OperationLease, row) for row in rows if (_aware(row["expires_at"]) or now) > now]
        return live[0] if live else None

    def renew_operation(self, request_id: str, *, ttl_s: float, now: datetime) -> None:
        """Extend every lease of `request_id` to `now + ttl_s` (the holder's heartbeat)."""
        table = operation_leases_table
        with self.engine.begin() as conn:
            conn.execute(
                update(table)
                .where(table.c.request_id == request_id)
                .values(expires_at=now.astimezone(UTC) + timedelta(seconds=ttl_s))
            )

    def release_operation(self, request_id: str) -> None:
        """Drop every lease of `request_id` (the operation ended)."""
        table = operation_leases_table
        with self.engine.begin() as conn:
            conn.execute(delete(table).where(table.c.request_id == request_id))

    def operation_running(self, request_id: str, now: datetime) -> bool:
        """True while `request_id` holds a lease that has not expired."""
        table = operation_leases_table
        with self.engine.connect() as conn:
            rows = conn.execute(select(table.c.expires_at).where(table.c.request_id == request_id)).all()
        return any((_aware(row[0]) or now) > now for row in rows)

    def record_inflight(self, request: InflightRequest) -> None:
        """Write a create down before it is sent (state "sending")."""
        with self.engine.begin() as conn:
            conn.execute(insert(inflight_table).values(**request.__dict__))

    def update_inflight(self, request_id: str, state: str, *, now: datetime, note: str = "") -> None:
        """Move an in-flight create to `state` (see InflightRequest), with a short note."""
        table = inflight_table
        with self.engine.begin() as conn:
            conn.execute(
                update(table)
                .where(table.c.request_id == request_id)
                .values(state=state, updated_at=now.astimezone(UTC), note=note[:500])
            )

    def inflight(self, *, open_only: bool = True, operation_id: str | None = None) -> list[InflightRequest]:
        """In-flight creates, oldest first: those that may still exist (`open_only`), of one operation."""
        table = inflight_table
        query = select(table).order_by(table.c.sent_at)
        if open_only:
            query = query.where(table.c.state.in_(INFLIGHT_OPEN))
        if operation_id is not None:
            query = query.where(table.c.operation_id == operation_id)
        with self.engine.connect() as conn:
            rows = conn.execute(query).mappings().all()
        return [_from_row(InflightRequest, row) for row in rows]

    # ---- processed Slack events (retries and duplicates across replicas)

    def first_time_event(self, event_id: str, now: datetime) -> bool:
        """Record that `event_id` is being handled, atomically: True for the first caller (on any replica
        sharing this database), False for every later one."""
        try:
            with self.engine.begin() as conn:
                conn.execute(insert(processed_events_table).values(event_id=event_id, at=now.astimezone(UTC)))
        except IntegrityError:
            return False
        return True

    def forget_events(self, before: datetime) -> int:
        """Delete processed event ids recorded before `before`; returns how many were deleted."""
        table = processed_events_table
        with self.engine.begin() as conn:
            gone = conn.execute(delete(table).where(table.c.at < before.astimezone(UTC)))
        return int(gone.rowcount)


def _case_acquired(table: Table, holder: str, now: datetime) -> Any:
    """`acquired_at` stays when the holder renews, and becomes `now` when the lease changes hands."""
    return case((table.c.holder == holder, table.c.acquired_at), else_=literal(now, DateTime(timezone=True)))
