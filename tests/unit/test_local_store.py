"""A SQLite state store is refused in production (Cloud Run, Kubernetes, or PRODUCTION=true) unless
ALLOW_LOCAL_STORE=true, with one line saying why and what to set."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bot.config import ConfigError, Settings, load_settings, local_store_problem
from tests.serve import serve_until_exit

GOOD = {
    "slack_bot_token": "xoxb-1",
    "slack_signing_secret": "s",
    "gcp_project": "demo-project",
    "tpu_zones": "us-east5-a",
}
POSTGRES = "postgresql+psycopg://bot:pw@10.0.0.3/chatops"


@pytest.fixture(autouse=True)
def _no_platform(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("K_SERVICE", "KUBERNETES_SERVICE_HOST", "PRODUCTION", "ALLOW_LOCAL_STORE"):
        monkeypatch.delenv(name, raising=False)


def _load(**changes: object) -> Settings:
    return load_settings(_env_file=None, **{**GOOD, **changes})


def _problem(**changes: object) -> str:
    with pytest.raises(ConfigError) as caught:
        _load(**changes)
    assert len(caught.value.problems) == 1
    return caught.value.problems[0]


def test_cloud_run_refuses_the_default_sqlite_file(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("K_SERVICE", "tpu-chatops")
    line = _problem()
    assert line.startswith("STATE_DATABASE_URL is a SQLite store in the file tpu-chatops.db")
    assert "K_SERVICE=tpu-chatops is set (Cloud Run)" in line
    assert "postgresql+psycopg://" in line and "ALLOW_LOCAL_STORE=true" in line and "docs/deploy.md" in line


@pytest.mark.parametrize("url", ["sqlite://", "sqlite:///:memory:"])
def test_kubernetes_refuses_a_store_in_memory(monkeypatch: pytest.MonkeyPatch, url: str) -> None:
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    line = _problem(state_database_url=url)
    assert "a SQLite store in memory" in line and "(Kubernetes)" in line


def test_postgres_is_fine_in_production(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("K_SERVICE", "tpu-chatops")
    assert _load(state_database_url=POSTGRES).state_database_url == POSTGRES


def test_allow_local_store_and_production_false_keep_sqlite(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("K_SERVICE", "tpu-chatops")
    assert _load(allow_local_store=True).allow_local_store is True
    assert _load(production=False).state_database_url == "sqlite:///tpu-chatops.db"
    monkeypatch.setenv("ALLOW_LOCAL_STORE", "true")  # as the environment gives it
    assert _load().allow_local_store is True


def test_production_true_without_a_platform() -> None:
    assert _load().production is None  # a laptop: SQLite is the default and fine
    assert "this is production (PRODUCTION=true)" in _problem(production=True)


def test_the_signal_in_order() -> None:
    def signal(production: bool | None, environ: dict[str, str]) -> str | None:
        line = local_store_problem("sqlite://", production, False, environ)
        return None if line is None else line.split("production (", 1)[1].split("): ", 1)[0]

    assert signal(None, {}) is None
    assert signal(None, {"K_SERVICE": ""}) is None
    assert signal(False, {"K_SERVICE": "x"}) is None
    both = {"K_SERVICE": "bot", "KUBERNETES_SERVICE_HOST": "10.0.0.1"}
    assert signal(None, both) == "K_SERVICE=bot is set (Cloud Run)"
    assert local_store_problem("postgresql+psycopg://u@h/d", True, False, {}) is None


@pytest.mark.slow  # starts the bot in a subprocess (seconds of imports)
def test_serve_stops_with_the_line_and_no_traceback(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("PRODUCTION", "ALLOW_LOCAL_STORE")}
    env.update({k.upper(): v for k, v in GOOD.items()})
    env.update({"K_SERVICE": "tpu-chatops", "STATE_DATABASE_URL": "sqlite:///state.db"})
    result = serve_until_exit(env, tmp_path, timeout_s=60)
    assert result.returncode == 2
    assert "config error: STATE_DATABASE_URL is a SQLite store in the file state.db" in result.stderr
    assert "Traceback" not in result.stderr
