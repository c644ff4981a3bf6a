"""Alembic's environment for the state store: run by `ops.store.schema.upgrade` on the connection it passes in
(`config.attributes["connection"]`), or by the `alembic` command for developers (`make revision`), which
reads the URL from the Config (`sqlalchemy.url`, set by ops/store/migrations/alembic.ini's caller)."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from ops.alerts import ledger as alerts
from ops.alerts import outbox as alert_outbox
from ops.alerts import planned as maintenance
from ops.store import followups
from ops.store import state as store
from ops.tpu import recovery
from ops.vllm import history

# Every table of the store's database, as the code defines it today (what autogenerate compares with): one
# MetaData, `ops.store.state.metadata`, on which each of these modules defines its tables when imported.
TARGET = store.metadata
_DEFINED_ON_STORE_METADATA = (alert_outbox, alerts, followups, history, maintenance, recovery)


def run() -> None:
    """Run the migrations Alembic was asked for, on the given connection or one to `sqlalchemy.url`."""
    config = context.config
    connection = config.attributes.get("connection")
    if connection is not None:
        context.configure(connection=connection, target_metadata=TARGET, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    url = config.get_main_option("sqlalchemy.url")
    if not url:
        raise RuntimeError("set sqlalchemy.url (e.g. alembic -x, or `make revision`)")
    engine = create_engine(url)
    try:
        with engine.begin() as conn:
            context.configure(connection=conn, target_metadata=TARGET, render_as_batch=True)
            with context.begin_transaction():
                context.run_migrations()
    finally:
        engine.dispose()


if hasattr(context, "config"):  # run by Alembic; imported otherwise (a scan of every module), it runs nothing
    run()
