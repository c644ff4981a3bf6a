"""A throwaway PostgreSQL cluster for tests: initdb in a temp dir, started on 127.0.0.1 on a free port.

    with postgres.cluster() as url:          # "postgresql+psycopg://postgres@127.0.0.1:PORT/postgres"
        db = postgres.create_database(url)   # a fresh empty database on that cluster, as a URL

The server binaries come from Debian's `postgresql` package (/usr/lib/postgresql/<version>/bin), or from
`PG_BIN`. initdb refuses to run as root, so as root the server runs as the `postgres` user (runuser). When the
binaries, the user or the psycopg driver are missing the test is skipped, or fails when CI=true.
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url


def unavailable(reason: str) -> None:
    """Skip the test, or fail it under CI (where PostgreSQL must be installed)."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"PostgreSQL is required in CI: {reason}")
    pytest.skip(reason)


def find_bin() -> Path | None:
    """The directory holding initdb and pg_ctl (PG_BIN, else the newest /usr/lib/postgresql/*/bin)."""
    if os.environ.get("PG_BIN"):
        candidates = [os.environ["PG_BIN"]]
    else:
        candidates = sorted(
            glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name), reverse=True
        )
        on_path = shutil.which("pg_ctl")
        if on_path:
            candidates.append(str(Path(on_path).parent))
    for directory in candidates:
        if (Path(directory) / "initdb").exists() and (Path(directory) / "pg_ctl").exists():
            return Path(directory)
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextmanager
def cluster() -> Iterator[str]:
    """Create and start a cluster; yield its SQLAlchemy URL; stop it and delete its files."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        unavailable("the psycopg driver is not installed (pip install 'psycopg[binary]')")
    bin_dir = find_bin()
    if bin_dir is None:
        unavailable("PostgreSQL server binaries not found (apt-get install postgresql)")
        raise AssertionError("unreachable")
    as_root = os.geteuid() == 0
    prefix: list[str] = []
    if as_root:
        try:
            user = pwd.getpwnam("postgres")
        except KeyError:
            unavailable("running as root and there is no `postgres` user to run the server as")
            raise
        prefix = ["runuser", "-u", "postgres", "--"]
    base = Path(tempfile.mkdtemp(prefix="tpu-chatops-pg-"))
    data = base / "data"
    log_file = base / "server.log"
    if as_root:
        os.chown(base, user.pw_uid, user.pw_gid)
    port = _free_port()

    def run(*args: str) -> None:
        done = subprocess.run([*prefix, *args], capture_output=True, text=True, timeout=120, check=False)
        if done.returncode != 0:
            server_log = log_file.read_text() if log_file.exists() else ""
            raise RuntimeError(f"{' '.join(args[:2])} failed: {done.stdout}{done.stderr}{server_log}")

    started = False
    try:
        run(
            str(bin_dir / "initdb"),
            "-D", str(data), "-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync",
        )  # fmt: skip
        options = f"-c listen_addresses=127.0.0.1 -p {port} -k {base} -c fsync=off -c max_connections=200"
        run(
            str(bin_dir / "pg_ctl"),
            "-D",
            str(data),
            "-l",
            str(log_file),
            "-o",
            options,
            "-w",
            "-t",
            "60",
            "start",
        )
        started = True
        yield f"postgresql+psycopg://postgres@127.0.0.1:{port}/postgres"
    finally:
        if started:
            subprocess.run(
                [*prefix, str(bin_dir / "pg_ctl"), "-D", str(data), "-m", "immediate", "-w", "stop"],
                capture_output=True,
                timeout=60,
                check=False,
            )
        shutil.rmtree(base, ignore_errors=True)


def create_database(url: str, name: str | None = None) -> str:
    """Create an empty database on the cluster at `url`; return its URL."""
    name = name or "t_" + uuid.uuid4().hex[:12]
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
    finally:
        engine.dispose()
    return make_url(url).set(database=name).render_as_string(hide_password=False)
