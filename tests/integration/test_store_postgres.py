"""The state store on a real PostgreSQL (a throwaway cluster): the same SQLAlchemy code as on SQLite, and
the atomic operations several replicas rely on (confirmations, the scheduler lease, processed events)."""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from datetime import UTC, datetime, timedelta
from threading import Barrier

import pytest
from sqlalchemy import create_engine, inspect

from bot.slack.listeners import SeenEvents
from ops.errors import NotFound
from ops.store import schema
from ops.store.state import AuditEntry, ConfirmationRefused, Store
from tests import postgres, prune_cases, schema_cases

NOW = datetime(2026, 5, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def cluster_url() -> Iterator[str]:
    with postgres.cluster() as url:
        yield url


@pytest.fixture
def url(cluster_url: str) -> str:
    return postgres.create_database(cluster_url)


@pytest.fixture
def store(url: str) -> Iterator[Store]:
    store = Store(url)
    yield store
    store.close()


def test_tables_are_created_on_postgresql(store: Store) -> None:
    assert store.engine.dialect.name == "postgresql"
    tables = set(inspect(store.engine).get_table_names())
    assert {
        "audit",
        "confirmations",
        "zone_failures",
        "bench_results",
        "leases",
        "processed_events",
    } <= tables


def test_audit_round_trip(store: Store) -> None:
    for i in range(3):
        store.record(
            AuditEntry(NOW + timedelta(seconds=i), "U1", "C1", "command", f"tpu list {i}", "received", 0.5)
        )
    lines = store.audit(last=2)
    assert [line.command for line in lines] == ["tpu list 2", "tpu list 1"]
    assert lines[0].at == NOW + timedelta(seconds=2) and lines[0].at.tzinfo is not None
    assert lines[0].duration_s == 0.5


def test_confirmation_is_consumed_exactly_once_under_concurrency(url: str) -> None:
    replicas = [Store(url) for _ in range(4)]
    try:
        pending = replicas[0].create_confirmation(
            "tpu delete gemma4-qr", "U1", "C1", ttl=timedelta(minutes=5), now=NOW, plan="p1"
        )
        assert replicas[1].get_confirmation(pending.token) == pending
        barrier = Barrier(16)

        def click(i: int) -> bool:
            barrier.wait()
            try:
                replicas[i % 4].consume_confirmation(pending.token, f"U{i}", now=NOW + timedelta(seconds=1))
            except ConfirmationRefused:
                return False
            return True

        with ThreadPoolExecutor(16) as pool:
            outcomes = list(pool.map(click, range(16)))
        assert outcomes.count(True) == 1
        with pytest.raises(ConfirmationRefused, match="already used"):
            replicas[2].consume_confirmation(pending.token, "U9", now=NOW + timedelta(seconds=2))
        late = replicas[0].create_confirmation("tpu stop x", "U1", "C1", ttl=timedelta(minutes=5), now=NOW)
        with pytest.raises(ConfirmationRefused, match="expired"):
            replicas[3].consume_confirmation(late.token, "U1", now=NOW + timedelta(minutes=6))
    finally:
        for replica in replicas:
            replica.close()


def test_zone_memory_and_bench(store: Store) -> None:
    store.remember_zone_failure("us-east5-a", "v6e-8", "spot", "old", now=NOW)
    store.remember_zone_failure("us-east5-a", "v6e-8", "spot", "not offered", now=NOW + timedelta(hours=1))
    store.remember_zone_failure("us-central1-b", "v6e-8", "spot", "not offered", now=NOW)
    failures = store.zone_failures("v6e-8", "spot")
    assert set(failures) == {"us-east5-a", "us-central1-b"}
    assert failures["us-east5-a"].message == "not offered"
    assert failures["us-east5-a"].at == NOW + timedelta(hours=1)
    assert store.zone_failures("v6e-8", "on-demand") == {}
    first = store.save_bench("latency", {"n": 1}, {"p50": 0.2}, now=NOW)
    assert store.save_bench("latency", {"n": 2}, {"p50": 0.3}, now=NOW) == first + 1
    newest, oldest = store.bench_runs()
    assert (newest.run_id, oldest.run_id) == (first + 1, first)
    assert newest.params == {"n": 2} and newest.results == {"p50": 0.3} and newest.at == NOW
    assert store.bench_run(first).results == {"p50": 0.2}
    assert [run.run_id for run in store.bench_runs(last=1)] == [first + 1]
    with pytest.raises(NotFound, match="no stored benchmark run"):
        store.bench_run(first + 99)


def test_lease_take_renew_refuse_expire_release(store: Store) -> None:
    assert store.lease_holder("scheduler", NOW) is None
    assert store.acquire_lease("scheduler", "a", 30, NOW)
    assert not store.acquire_lease("scheduler", "b", 30, NOW + timedelta(seconds=10))
    assert store.acquire_lease("scheduler", "a", 30, NOW + timedelta(seconds=20))  # renewed to +50 s
    assert not store.acquire_lease("scheduler", "b", 30, NOW + timedelta(seconds=45))
    assert store.lease_holder("scheduler", NOW + timedelta(seconds=45)) == "a"
    assert store.lease_holder("scheduler", NOW + timedelta(seconds=50)) is None
    assert store.acquire_lease("scheduler", "b", 30, NOW + timedelta(seconds=50))  # a's lease expired
    assert not store.acquire_lease("scheduler", "a", 30, NOW + timedelta(seconds=51))
    assert store.acquire_lease("other", "a", 30, NOW + timedelta(seconds=51))  # leases are per name
    assert not store.release_lease("scheduler", "a")
    assert store.release_lease("scheduler", "b")
    assert store.acquire_lease("scheduler", "a", 30, NOW + timedelta(seconds=52))


@pytest.mark.parametrize("state", ["absent", "expired"])
def test_lease_has_one_winner_under_concurrency(url: str, state: str) -> None:
    replicas = [Store(url) for _ in range(4)]
    try:
        if state == "expired":
            assert replicas[0].acquire_lease("scheduler", "dead", 10, NOW - timedelta(seconds=60))
        barrier = Barrier(12)

        def grab(i: int) -> bool:
            barrier.wait()
            return replicas[i % 4].acquire_lease("scheduler", f"replica-{i}", 30, NOW)

        with ThreadPoolExecutor(12) as pool:
            outcomes = list(pool.map(grab, range(12)))
        assert outcomes.count(True) == 1
        winner = f"replica-{outcomes.index(True)}"
        assert replicas[1].lease_holder("scheduler", NOW) == winner
    finally:
        for replica in replicas:
            replica.close()


def test_first_time_event_is_atomic_across_replicas(url: str) -> None:
    replicas = [Store(url) for _ in range(4)]
    try:
        barrier = Barrier(12)

        def seen(i: int) -> bool:
            barrier.wait()
            return replicas[i % 4].first_time_event("Ev0123ABCD", NOW)

        with ThreadPoolExecutor(12) as pool:
            outcomes = list(pool.map(seen, range(12)))
        assert outcomes.count(True) == 1
        assert replicas[0].first_time_event("Ev0123ABCE", NOW + timedelta(hours=2))
        assert replicas[0].forget_events(NOW + timedelta(hours=1)) == 1
        assert replicas[1].first_time_event("Ev0123ABCD", NOW + timedelta(hours=3))  # forgotten: new again
        assert not replicas[1].first_time_event("Ev0123ABCE", NOW + timedelta(hours=3))
    finally:
        for replica in replicas:
            replica.close()


def test_seen_events_share_the_store_between_replicas(url: str) -> None:
    one, two = Store(url), Store(url)
    try:
        clock = [NOW]
        a = SeenEvents(store=one, now=lambda: clock[0], keep=timedelta(hours=1), prune_every=2)
        b = SeenEvents(store=two, now=lambda: clock[0])
        assert a.first_time("Ev1")
        assert not b.first_time("Ev1")
        assert not a.first_time("Ev1")
        clock[0] = NOW + timedelta(hours=2)
        assert b.first_time("Ev2")
        assert a.first_time("Ev3")  # a's second new id: prunes ids older than an hour (Ev1)
        assert b.first_time("Ev1")
        assert not a.first_time("Ev2")
    finally:
        one.close()
        two.close()


def test_one_operation_per_name_across_replicas(url: str) -> None:
    """Eight requests on four replicas try to hold the same name at once: one does, seven are told who."""
    from ops.store.state import OperationBusy
    from ops.tpu.ownership import operation_keys

    replicas = [Store(url) for _ in range(4)]
    try:
        barrier = Barrier(8)

        def take(i: int) -> bool:
            keys = operation_keys("p", "us-east5-a" if i % 2 else "search", "gemma4-qr")
            barrier.wait()
            try:
                replicas[i % 4].acquire_operation(keys, f"op{i}", f"U{i}", "tpu find", ttl_s=60, now=NOW)
            except OperationBusy:
                return False
            return True

        with ThreadPoolExecutor(8) as pool:
            outcomes = list(pool.map(take, range(8)))
        assert outcomes.count(True) == 1
        winner = outcomes.index(True)
        assert replicas[0].operation_running(f"op{winner}", NOW)
        replicas[1].release_operation(f"op{winner}")
        assert not replicas[2].operation_running(f"op{winner}", NOW)
    finally:
        for replica in replicas:
            replica.close()


# ---- schema migrations (the same upgrade path as tests/unit/test_migrations.py, on PostgreSQL)


def test_a_store_at_the_baseline_is_upgraded_with_its_rows(url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    old = schema_cases.store_at_baseline(url, monkeypatch)
    token = schema_cases.write_rows(old)
    old.close()
    store = Store(url)
    schema_cases.at_head(store)
    schema_cases.check_rows(store, token)
    store.close()


def test_a_database_made_before_migrations_is_stamped_and_kept(url: str) -> None:
    schema_cases.make_pre_migration(url, tables=("audit", "alert_ledger", "leases"))
    store = Store(url)
    schema_cases.at_head(store)
    schema_cases.check_pre_migration_rows(store)
    store.close()


def test_a_database_of_a_newer_release_is_refused(url: str) -> None:
    Store(url).close()
    engine = create_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql("UPDATE alembic_version SET version_num = '0999'")
    engine.dispose()
    with pytest.raises(schema.SchemaTooNew, match=f"0999.*{schema.head()}"):
        Store(url)


def test_replicas_starting_at_once_upgrade_one_after_another(
    url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Replica processes each hold their own connection; the in-process lock is taken away so that only the
    advisory lock serializes them."""
    monkeypatch.setattr(schema, "_in_process", nullcontext())
    barrier = Barrier(4)

    def start() -> str:
        barrier.wait()
        store = Store(url)
        store.close()
        return store.revision

    with ThreadPoolExecutor(4) as pool:
        assert list(pool.map(lambda _: start(), range(4))) == [schema.head()] * 4
    store = Store(url)
    schema_cases.at_head(store)
    store.close()


def test_the_alert_ticks_reads_search_indexes_on_postgresql(store: Store) -> None:
    """With 30 days of history of 1,000 resources gone (30,000 resolved alerts, their owners and last
    observations), the reads of a steady tick of a named deployment are index searches keyed by what it
    evaluates, as PostgreSQL's planner chooses them on the table statistics (ANALYZE)."""
    from sqlalchemy import event, insert, text

    from ops.alerts.ledger import AlertLedger, ledger_table, observations_table, owners_table

    now = datetime.now(UTC)
    with store.engine.begin() as conn:
        for day in range(1, 31):
            at = now - timedelta(days=day)
            gone = [f"us-east5-a/gone-{day}-{index}@x" for index in range(1000)]
            conn.execute(
                insert(ledger_table),
                [{"key": f"{r}|expiry|60", "kind": "expiry", "resource": r, "status": "sent", "at": at,
                  "text": "", "resolved_at": at} for r in gone],
            )  # fmt: skip
            conn.execute(
                insert(owners_table), [{"key": f"{r}|expiry|60", "deployment": "staging"} for r in gone]
            )
            conn.execute(
                insert(observations_table), [{"resource": r, "state": "ACTIVE", "at": at} for r in gone]
            )
        conn.execute(text("ANALYZE"))
    ledger = AlertLedger(store, "staging")
    listed = [f"us-east5-a/live-{index}@x" for index in range(1000)]
    executed: list[tuple[str, object]] = []

    def record(conn: object, cursor: object, statement: str, parameters: object, *args: object) -> None:
        executed.append((statement, parameters))

    event.listen(store.engine, "before_cursor_execute", record)
    try:
        ledger.observations(listed)
        ledger.known(f"{resource}|expiry|60" for resource in listed)
        ledger.open_alerts(since=now - timedelta(days=7))
        AlertLedger.open_alerts_by_deployment(store, ["staging", "production"], since=now - timedelta(days=7))
    finally:
        event.remove(store.engine, "before_cursor_execute", record)
    with store.engine.connect() as conn:
        cursor = conn.connection.driver_connection.cursor()  # type: ignore[union-attr]
        for sql, params in executed:
            cursor.execute(f"EXPLAIN {sql}", params)
            plan = "\n".join(str(row[0]) for row in cursor.fetchall())
            assert "Seq Scan" not in plan, (sql[:200], plan)


def test_a_prune_forgets_only_its_own_deployments_history_on_postgresql(store: Store) -> None:
    prune_cases.check_a_prune_forgets_only_its_own_history(store)


def test_an_observation_older_than_its_observers_is_forgotten_on_postgresql(store: Store) -> None:
    prune_cases.check_an_observation_made_before_observers_were_recorded(store)
