"""Messages to correct later: the last message of a command that ended before it knew everything (a create
answered ambiguously, whose resource may still appear). Reconciliation edits the message once it learns
what became of each such create, and drops the record when nothing is left open.

One row per operation (table `followups`, made by the migrations): where the message is and its content as the
bot last wrote it (opaque JSON text to this module: the bot renders and re-renders it).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import Column, DateTime, String, Table, Text, delete, insert, select, update

from ops.store.state import Store, metadata

__all__ = ["Followup", "Followups"]

followups_table = Table(
    "followups",
    metadata,
    Column("operation_id", String(64), primary_key=True),
    Column("channel_id", String(32), nullable=False),
    Column("ts", String(32), nullable=True),
    Column("thread_ts", String(32), nullable=True),
    Column("message", Text, nullable=False),
    Column("at", DateTime(timezone=True), nullable=False),
)


@dataclass(frozen=True)
class Followup:
    """A message to correct: the operation it reports, its channel, its ts (None when it could not be
    posted as an editable message: a correction is then posted), its thread, its content, when it was
    written (aware UTC)."""

    operation_id: str
    channel_id: str
    ts: str | None
    thread_ts: str | None
    message: str
    at: datetime


class Followups:
    """The followups of the state store."""

    def __init__(self, store: Store) -> None:
        self.engine = store.engine

    def save(self, followup: Followup) -> None:
        """Write (or replace) the followup of `followup.operation_id`."""
        table = followups_table
        with self.engine.begin() as conn:
            conn.execute(delete(table).where(table.c.operation_id == followup.operation_id))
            conn.execute(insert(table).values(**{**followup.__dict__, "at": followup.at.astimezone(UTC)}))

    def operations(self) -> list[str]:
        """The operation ids with a followup, oldest first."""
        table = followups_table
        with self.engine.connect() as conn:
            return [str(row[0]) for row in conn.execute(select(table.c.operation_id).order_by(table.c.at))]

    def get(self, operation_id: str) -> Followup | None:
        """The followup of an operation, or None."""
        table = followups_table
        with self.engine.connect() as conn:
            row = conn.execute(select(table).where(table.c.operation_id == operation_id)).mappings().first()
        if row is None:
            return None
        at = row["at"] if row["at"].tzinfo else row["at"].replace(tzinfo=UTC)
        return Followup(
            row["operation_id"], row["channel_id"], row["ts"], row["thread_ts"], row["message"], at
        )

    def rewrite(self, operation_id: str, message: str, ts: str | None) -> None:
        """Record the content now shown (and its ts, which a refused edit may have changed)."""
        table = followups_table
        with self.engine.begin() as conn:
            conn.execute(
                update(table).where(table.c.operation_id == operation_id).values(message=message, ts=ts)
            )

    def drop(self, operation_id: str) -> None:
        """Forget the followup (nothing of its operation is open any more)."""
        table = followups_table
        with self.engine.begin() as conn:
            conn.execute(delete(table).where(table.c.operation_id == operation_id))
