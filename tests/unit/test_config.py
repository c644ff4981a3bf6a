"""Settings: a missing or malformed setting stops start-up with one line naming it."""

from __future__ import annotations

import subprocess

import pytest
from pydantic import SecretStr

from bot.config import ConfigError, Settings, load_settings, masked
from bot.shared.tpu_requests import startup_config
from ops.vllm.deploy import startup_script
from tests.serve import serve_until_exit

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
    assert "google-startup-scripts.service" in settings.syslog_units
    assert _load(syslog_units="docker, kubelet.service").syslog_units == ["docker.service", "kubelet.service"]


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
        ({"slack_app_token": "xapp-1-A0-1-abc"}, "SLACK_APP_TOKEN is set but BOT_MODE=http"),
        (
            {
                "bot_mode": "socket",
                "slack_app_token": "xapp-1-A0-1-abc",
                "slack_request_url": "https://b.io/slack/events",
            },
            "SLACK_REQUEST_URL is set but BOT_MODE=socket",
        ),
        (
            {"slack_request_url": "http://b.io/slack/events"},
            "SLACK_REQUEST_URL: 'http://b.io/slack/events' is not",
        ),
        ({"bot_mode": "pigeon"}, "BOT_MODE:"),
        ({"state_database_url": "not a url"}, "STATE_DATABASE_URL: not a SQLAlchemy URL"),
        (
            {"fault_catalogue_file": "/nonexistent/faults.yaml"},
            "FAULT_CATALOGUE_FILE: /nonexistent/faults.yaml",
        ),
        ({"vllm_startup_stuck_s": "5"}, "VLLM_STARTUP_STUCK_S:"),
        ({"maintenance_alert_lead": "1m"}, "MAINTENANCE_ALERT_LEAD: give 5m to 7d"),
        ({"maintenance_alert_lead": "soon"}, "MAINTENANCE_ALERT_LEAD:"),
        ({"alert_delivery_recheck_s": "1"}, "ALERT_DELIVERY_RECHECK_S:"),
        ({"syslog_units": "docker.service,ssh; reboot"}, "SYSLOG_UNITS: invalid unit 'ssh; reboot'"),
        ({"reconcile_interval_s": "0"}, "RECONCILE_INTERVAL_S:"),
        ({"model_threads": "0"}, "MODEL_THREADS:"),
        ({"model_questions_per_user": "0"}, "MODEL_QUESTIONS_PER_USER:"),
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


@pytest.mark.slow  # starts the bot in a subprocess (seconds of imports)
def test_start_up_stops_with_one_line(tmp_path) -> None:
    env = {
        "PATH": "/usr/bin:/bin",
        "SLACK_BOT_TOKEN": "xoxb-1",
        "SLACK_SIGNING_SECRET": "s",
        "TPU_ZONES": "us-east5-a",
    }
    result = serve_until_exit(env, tmp_path, timeout_s=60)
    assert result.returncode == 2
    assert result.stderr.strip() == "config error: GCP_PROJECT: required but not set"


def test_every_bad_setting_is_reported_at_once_each_with_its_rule() -> None:
    with pytest.raises(ConfigError) as caught:
        _load(
            gcp_project="Bad_Project",
            tpu_zones="europe",
            admins="alice",
            slack_bot_token="xoxp-123",
            state_database_url="mysql://u:p@db/x",
        )
    problems = caught.value.problems
    assert len(problems) == 5 and str(caught.value).count("\n") == 4
    assert any(
        p.startswith("GCP_PROJECT: 'Bad_Project' is not a valid value (rule: ^[a-z]") for p in problems
    )
    assert "TPU_ZONES: not a zone name: europe (expected e.g. us-east5-a)" in problems
    assert any(
        p.startswith("SLACK_BOT_TOKEN: a bot token starts with xoxb-") and "xoxp-" in p for p in problems
    )
    assert any(p.startswith("STATE_DATABASE_URL: mysql is not supported") for p in problems)


def test_placeholders_from_env_example_are_refused() -> None:
    with pytest.raises(ConfigError) as caught:
        _load(
            slack_bot_token="xoxb-your-bot-token",
            slack_signing_secret="your-signing-secret",
            gcp_project="your-project-id",
        )
    assert [p.split(":")[0] for p in caught.value.problems] == [
        "SLACK_BOT_TOKEN",
        "SLACK_SIGNING_SECRET",
        "GCP_PROJECT",
    ]
    assert all("placeholder from .env.example" in p for p in caught.value.problems)
    assert "your-bot-token" not in str(caught.value)  # a secret's value is never echoed


def test_malformed_tokens_are_named() -> None:
    with pytest.raises(ConfigError) as caught:
        _load(bot_mode="socket", slack_app_token="xoxb-wrong-slot", slack_signing_secret="xoxb-1-2")
    lines = "\n".join(caught.value.problems)
    assert "SLACK_APP_TOKEN: an app-level token starts with xapp-" in lines
    assert "SLACK_SIGNING_SECRET: this is a token, not the signing secret" in lines


def _serve(tmp_path, **env: str) -> subprocess.CompletedProcess[str]:
    base = {
        "PATH": "/usr/bin:/bin",
        "SLACK_BOT_TOKEN": "xoxb-1",
        "SLACK_SIGNING_SECRET": "s",
        "GCP_PROJECT": "demo-project",
        "TPU_ZONES": "us-east5-a",
        "STATE_DATABASE_URL": f"sqlite:///{tmp_path / 'state.db'}",
        "BOT_PORT": "65001",
    }
    return serve_until_exit({**base, **env}, tmp_path)


def _last_line(result: subprocess.CompletedProcess[str]) -> str:
    lines = [
        line for line in result.stderr.splitlines() if line.startswith(("start-up error", "config error"))
    ]
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.mark.slow  # starts the bot in a subprocess (seconds of imports)
def test_start_up_without_application_default_credentials_is_one_line(tmp_path) -> None:
    result = _serve(tmp_path, GOOGLE_APPLICATION_CREDENTIALS=str(tmp_path / "missing.json"))
    assert result.returncode == 2
    line = _last_line(result)
    assert line.startswith("start-up error: Google credentials: no Application Default Credentials")
    assert "gcloud auth application-default login" in line


@pytest.mark.slow  # starts the bot in a subprocess (seconds of imports)
def test_start_up_with_slack_unreachable_is_one_line(tmp_path) -> None:
    result = _serve(
        tmp_path, GOOGLE_API_ENDPOINT="http://127.0.0.1:9", SLACK_API_URL="http://127.0.0.1:9/api/"
    )
    assert result.returncode == 2
    line = _last_line(result)
    assert line.startswith("start-up error: Slack unreachable at SLACK_API_URL=http://127.0.0.1:9/api/")
    assert "Fix:" in line


def test_fault_catalogue_file_is_checked_at_start_up(tmp_path) -> None:
    bad = tmp_path / "team.yaml"
    bad.write_text("families:\n  - {name: my-fault, patterns: ['('], conclusion: c, fix: f}\n")
    with pytest.raises(ConfigError) as caught:
        _load(fault_catalogue_file=str(bad))
    assert str(caught.value).startswith("FAULT_CATALOGUE_FILE: ") and "does not compile" in str(caught.value)
    good = tmp_path / "good.yaml"
    good.write_text("families:\n  - {name: my-fault, patterns: ['boom'], conclusion: c, fix: f}\n")
    assert _load(fault_catalogue_file=str(good)).fault_catalogue_file == str(good)


def test_the_startup_script_runs_the_container_vllm_commands_act_on() -> None:
    """VLLM_CONTAINER names both the container the startup script runs and the one /vllm status|logs|restart
    act on; VLLM_API_KEY_SECRET reaches the script too (one builder for /tpu create, find and config)."""
    settings = _load(vllm_container="vllm-prod", vllm_api_key_secret="vllm-api-key")
    script = startup_script(startup_config(settings))
    assert "--name vllm-prod " in script and "vllm-gemma4" not in script
    assert "vllm-api-key" in script and "VLLM_API_KEY" in script


@pytest.mark.parametrize(
    ("changes", "secret"),
    [
        ({"vllm_base_url": "http://admin:hunter2@10.0.0.5:8000/v1"}, "hunter2"),
        ({"llm_fallback_base_url": "https://u:p@ss-w0rd@llm.example.com/v1"}, "ss-w0rd"),
        ({"vllm_api_key_secret": "sk-live Zx81pQ7mN2"}, "Zx81pQ7mN2"),  # a key pasted as the secret's name
        ({"hf_token_secret": "hf_aBcDeF gHiJkL"}, "gHiJkL"),
        # A secret's value echoed by another setting's rule (the signing secret pasted as the SSH user).
        (
            {"slack_signing_secret": "8f742231b10e8888abcd99", "ssh_user": "8f742231b10e8888abcd99"},
            "8f742231b10e8888abcd99",
        ),
        ({"state_database_url": "mysql://bot:s3cr3t-pw@db/x"}, "s3cr3t-pw"),
    ],
)
def test_a_config_error_never_shows_a_secret(changes: dict[str, object], secret: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _load(**changes)
    assert secret not in str(caught.value)
    assert all(line.split(":", 1)[0].isupper() for line in caught.value.problems)


def test_a_secret_from_the_environment_is_masked_in_another_settings_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("SLACK_SIGNING_SECRET", "0123456789abcdef0123")
    monkeypatch.setenv("SSH_USER", "0123456789abcdef0123")
    fields = {k: v for k, v in GOOD.items() if k != "slack_signing_secret"}
    with pytest.raises(ConfigError) as caught:
        load_settings(_env_file=None, **fields)
    assert "0123456789abcdef0123" not in str(caught.value) and "SSH_USER" in str(caught.value)


def test_the_metrics_token_is_a_secret() -> None:
    settings = _load(metrics_token="t0ken-for-prometheus")
    assert settings.metrics_token is not None and "t0ken" not in repr(settings)
