"""The state store's tables of the alerts (`AlertLedger`'s, `ops.alerts.ledger`) and how they are read in
runs of keys. They live on `ops.store.state.metadata`; the migrations (`ops.store.schema`) create and change
them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence

from sqlalchemy import Column, DateTime, Index, String, Table, Text
from sqlalchemy.engine import Engine

from ops.store.state import metadata

__all__ = [
    "KEYS_PER_READ",
    "chunks",
    "kv_table",
    "ledger_table",
    "mutes_table",
    "observations_table",
    "observers_table",
    "owners_table",
]

KEYS_PER_READ = {"sqlite": 500, "postgresql": 50}
"""Keys per `IN (...)` list. SQLite searches the primary key for each, and 500 stay under its host parameter
limit (999 before 3.32, https://www.sqlite.org/limits.html#max_variable_number); PostgreSQL planned 200 keys
against 30 days of 1,000 resources' alerts as a sequential scan (history read every tick), 50 by index."""


def chunks(items: Sequence[str], engine: Engine) -> Iterator[Sequence[str]]:
    """`items` in runs of at most KEYS_PER_READ keys of `engine`'s database, one `IN (...)` list each."""
    size = KEYS_PER_READ.get(engine.dialect.name, min(KEYS_PER_READ.values()))
    for start in range(0, len(items), size):
        yield items[start : start + size]


ledger_table = Table(
    "alert_ledger",
    metadata,
    Column("key", String(400), primary_key=True),  # the UNIQUE key of exactly-once
    Column("kind", String(32), nullable=False),
    Column("resource", String(200), nullable=False),
    Column("status", String(16), nullable=False),  # sending | sent | superseded | suppressed
    Column("at", DateTime(timezone=True), nullable=False),
    Column("text", Text, nullable=False, default=""),
    Column("channel", String(32), nullable=True),
    Column("ts", String(32), nullable=True),
    Column("acked_by", String(32), nullable=True),
    Column("resolved_at", DateTime(timezone=True), nullable=True),
    # The tick's reads: the rows of a status since a time (`rows`: the alerts held back); revision 0002.
    Index("ix_alert_ledger_status_at", "status", "at"),
    # The open alerts (`open_alerts`), not reading the resolved or acknowledged (most of history); 0003.
    Index("ix_alert_ledger_open", "status", "acked_by", "resolved_at", "at"),
)

mutes_table = Table(
    "alert_mutes",
    metadata,
    Column("resource", String(100), primary_key=True),  # a subject: QR or node name, "vllm", URL, kind
    Column("until", DateTime(timezone=True), nullable=False),
    Column("by", String(32), nullable=False),
)

observations_table = Table(
    "alert_observations",
    metadata,
    Column("resource", String(200), primary_key=True),  # identity(): zone/name@create
    Column("state", String(40), nullable=False),
    Column("nodes", Text, nullable=False, default="{}"),  # JSON node id -> state
    Column("channel", String(32), nullable=True),
    Column("ts", String(32), nullable=True),  # the resource's state message, updated in place
    Column("at", DateTime(timezone=True), nullable=False),
)

kv_table = Table(
    "alert_kv",
    metadata,
    Column("name", String(100), primary_key=True),
    Column("value", Text, nullable=False),
)

# Which deployment raised a key (bot/deployments.py); only written for a named deployment, so a single
# `default` deployment's ledger is exactly the unscoped one.
owners_table = Table(
    "alert_owners",
    metadata,
    Column("key", String(400), primary_key=True),
    Column("deployment", String(64), nullable=False, index=True),
)

# Which deployments observe a resource (revision 0004). Deployments share one observation per resource (its
# last state and state message), so a deployment that no longer lists it forgets only its own row here, and
# the observation goes with the last one; an observation no row names (recorded before 0004) is the
# `default` deployment's, as a key without an owner is.
observers_table = Table(
    "alert_observers",
    metadata,
    Column("resource", String(200), primary_key=True),
    Column("deployment", String(64), primary_key=True),
)
