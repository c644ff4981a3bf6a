"""Maintenance windows: planned work (a bot-started create, restart, reset or recovery) is not an incident.

A window is opened for a deployment when the bot starts such work and stays open until vLLM serves again or
its deadline passes (`MAINTENANCE_TIMEOUT_MIN`, 30 by default: vLLM on TPU downloads the weights and
compiles before it listens, about 10 minutes for Gemma 4 31B per the Trillium vLLM recipe in
https://github.com/AI-Hypercomputer/tpu-recipes, longer on a first compile). While it is open the
alert scheduler holds health alerts of that deployment; when it closes, the command's thread is told
"serving after N min" or that start-up looks stuck. One row per deployment, in the state store.

One story per window: the work is marked done (`work_done`) only when the command's body finished without
error (a failed body closes the window as "failed"), and "serving" is judged only after that, on the
endpoint of the window's `target` queued resource when it has one (a recovery of another resource than the
one serving now is not "serving" because the other one answers). So "serving after" is said once, when the
new server answers, and never before a failure.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Column, DateTime, String, Table, Text, delete, insert, inspect, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.schema import CreateColumn

from ops.store import schema
from ops.store.state import Store, metadata

__all__ = ["DEFAULT_DEPLOYMENT", "MaintenanceWindows", "Window"]

DEFAULT_DEPLOYMENT = "default"

windows_table = Table(
    "maintenance_windows",
    metadata,
    Column("deployment", String(64), primary_key=True),
    Column("reason", Text, nullable=False),  # e.g. "vllm restart", "tpu create gemma4-qr"
    Column("opened_by", String(32), nullable=False),
    Column("opened_at", DateTime(timezone=True), nullable=False),
    Column("deadline", DateTime(timezone=True), nullable=False),
    Column("channel", String(32), nullable=True),  # where the command's message is
    Column("thread_ts", String(32), nullable=True),  # the command's message: replies go in its thread
    Column("closed_at", DateTime(timezone=True), nullable=True),
    Column("outcome", String(32), nullable=True),  # serving | stuck | failed
    Column("target", String(64), nullable=True),  # the queued resource whose vLLM must answer (None: any)
    Column("work_done_at", DateTime(timezone=True), nullable=True),  # the command's body finished
)
_ADDED_COLUMNS = ("target", "work_done_at")  # added after the table's first release: migrated in place


def _aware(moment: datetime | None) -> datetime | None:
    if moment is None:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Window:
    """A maintenance window. `closed_at`/`outcome` are None while it is open."""

    deployment: str
    reason: str
    opened_by: str
    opened_at: datetime
    deadline: datetime
    channel: str | None
    thread_ts: str | None
    closed_at: datetime | None = None
    outcome: str | None = None
    target: str | None = None
    work_done_at: datetime | None = None

    @property
    def is_open(self) -> bool:
        return self.closed_at is None


def _window(row: Any) -> Window:
    now = datetime.now(UTC)
    return Window(
        deployment=row["deployment"],
        reason=row["reason"],
        opened_by=row["opened_by"],
        opened_at=_aware(row["opened_at"]) or now,
        deadline=_aware(row["deadline"]) or now,
        channel=row["channel"],
        thread_ts=row["thread_ts"],
        closed_at=_aware(row["closed_at"]),
        outcome=row["outcome"],
        target=row["target"],
        work_done_at=_aware(row["work_done_at"]),
    )


class MaintenanceWindows:
    """Windows in the state store (the table is made by the migrations, `ops.store.schema`; a table of an
    older
    release gains its newer columns here).

    Args:
        store: a `Store` or an Engine.
    """

    def __init__(self, store: Store | Engine) -> None:
        self.engine: Engine = store.engine if isinstance(store, Store) else store
        if not isinstance(store, Store):
            schema.upgrade(self.engine)  # a Store has done it
        self._add_missing_columns()

    def _add_missing_columns(self) -> None:
        """Add the columns a table made by an older release lacks (nullable, so old rows stay valid)."""
        have = {column["name"] for column in inspect(self.engine).get_columns(windows_table.name)}
        with self.engine.begin() as conn:
            for name in _ADDED_COLUMNS:
                if name not in have:
                    ddl = CreateColumn(windows_table.c[name]).compile(dialect=self.engine.dialect)
                    conn.exec_driver_sql(f"ALTER TABLE {windows_table.name} ADD COLUMN {ddl}")

    def open(
        self,
        reason: str,
        *,
        by: str,
        now: datetime,
        timeout: timedelta,
        channel: str | None = None,
        thread_ts: str | None = None,
        deployment: str = DEFAULT_DEPLOYMENT,
        target: str | None = None,
    ) -> Window:
        """Open (or replace) the deployment's window until vLLM serves, at most until `now + timeout`;
        `target`: the queued resource whose vLLM must answer (None: the deployment's endpoint)."""
        window = Window(deployment, reason[:200], by, now, now + timeout, channel, thread_ts, target=target)
        with self.engine.begin() as conn:
            conn.execute(delete(windows_table).where(windows_table.c.deployment == deployment))
            conn.execute(
                insert(windows_table).values(
                    deployment=deployment,
                    reason=window.reason,
                    opened_by=by,
                    opened_at=now,
                    deadline=window.deadline,
                    channel=channel,
                    thread_ts=thread_ts,
                    target=target,
                )
            )
        return window

    def work_done(self, *, now: datetime, deployment: str = DEFAULT_DEPLOYMENT) -> None:
        """Mark the open window's work finished: from now on a vLLM that answers is the work's result."""
        table = windows_table
        with self.engine.begin() as conn:
            conn.execute(
                update(table)
                .where(table.c.deployment == deployment, table.c.closed_at.is_(None))
                .values(work_done_at=now)
            )

    def get(self, deployment: str = DEFAULT_DEPLOYMENT) -> Window | None:
        """The deployment's latest window (open or closed), or None."""
        table = windows_table
        with self.engine.connect() as conn:
            row = conn.execute(select(table).where(table.c.deployment == deployment)).mappings().first()
        return None if row is None else _window(row)

    def current(self, deployment: str = DEFAULT_DEPLOYMENT) -> Window | None:
        """The deployment's open window, or None."""
        window = self.get(deployment)
        return window if window is not None and window.is_open else None

    def close(self, outcome: str, *, now: datetime, deployment: str = DEFAULT_DEPLOYMENT) -> bool:
        """Close the open window with `outcome` ("serving", "stuck" or "failed"), atomically.

        Returns:
            True if this call closed it (so exactly one replica reports the outcome).
        """
        table = windows_table
        with self.engine.begin() as conn:
            done = conn.execute(
                update(table)
                .where(table.c.deployment == deployment, table.c.closed_at.is_(None))
                .values(closed_at=now, outcome=outcome)
            )
        return done.rowcount == 1
