"""Schema migrations on SQLite files: a store made at the baseline revision is upgraded with its rows kept;
a database made before migrations (tables, no `alembic_version`) is stamped, not re-created; a database of a
newer release is refused; the revisions build exactly what the code's tables declare. The same upgrade path
on PostgreSQL: tests/integration/test_store_postgres.py."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from threading import Barrier

import pytest
from alembic import command
from alembic.autogenerate import compare_metadata
from alembic.runtime.migration import MigrationContext
from sqlalchemy import create_engine, inspect

from ops.alerts import ledger as alerts
from ops.alerts import outbox as alert_outbox
from ops.alerts import planned as maintenance
from ops.store import followups, schema
from ops.store import state as store_module
from ops.store.migrations.baseline import baseline_metadata
from ops.store.state import Store
from ops.tpu import recovery
from ops.vllm import history
from tests import schema_cases

# Every table's definition in the code: the one `ops.store.state.metadata` (the modules imported for their
# tables).
MODELS = [store_module.metadata]
assert alerts and alert_outbox and followups and history and maintenance and recovery


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'state.db'}"


def test_a_store_at_the_baseline_is_upgraded_with_its_rows(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    old = schema_cases.store_at_baseline(url, monkeypatch)
    token = schema_cases.write_rows(old)
    indexes = {i["name"] for i in inspect(old.engine).get_indexes("alert_ledger")}
    assert not indexes & set(schema_cases.NEW_INDEXES)
    old.close()

    store = Store(url)
    schema_cases.at_head(store)
    schema_cases.check_rows(store, token)
    store.close()


def test_a_database_made_before_migrations_is_stamped_and_kept(url: str) -> None:
    schema_cases.make_pre_migration(url)
    store = Store(url)
    schema_cases.at_head(store)
    schema_cases.check_pre_migration_rows(store)
    store.close()


def test_a_table_the_release_before_had_not_made_yet_is_created(url: str) -> None:
    schema_cases.make_pre_migration(url, tables=("audit", "alert_ledger"))
    store = Store(url)
    schema_cases.at_head(store)
    assert set(baseline_metadata().tables) <= set(inspect(store.engine).get_table_names())
    schema_cases.check_pre_migration_rows(store)
    store.close()


def test_a_database_of_a_newer_release_is_refused_and_left_alone(url: str) -> None:
    Store(url).close()
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql("UPDATE alembic_version SET version_num = '0999'")
    with pytest.raises(schema.SchemaTooNew) as refused:
        Store(url)
    assert "0999" in str(refused.value) and schema.head() in str(refused.value)
    assert refused.value.database == "0999" and refused.value.code == schema.head()
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT version_num FROM alembic_version").scalar() == "0999"
    engine.dispose()


def test_the_revisions_build_what_the_code_declares(url: str) -> None:
    store = Store(url)
    with store.engine.connect() as conn:
        assert compare_metadata(MigrationContext.configure(conn), MODELS) == []
    store.close()


def test_the_baseline_is_the_code_before_revision_2(url: str) -> None:
    """Revision 0001 makes exactly the baseline (what `create_all` made before migrations): the code's tables
    less the indexes revisions 0002 and 0003 add and the table of 0004."""
    engine = create_engine(url)
    with engine.begin() as conn:
        command.upgrade(schema.alembic_config(conn), schema.BASELINE)
    with engine.connect() as conn:
        diff = compare_metadata(MigrationContext.configure(conn), MODELS)
    assert sorted((op[0], op[1].name) for op in diff) == sorted(
        [
            *(("add_index", name) for name in schema_cases.NEW_INDEXES),
            *(("add_table", name) for name in schema_cases.NEW_TABLES),
        ]
    )
    engine.dispose()


def test_every_revision_downgrades_to_an_empty_database(url: str) -> None:
    store = Store(url)
    with store.engine.begin() as conn:
        command.downgrade(schema.alembic_config(conn), "base")
    assert inspect(store.engine).get_table_names() == ["alembic_version"]
    store.close()


def test_replicas_starting_at_once_upgrade_once(url: str) -> None:
    barrier = Barrier(4)

    def start() -> str:
        barrier.wait()
        store = Store(url)
        store.close()
        return store.revision

    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(lambda _: start(), range(4))) == [schema.head()] * 4


def test_the_migrations_ship_inside_the_package() -> None:
    assert (schema.MIGRATIONS / "env.py").is_file() and (schema.MIGRATIONS / "script.py.mako").is_file()
    assert schema.head() == "0004"


def test_every_table_is_on_the_one_metadata() -> None:
    # The migrations compare the database with `ops.store.state.metadata` alone: a second MetaData in product
    # code would hold tables that neither autogenerate nor this test sees.
    root = Path(__file__).resolve().parents[2]
    others = [
        str(path.relative_to(root))
        for package in ("bot", "ops", "llm")
        for path in sorted((root / package).rglob("*.py"))
        if "MetaData(" in path.read_text()
        and path.relative_to(root).as_posix()
        not in {"ops/store/state.py", "ops/store/migrations/baseline.py"}
    ]
    assert others == []
    assert history.samples_table.metadata is followups.followups_table.metadata is store_module.metadata
