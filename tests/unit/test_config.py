"""Settings: a missing or malformed setting stops start-up with one line naming it."""

from __future__ import annotations

import subprocess
import sys

import pytest
from pydantic import SecretStr

from bot.config import ConfigError, Settings, load_settings, masked

GOOD = {
    "slack_bot_token": "xoxb-1",
    "slack_signing_secret": "s",
    "gcp_project": "demo-project",
    "tpu_zones": "us-east5-a, asia-northeast1-b",
}


def _load(**changes: object) -> Settings:
    fields = {**GOOD, **changes}
    fields = {k: v for k, v in fields.items() if v is not None}
    return load_settings(_env_file=None, **fields)


def test_good_settings_and_comma_lists() -> None:
    settings = _load(admins="U123ABC, S0GROUP1")
    assert settings.tpu_zones == ["us-east5-a", "asia-northeast1-b"]
    assert settings.admins == ["U123ABC", "S0GROUP1"]
    assert settings.viewers == []


@pytest.mark.parametrize(
    ("changes", "line"),
    [
        ({"gcp_project": None}, "GCP_PROJECT: required but not set"),
        ({"tpu_zones": "us-east5-a,europe"}, "TPU_ZONES: not a zone name: europe"),
        ({"tpu_zones": ""}, "TPU_ZONES: give at least one zone"),
        ({"bot_port": "http"}, "BOT_PORT:"),
        ({"vllm_base_url": "10.0.0.5:8000"}, "VLLM_BASE_URL: not a base URL"),
        ({"admins": "alice"}, "ADMINS: not a Slack user or user-group id: alice"),
        ({"slack_signing_secret": None}, "SLACK_SIGNING_SECRET is required when BOT_MODE=http"),
        ({"bot_mode": "socket"}, "SLACK_APP_TOKEN is required when BOT_MODE=socket"),
        ({"bot_mode": "pigeon"}, "BOT_MODE:"),
        ({"state_database_url": "not a url"}, "STATE_DATABASE_URL: not a SQLAlchemy URL"),
        (
            {"fault_catalogue_file": "/nonexistent/faults.yaml"},
            "FAULT_CATALOGUE_FILE: /nonexistent/faults.yaml",
        ),
        ({"vllm_startup_stuck_s": "5"}, "VLLM_STARTUP_STUCK_S:"),
    ],
)
def test_bad_settings_are_one_line_naming_the_setting(changes: dict[str, object], line: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _load(**changes)
    assert line in str(caught.value)
    assert "\n" not in str(caught.value)


def test_masked_never_shows_the_secret() -> None:
    assert masked(SecretStr("xoxb-123-456-secretpart")) == "xoxb-…(set)"
    assert masked(SecretStr("hunter2")) == "…(set)"
    assert masked(None) == "(unset)"


def test_start_up_stops_with_one_line(tmp_path) -> None:
    env = {
        "PATH": "/usr/bin:/bin",
        "SLACK_BOT_TOKEN": "xoxb-1",
        "SLACK_SIGNING_SECRET": "s",
        "TPU_ZONES": "us-east5-a",
    }
    result = subprocess.run(
        [sys.executable, "-m", "bot", "serve"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.strip() == "config error: GCP_PROJECT: required but not set"


def test_fault_catalogue_file_is_checked_at_start_up(tmp_path) -> None:
    bad = tmp_path / "team.yaml"
    bad.write_text("families:\n  - {name: my-fault, patterns: ['('], conclusion: c, fix: f}\n")
    with pytest.raises(ConfigError) as caught:
        _load(fault_catalogue_file=str(bad))
    assert str(caught.value).startswith("FAULT_CATALOGUE_FILE: ") and "does not compile" in str(caught.value)
    good = tmp_path / "good.yaml"
    good.write_text("families:\n  - {name: my-fault, patterns: ['boom'], conclusion: c, fix: f}\n")
    assert _load(fault_catalogue_file=str(good)).fault_catalogue_file == str(good)
