"""Schema migrations of the state store (Alembic): the revisions in `ops/store/migrations/versions` create and
change every table of the store's database; nothing calls `create_all` on it any more.

`upgrade(engine)` brings a database to the newest revision this code knows; `Store(url)` calls it at every
start, so upgrading the bot keeps its state:

- an empty database gets every revision in order;
- a database made before migrations existed (the store's tables, no `alembic_version` table) is stamped as
  `BASELINE` (the tables of that release, exactly; any of them missing are created first) and upgraded from
  there, its rows kept;
- a database at a revision this code does not know (written by a newer release) is refused: `SchemaTooNew`.

Several replicas may start at once: on PostgreSQL the upgrade runs in one transaction that first takes the
advisory lock `ADVISORY_LOCK`, so the first replica upgrades and the others wait, then find nothing to do.
SQLite (tests, the demo) serves one process; within it a lock keeps two threads from upgrading at once.

No alembic.ini is read at run time: the Config is built here and the connection handed to
`ops/store/migrations/env.py`. Developers write a revision with `make revision MSG="..."`
(docs/development.md).
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.script.revision import RevisionError
from alembic.util import CommandError
from sqlalchemy import inspect, text
from sqlalchemy.engine import Connection, Engine

from ops.errors import OpsError
from ops.store.migrations.baseline import baseline_metadata

__all__ = ["ADVISORY_LOCK", "BASELINE", "MIGRATIONS", "SchemaTooNew", "alembic_config", "head", "upgrade"]

log = logging.getLogger(__name__)
# Alembic says at INFO what every start does ("Context impl SQLiteImpl.", each revision run); the one line
# that matters, which revisions ran, is logged here.
logging.getLogger("alembic").setLevel(logging.WARNING)

MIGRATIONS = Path(__file__).resolve().with_name("migrations")
"""The migration environment (env.py, versions/), shipped inside the `ops` package."""

BASELINE = "0001"
"""The revision of the schema as it was before migrations: what a database without `alembic_version` has."""

ADVISORY_LOCK = 7_310_420_001
"""The PostgreSQL advisory lock (`pg_advisory_xact_lock`) every replica takes before it upgrades."""

_in_process = threading.Lock()


class SchemaTooNew(OpsError):
    """The database was migrated by a newer release than this one: this code does not know its revision.

    Args:
        database: the database's revision.
        code: the newest revision this code knows.
    """

    def __init__(self, database: str, code: str) -> None:
        super().__init__(
            f"the state database is at schema revision {database}, which this release does not know"
            f" (its newest is {code})",
            "run the release that migrated it (or a newer one); this one refuses to start on it",
        )
        self.database = database
        self.code = code


def alembic_config(connection: Connection | None = None) -> Config:
    """An Alembic Config for the shipped migrations, built in code (no alembic.ini).

    Args:
        connection: the connection the migrations run on (env.py uses it); None for commands that need
            no database (e.g. listing the revisions).

    Returns:
        The Config, with `script_location` set and the connection in `attributes["connection"]`.
    """
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.attributes["connection"] = connection
    return config


def head() -> str:
    """The newest revision this code knows (the one `upgrade` brings a database to).

    Raises:
        CommandError: the revisions do not form one line (two heads).
    """
    revision = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if revision is None:
        raise CommandError("no migration revisions are shipped")
    return revision


def upgrade(engine: Engine, to: str = "head") -> str:
    """Bring the database of `engine` to `head()`, in one transaction (see the module docstring).

    Args:
        engine: the store's engine (SQLite or PostgreSQL).
        to: the revision to bring it to; "head" (the newest) but in tests of the upgrade path.

    Returns:
        The revision the database is at afterwards.

    Raises:
        SchemaTooNew: the database is at a revision this code does not know; nothing was changed.
    """
    with _in_process, engine.begin() as conn:
        if conn.dialect.name == "postgresql":
            conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": ADVISORY_LOCK})
        return _upgrade(conn, to)


def _upgrade(conn: Connection, to: str) -> str:
    config = alembic_config(conn)
    script = ScriptDirectory.from_config(config)
    newest = script.get_current_head() or BASELINE
    target = newest if to == "head" else to
    current = MigrationContext.configure(conn).get_current_heads()
    for revision in current:
        try:
            known = script.get_revision(revision)
        except (CommandError, RevisionError):
            known = None
        if known is None:
            raise SchemaTooNew(revision, newest)
    if current == (target,):
        return target
    if not current:
        baseline = baseline_metadata()
        present = set(inspect(conn).get_table_names()) & set(baseline.tables)
        if present:
            log.info("state store made before migrations (%d tables): stamped as %s", len(present), BASELINE)
            baseline.create_all(conn, checkfirst=True)  # a table that release had not made yet
            command.stamp(config, BASELINE)
    log.info("state store schema: %s -> %s", ",".join(current) or "empty", target)
    command.upgrade(config, target)
    return target
