"""Deployments as configuration: the file's bad input is one line each; choosing a deployment."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from bot.commands.registry import Registry, UsageError
from bot.config import ConfigError, Settings, load_settings
from bot.deployments import read_deployments, settings_for
from bot.services import DEFAULT, Fleet
from ops.errors import BadInput

GOOD_ENV = {
    "slack_bot_token": "xoxb-1",
    "slack_signing_secret": "s",
    "gcp_project": "demo-project",
    "tpu_zones": "us-east5-a",
    "operators": "U0ENVOPS01",
}

TWO = """\
deployments:
  - name: production
    channels: [C0PROD0001]
  - name: staging
    project: demo-staging
    zones: [us-east5-b]
    primary: gemma4-staging
    accelerator_type: v6e-4
    model: google/gemma-4-26B-A4B-it
    tensor_parallel_size: 4
    vllm_base_url: http://10.0.0.9:8000/
    alert_channel: C0STAGING1
    channels: [C0STAGING1, C0STAGING2]
    roles: {operators: [U0STAGEOP1]}
"""


def _file(tmp_path: Path, text: str) -> str:
    path = tmp_path / "deployments.yaml"
    path.write_text(text)
    return str(path)


def _settings(tmp_path: Path, text: str | None) -> Settings:
    extra = {"deployments_file": _file(tmp_path, text)} if text is not None else {}
    return load_settings(_env_file=None, **GOOD_ENV, **extra)


@pytest.mark.parametrize(
    ("text", "line"),
    [
        (
            TWO.replace("[C0STAGING1, C0STAGING2]", "[C0STAGING1, C0PROD0001]"),
            "DEPLOYMENTS_FILE: channel C0PROD0001 is bound twice: to 'production' and 'staging'",
        ),
        (
            "deployments:\n  - channels: [C0PROD0001]\n",
            "DEPLOYMENTS_FILE: deployments[0].name: required but not set",
        ),
        ("{}\n", "DEPLOYMENTS_FILE: deployments: required but not set"),
        (
            "deployments: []\n",
            "DEPLOYMENTS_FILE: deployments: List should have at least 1 item after validation",
        ),
        (
            TWO.replace("zones: [us-east5-b]", "zones: []"),
            "DEPLOYMENTS_FILE: deployments[1] (staging).zones: List should have at least 1 item",
        ),
        (
            TWO.replace("zones: [us-east5-b]", "zones: [east]"),
            "DEPLOYMENTS_FILE: deployment 'staging': not a zone name: east",
        ),
        (
            TWO.replace("primary:", "primry:"),
            "DEPLOYMENTS_FILE: deployments[1] (staging).primry: unknown field",
        ),
        (
            TWO.replace("project: demo-staging", "project: Demo_Staging"),
            "DEPLOYMENTS_FILE: deployments[1] (staging).project: 'Demo_Staging' is not a valid value",
        ),
        (
            TWO.replace("name: staging", "name: production"),
            "DEPLOYMENTS_FILE: deployment 'production' is defined twice",
        ),
        (
            TWO.replace("[C0STAGING1, C0STAGING2]", "[general]"),
            "DEPLOYMENTS_FILE: deployment 'staging': not a channel id: general",
        ),
        ("deployments: [\n", "DEPLOYMENTS_FILE: "),
        (
            TWO.replace(
                "project: demo-staging", "project: demo-staging\n    credentials_file: /nonexistent/sa.json"
            ),
            "DEPLOYMENTS_FILE: deployment 'staging': credentials_file /nonexistent/sa.json is no file",
        ),
    ],
)
def test_bad_deployments_file_is_one_line(tmp_path: Path, text: str, line: str) -> None:
    with pytest.raises(ConfigError) as caught:
        _settings(tmp_path, text)
    message = str(caught.value)
    assert message.startswith(line)
    assert "\n" not in message
    if ": required but not set" in line or ": unknown field" in line or "is not a valid value" in line:
        assert re.search(r"\(\S+deployments\.yaml:\d+\)$", message), message  # the file and line


def test_missing_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^DEPLOYMENTS_FILE: cannot read .*nope.yaml"):
        load_settings(_env_file=None, **GOOD_ENV, deployments_file=str(tmp_path / "nope.yaml"))


def test_a_deployment_takes_the_environment_for_what_it_does_not_set(tmp_path: Path) -> None:
    base = _settings(tmp_path, TWO)
    production, staging = read_deployments(base.deployments_file or "")
    prod = settings_for(base, production)
    assert (prod.gcp_project, prod.tpu_zones, prod.operators) == (
        "demo-project",
        ["us-east5-a"],
        ["U0ENVOPS01"],
    )
    stage = settings_for(base, staging)
    assert stage.gcp_project == "demo-staging" and stage.tpu_zones == ["us-east5-b"]
    assert stage.tpu_primary == "gemma4-staging" and stage.tpu_accelerator_type == "v6e-4"
    assert stage.vllm_model == "google/gemma-4-26B-A4B-it" and stage.vllm_tensor_parallel_size == 4
    assert stage.vllm_base_url == "http://10.0.0.9:8000"
    assert stage.alert_channel == "C0STAGING1"
    assert stage.operators == ["U0STAGEOP1"]  # roles per deployment replace the environment's
    assert stage.slack_bot_token.get_secret_value() == "xoxb-1"


def _fleet(tmp_path: Path, text: str | None) -> Fleet:
    return Fleet.from_settings(_settings(tmp_path, text), lambda s: s)  # type: ignore[arg-type,return-value]


def test_without_a_file_the_environment_is_deployment_default(tmp_path: Path) -> None:
    fleet = _fleet(tmp_path, None)
    assert fleet.names == [DEFAULT]
    name, _ = fleet.choose(None, "C0ANYWHERE", changes=True)
    assert name == DEFAULT  # one deployment: nothing to guess


def test_choosing_a_deployment(tmp_path: Path) -> None:
    fleet = _fleet(tmp_path, TWO)
    assert fleet.names == ["production", "staging"]
    assert fleet.choose(None, "C0STAGING2", changes=True)[0] == "staging"  # bound channel
    assert fleet.choose("production", "C0STAGING1", changes=True)[0] == "production"  # the flag wins
    assert fleet.choose(None, "C0ELSEWHR1", changes=False)[0] == "production"  # read-only: the first
    with pytest.raises(BadInput) as refused:
        fleet.choose(None, "C0ELSEWHR1", changes=True)
    assert "which one?" in refused.value.message and "`production`, `staging`" in refused.value.hint
    with pytest.raises(BadInput) as unknown:
        fleet.choose("prod", "C0STAGING1", changes=False)
    assert unknown.value.message == "unknown deployment `prod`"
    assert unknown.value.hint == "deployments: `production`, `staging`"


def _registry() -> Registry:
    registry = Registry()
    registry.command("tpu status", "Status")(lambda ctx: None)
    return registry


def test_every_command_takes_deployment() -> None:
    registry = _registry()
    invocation = registry.parse("tpu status --deployment staging")
    assert invocation.deployment == "staging"
    assert invocation.text == "tpu status --deployment staging"
    assert registry.parse(invocation.text).deployment == "staging"  # a confirmation re-parses the text
    assert registry.parse("tpu status --deployment=staging").deployment == "staging"
    assert registry.parse("tpu status").deployment is None


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("tpu status --deployment", "`--deployment` needs a value (NAME)"),
        ("tpu status --deployment a --deployment b", "`--deployment` given twice"),
        ("tpu status --deployment Prod!", "--deployment: 'Prod!' is not a deployment name"),
    ],
)
def test_bad_deployment_flag(text: str, problem: str) -> None:
    with pytest.raises(UsageError) as caught:
        _registry().parse(text)
    assert caught.value.problem == problem


def test_credentials_file_must_exist() -> None:
    with pytest.raises(ConfigError, match=r"^GOOGLE_CREDENTIALS_FILE: /nonexistent/sa.json is no file"):
        load_settings(_env_file=None, **GOOD_ENV, google_credentials_file="/nonexistent/sa.json")


def test_each_project_uses_its_own_credentials_file(tmp_path: Path) -> None:
    """A deployment's `credentials_file` is loaded as that project's service account (no network needed)."""
    import json

    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    from bot.services import Services

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    sa = tmp_path / "staging-sa.json"
    sa.write_text(
        json.dumps(
            {
                "type": "service_account",
                "project_id": "demo-staging",
                "private_key_id": "k1",
                "private_key": pem,
                "client_email": "bot@demo-staging.iam.gserviceaccount.com",
                "client_id": "1",
                "token_uri": "https://oauth2.googleapis.com/token",
            }
        )
    )
    text = TWO.replace("project: demo-staging", f"project: demo-staging\n    credentials_file: {sa}")
    base = _settings(tmp_path, text)
    # An emulator endpoint keeps production (no credentials file) from looking for ADC on this machine.
    base = base.model_copy(
        update={
            "state_database_url": f"sqlite:///{tmp_path}/state.db",
            "google_api_endpoint": "http://127.0.0.1:9",
        }
    )
    fleet = Fleet.from_settings(base, Services.from_settings)
    staging = fleet.services["staging"]
    credentials = staging.tpu._credentials
    assert credentials is not None
    assert credentials.service_account_email == "bot@demo-staging.iam.gserviceaccount.com"
    assert fleet.services["production"].tpu._credentials is None  # the environment's default


def test_roles_are_checked_per_deployment(tmp_path: Path) -> None:
    """Staging lets only its own viewers read; production (no VIEWERS) lets everyone."""
    import bot.handlers  # noqa: F401  (declares the commands)
    from bot.commands.registry import registry
    from bot.commands.runner import Authorizer, Runner
    from bot.services import Services
    from bot.slack.gateway import SlackGateway
    from bot.slack.render import to_mrkdwn

    text = TWO.replace("roles: {operators: [U0STAGEOP1]}", "roles: {viewers: [U0STAGEVW1]}")
    base = _settings(tmp_path, text).model_copy(
        update={
            "state_database_url": f"sqlite:///{tmp_path}/state.db",
            "google_api_endpoint": "http://127.0.0.1:9",
        }
    )
    fleet = Fleet.from_settings(base, Services.from_settings)
    slack = SlackGateway.connect("xoxb-1", "http://127.0.0.1:9/")
    runner = Runner(fleet.first, registry, slack, Authorizer(fleet.first.settings, slack), fleet=fleet)
    try:
        refused = runner.run_read_only(registry.parse("help --deployment staging"), "U0SOMEONE1")
        assert "`help` needs the viewer role" in refused.text
        allowed = runner.run_read_only(registry.parse("help --deployment staging"), "U0STAGEVW1")
        assert "*Deployments* `production` (<#C0PROD0001>)" in to_mrkdwn(allowed.text)
        assert "needs the viewer role" not in runner.run_read_only(registry.parse("help"), "U0SOMEONE1").text
    finally:
        runner.shutdown()


def test_planned_work_holds_only_its_own_deployments_alerts(tmp_path: Path) -> None:
    """A staging restart opens staging's maintenance window; production's alerts (same store) are not held."""
    import bot.handlers  # noqa: F401  (declares the commands)
    from bot.commands.context import Context
    from bot.commands.registry import registry
    from bot.oncall.maintenance import planned_work
    from bot.services import Services
    from ops.alerts.planned import MaintenanceWindows
    from ops.store.state import Store

    base = _settings(tmp_path, TWO).model_copy(update={"google_api_endpoint": "http://127.0.0.1:9"})
    store = Store(f"sqlite:///{tmp_path}/state.db")
    fleet = Fleet.from_settings(base, lambda each: Services.from_settings(each, store=store))
    ctx = Context(
        fleet.services["staging"], registry, "U0STAGEOP1", "C0STAGING1", fleet=fleet, deployment="staging"
    )
    windows = MaintenanceWindows(store)
    with planned_work(ctx, "vllm restart", thread=("C0STAGING1", "1.000001")):
        assert windows.current("staging") is not None
        assert windows.current("production") is None
