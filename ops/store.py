"""The state store (SQLAlchemy Core): audit trail, confirmations, zone memory, benchmark results, model
answers with their Helpful / Not helpful feedback, and
for several replicas sharing one database: named leases (one replica runs the scheduler) and processed Slack
event ids (a retried or duplicated event is handled once).

SQLite by default (`sqlite:///tpu-chatops.db`); a PostgreSQL URL (`postgresql+psycopg://user:pw@host/db`)
works through the same code. Tables are created on first use. Every timestamp is timezone-aware UTC; callers
pass `now` so tests control time.
"""

from __future__ import annotations

import json
import secrets
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import (
    Column,
    DateTime,
    Float,
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
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

from ops.errors import NotFound, OpsError

metadata = MetaData()

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
    Column("at", DateTime(timezone=True), nullable=False, index=True),
    Column("user_id", String(32), nullable=False),
    Column("channel_id", String(32), nullable=False),
    Column("question", Text, nullable=False),
    Column("model", String(300), nullable=False),
    Column("tools", Text, nullable=False),  # comma-separated: pre-fetched facts and tool calls
    Column("verdict", String(16), nullable=True),  # helpful | not helpful
    Column("rated_by", String(32), nullable=True),
    Column("rated_at", DateTime(timezone=True), nullable=True),
)


@dataclass(frozen=True)
class AnswerRecord:
    """A model answer kept for feedback: the question (redacted by the caller), who wrote the answer, the
    facts and tools it was given, and the latest Helpful / Not helpful verdict (None until rated)."""

    id: int
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


def _confirmation(row: Any) -> Confirmation:
    return Confirmation(
        token=row["token"],
        command=row["command"],
        plan=row["plan"],
        requested_by=row["requested_by"],
        channel_id=row["channel_id"],
        created_at=_aware(row["created_at"]) or datetime.now(UTC),
        expires_at=_aware(row["expires_at"]) or datetime.now(UTC),
    )


def _answer(row: Any) -> AnswerRecord:
    return AnswerRecord(
        id=int(row["id"]),
        at=_aware(row["at"]) or datetime.now(UTC),
        user_id=row["user_id"],
        channel_id=row["channel_id"],
        question=row["question"],
        model=row["model"],
        tools=tuple(t for t in str(row["tools"]).split(",") if t),
        verdict=row["verdict"],
        rated_by=row["rated_by"],
        rated_at=_aware(row["rated_at"]),
    )


def _aware(moment: datetime | None) -> datetime | None:
    """SQLite returns naive datetimes; everything here is stored in UTC."""
    if moment is None:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


class Store:
    """The state store.

    Args:
        url: a SQLAlchemy URL, e.g. "sqlite:///tpu-chatops.db" or "postgresql+psycopg://user@host/db".
    """

    def __init__(self, url: str) -> None:
        self.engine: Engine = create_engine(url, pool_pre_ping=True)
        metadata.create_all(self.engine)

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
        return [
            AuditEntry(
                at=_aware(row["at"]) or datetime.now(UTC),
                user_id=row["user_id"],
                channel_id=row["channel_id"],
                action=row["action"],
                command=row["command"],
                outcome=row["outcome"],
                duration_s=row["duration_s"],
            )
            for row in rows
        ]

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

        `plan` is a fingerprint of what the confirmation showed (see `bot.render.Reply.plan`).
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
        return None if row is None else _confirmation(row)

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
        return _confirmation(row)

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
        return {
            row["zone"]: ZoneFailure(
                row["zone"],
                row["accelerator_type"],
                row["provisioning_model"],
                row["message"],
                _aware(row["at"]) or datetime.now(UTC),
            )
            for row in rows
        }

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
    ) -> int:
        """Keep a model answer's question, model and tools (facts and tool calls) for feedback.

        Returns:
            The answer id the Helpful / Not helpful buttons carry.
        """
        with self.engine.begin() as conn:
            result = conn.execute(
                insert(answers_table).values(
                    at=now,
                    user_id=user_id,
                    channel_id=channel_id,
                    question=question,
                    model=model,
                    tools=",".join(tools),
                )
            )
        key = result.inserted_primary_key
        if key is None:
            raise NotFound("the answer was not stored")
        return int(key[0])

    def rate_answer(self, answer_id: int, verdict: str, *, user_id: str, now: datetime) -> AnswerRecord:
        """Record a verdict ("helpful" or "not helpful") on an answer; a later click replaces it.

        Raises:
            NotFound: no answer has that id.
        """
        with self.engine.begin() as conn:
            done = conn.execute(
                update(answers_table)
                .where(answers_table.c.id == answer_id)
                .values(verdict=verdict, rated_by=user_id, rated_at=now)
            )
            if done.rowcount != 1:
                raise NotFound(f"no answer {answer_id} is stored", "ask again")
            row = conn.execute(select(answers_table).where(answers_table.c.id == answer_id)).mappings().one()
        return _answer(row)

    def rated_answers(self, last: int = 20) -> list[AnswerRecord]:
        """The `last` most recently rated answers, newest first."""
        query = (
            select(answers_table)
            .where(answers_table.c.verdict.is_not(None))
            .order_by(answers_table.c.rated_at.desc(), answers_table.c.id.desc())
            .limit(last)
        )
        with self.engine.connect() as conn:
            return [_answer(row) for row in conn.execute(query).mappings()]

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
