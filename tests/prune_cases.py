"""The hourly prune of alert history when several deployments share one state store, shared by the SQLite
tests (tests/unit/test_alerts.py) and the PostgreSQL ones (tests/integration/test_store_postgres.py): a
deployment forgets only its own rows, of resources it listed in a zone it answered for, after the retention
period."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sqlalchemy import insert

from ops.alerts.ledger import AlertLedger, Observation
from ops.alerts.tables import observations_table
from ops.store.state import Store

T0 = datetime(2026, 10, 1, tzinfo=UTC)
LATER = T0 + timedelta(days=31)  # past a 30-day retention
ZONE = "us-east5-a"
STAGING_LIVE = f"{ZONE}/gemma4-staging@2026-09-30T00:00:00Z"  # staging's, FAILED, still listed by staging
PRODUCTION_LIVE = f"{ZONE}/gemma4-qr@2026-09-01T00:00:00Z"
PRODUCTION_GONE = f"{ZONE}/gemma4-old@2026-08-01T00:00:00Z"
SHARED = f"{ZONE}/gemma4-shared@2026-09-15T00:00:00Z"  # one project's, watched by both deployments


def check_a_prune_forgets_only_its_own_history(store: Store) -> None:
    """Production's prune keeps staging's rows and observations of a zone name both list; it forgets its
    own history of a resource gone, and of a resource both observe only its own part, the observation going
    with the last deployment that listed it."""
    production, staging = AlertLedger(store, "production"), AlertLedger(store, "staging")
    stale = f"{STAGING_LIVE}|stale|"
    assert staging.claim_key(stale, "stale", STAGING_LIVE, "sent", now=T0)
    staging.observe_many({STAGING_LIVE: Observation("FAILED", {}), SHARED: Observation("ACTIVE")}, now=T0)
    gone = f"{PRODUCTION_GONE}|stale|"
    assert production.claim_key(gone, "stale", PRODUCTION_GONE, "sent", now=T0)
    production.observe_many({PRODUCTION_GONE: Observation("FAILED")}, now=T0)
    # production lists the resource both watch (its first prune records it as production's too)
    assert production.prune(now=T0, keep_days=30, listed=[SHARED, PRODUCTION_GONE], zones=[ZONE]) == (0, 0)

    # a month on: production lists neither staging's resource nor the shared one nor its own deleted one
    assert production.prune(now=LATER, keep_days=30, listed=[PRODUCTION_LIVE], zones=[ZONE]) == (1, 1)
    assert staging.known([stale, gone]) == {stale}, "staging's next tick would send the stale alert again"
    assert set(staging.observations([STAGING_LIVE, SHARED, PRODUCTION_GONE])) == {STAGING_LIVE, SHARED}
    # the unscoped ledger forgets nothing of a named deployment's either
    assert AlertLedger(store).prune(now=LATER, keep_days=30, listed=[], zones=[ZONE]) == (0, 0)
    assert staging.known([stale]) == {stale}
    # staging no longer lists the shared resource: the last deployment that observed it, its observation goes
    assert staging.prune(now=LATER, keep_days=30, listed=[STAGING_LIVE], zones=[ZONE]) == (0, 1)
    assert set(staging.observations([STAGING_LIVE, SHARED])) == {STAGING_LIVE}


def check_an_observation_made_before_observers_were_recorded(store: Store) -> None:
    """An observation no deployment is recorded for (written before revision 0004) is the `default`
    ledger's to forget; a named deployment that lists it makes it its own at its next prune, and then
    forgets it once the resource is gone."""
    legacy = [f"{ZONE}/gemma4-legacy-{index}@2026-08-01T00:00:00Z" for index in range(2)]
    with store.engine.begin() as conn:
        rows = [{"resource": resource, "state": "ACTIVE", "at": T0} for resource in legacy]
        conn.execute(insert(observations_table), rows)
    staging = AlertLedger(store, "staging")
    assert staging.prune(now=LATER, keep_days=30, listed=[], zones=[ZONE]) == (0, 0)  # not staging's
    assert staging.prune(now=T0, keep_days=30, listed=[legacy[0]], zones=[ZONE]) == (0, 0)
    assert staging.prune(now=LATER, keep_days=30, listed=[], zones=[ZONE]) == (0, 1)
    assert AlertLedger(store).prune(now=LATER, keep_days=30, listed=[], zones=[ZONE]) == (0, 1)
    assert staging.observations(legacy) == {}
