"""The upgrade path of the state store's schema, shared by the SQLite tests (tests/unit/test_migrations.py)
and the PostgreSQL ones (tests/integration/test_store_postgres.py): a store at the baseline revision with rows
written through its own API, a database made before migrations existed, and the checks that an upgrade kept
every row."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import create_engine, insert, inspect, select

from ops.alerts.ledger import AlertLedger, ledger_table
from ops.store import schema
from ops.store import state as store_module
from ops.store.migrations.baseline import baseline_metadata
from ops.store.state import AuditEntry, Store, audit_table

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)
KEY = "us-east5-a/gemma4-qr@2026-05-01T00:00:00Z|expiry|15"
NEW_INDEXES = ("ix_alert_ledger_status_at", "ix_alert_ledger_open")
"""The alert ledger's indexes the revisions after the baseline add (0002, 0003)."""
NEW_TABLES = ("alert_observers",)
"""The tables the revisions after the baseline add (0004)."""


def store_at_baseline(url: str, monkeypatch: pytest.MonkeyPatch) -> Store:
    """A Store whose database is at the baseline revision (as the first release with migrations made it)."""
    upgrade = schema.upgrade
    with monkeypatch.context() as patch:
        patch.setattr(store_module.schema, "upgrade", lambda engine: upgrade(engine, to=schema.BASELINE))
        store = Store(url)
    assert store.revision == schema.BASELINE
    return store


def write_rows(store: Store) -> str:
    """Write rows in several tables through the store's and the ledger's own API.

    Returns:
        The token of the confirmation it stored.
    """
    store.record(AuditEntry(NOW, "U1", "C1", "command", "tpu list", "received", 0.5))
    store.record(AuditEntry(NOW + timedelta(seconds=1), "U1", "C1", "result", "tpu list", "ok", 1.5, "1.2"))
    token = store.create_confirmation("tpu delete q", "U1", "C1", ttl=timedelta(minutes=5), now=NOW).token
    assert store.acquire_lease("alert-scheduler", "replica-a", 60, NOW)
    ledger = AlertLedger(store)
    assert ledger.claim_key(KEY, "expiry", "us-east5-a/gemma4-qr", "sending", now=NOW)
    ledger.mark_sent(KEY, "C-ALERTS", "1700000000.000100")
    ledger.mute("gemma4-qr", NOW + timedelta(hours=1), by="U2")
    return token


def check_rows(store: Store, token: str) -> None:
    """What `write_rows` wrote is all there, read through the same API."""
    assert [line.command for line in store.audit()] == ["tpu list", "tpu list"]
    assert store.audit()[0].thread_ts == "1.2" and store.audit()[1].duration_s == 0.5
    confirmation = store.get_confirmation(token)
    assert confirmation is not None and confirmation.command == "tpu delete q"
    assert store.lease_holder("alert-scheduler", NOW) == "replica-a"
    ledger = AlertLedger(store)
    (sent,) = ledger.open_alerts(since=NOW - timedelta(minutes=1))
    assert sent.key == KEY and sent.ts == "1700000000.000100"
    assert ledger.mutes(NOW) == {"gemma4-qr": (NOW + timedelta(hours=1), "U2")}


def at_head(store: Store) -> None:
    """The database is at the newest revision, with the indexes of revisions 0002 and 0003 and the table of
    revision 0004."""
    assert store.revision == schema.head()
    with store.engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalars().all() == [
            schema.head()
        ]
    assert set(NEW_INDEXES) <= {index["name"] for index in inspect(store.engine).get_indexes("alert_ledger")}
    assert set(NEW_TABLES) <= set(inspect(store.engine).get_table_names())


def make_pre_migration(url: str, tables: tuple[str, ...] | None = None) -> None:
    """A database as the release before migrations left it: the baseline tables made by `create_all` (only
    `tables` of them, when given: a table that release had not made yet), no `alembic_version`, and a row in
    the audit trail and the alert ledger."""
    engine = create_engine(url)
    try:
        metadata = baseline_metadata()
        chosen = None if tables is None else [metadata.tables[name] for name in tables]
        metadata.create_all(engine, tables=chosen)
        with engine.begin() as conn:
            conn.execute(
                insert(audit_table).values(
                    at=NOW, user_id="U1", channel_id="C1", action="command", command="tpu list", outcome="ok"
                )
            )
            conn.execute(
                insert(ledger_table).values(
                    key=KEY, kind="expiry", resource="us-east5-a/gemma4-qr", status="sent", at=NOW, text="t"
                )
            )
        assert "alembic_version" not in inspect(engine).get_table_names()
    finally:
        engine.dispose()


def check_pre_migration_rows(store: Store) -> None:
    """The rows `make_pre_migration` wrote survived the stamp and the upgrade."""
    assert [line.command for line in store.audit()] == ["tpu list"]
    with store.engine.connect() as conn:
        assert conn.execute(select(ledger_table.c.key)).scalars().all() == [KEY]
