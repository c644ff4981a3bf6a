"""The app manifest is generated from the command registry for the mode the bot runs in; the checked-in
app_manifest.yaml is the HTTP one (the default mode) with a placeholder host, and must not drift."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

import bot.handlers  # noqa: F401  (declares every command on the registry)
from bot.__main__ import main
from bot.commands.registry import registry
from bot.config import Settings
from bot.docs import REGENERATE, SLASH_COMMANDS, slash_commands_py
from bot.slack.manifest import PLACEHOLDER_URL, manifest, manifest_yaml
from bot.slack.request_url import PLACEHOLDER_HOST, check_request_url

ROOT = Path(__file__).resolve().parents[2]
URL = "https://bot.example.com/slack/events"


@pytest.fixture(autouse=True)
def _no_mode_from_outside(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """The manifest command reads BOT_MODE and SLACK_REQUEST_URL: none from this machine or a .env."""
    monkeypatch.delenv("BOT_MODE", raising=False)
    monkeypatch.delenv("SLACK_REQUEST_URL", raising=False)
    monkeypatch.chdir(tmp_path)


def test_checked_in_manifest_matches_the_registry() -> None:
    assert (ROOT / "app_manifest.yaml").read_text() == manifest_yaml(PLACEHOLDER_URL), (
        "app_manifest.yaml is stale: run `make manifest`"
    )


def test_slash_commands_table_matches_the_registry() -> None:
    stale = f"bot/slack/slash_commands.py is stale: run {REGENERATE}"
    assert SLASH_COMMANDS.read_text() == slash_commands_py(), stale


# What `python -m bot manifest` must start without: the model client, the state store's SQL layer, the
# Google clients and Bolt (`serve` imports them, after the command dispatch).
HEAVY = ("openai", "sqlalchemy", "google.cloud", "googleapiclient", "slack_bolt")

_LOADED = """
import json, runpy, sys
sys.argv = ["bot", "manifest", "--url", "https://bot.example.com/slack/events"]
try:
    runpy.run_module("bot", run_name="__main__")
except SystemExit as exit:
    assert not exit.code, exit.code
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


@pytest.mark.slow  # a fresh interpreter, so that no other test's imports count
def test_manifest_command_imports_no_client(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k not in ("BOT_MODE", "SLACK_REQUEST_URL")}
    done = subprocess.run(
        [sys.executable, "-c", _LOADED], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "slash_commands:" in done.stdout
    loaded = json.loads(done.stderr.splitlines()[-1])
    heavy = sorted(m for m in loaded if m.split(".")[0] in HEAVY or m.startswith(HEAVY))
    assert not heavy, f"python -m bot manifest imported {heavy[:10]}"


def test_checked_in_manifest_is_for_the_default_mode_of_the_bot_its_image_and_env_example() -> None:
    data = yaml.safe_load((ROOT / "app_manifest.yaml").read_text())
    default = Settings.model_fields["bot_mode"].default
    assert default == "http"
    assert data["settings"]["socket_mode_enabled"] is False
    assert data["settings"]["event_subscriptions"]["request_url"] == PLACEHOLDER_URL
    assert "ENV" in (dockerfile := (ROOT / "Dockerfile").read_text()) and f"BOT_MODE={default}" in dockerfile
    assert f"# BOT_MODE={default} " in (ROOT / ".env.example").read_text()
    assert PLACEHOLDER_HOST in (ROOT / "README.md").read_text()
    assert PLACEHOLDER_HOST in (ROOT / "docs" / "slack-app.md").read_text()


def test_every_group_is_a_slash_command_with_its_usage() -> None:
    commands = {c["command"]: c for c in manifest(URL)["features"]["slash_commands"]}
    assert set(commands) == {f"/{g}" for g in registry.groups()}
    assert "list" in commands["/tpu"]["usage_hint"]


def test_http_variant_sets_request_urls_everywhere() -> None:
    data = yaml.safe_load(manifest_yaml(URL))
    assert data["settings"]["socket_mode_enabled"] is False
    assert data["settings"]["event_subscriptions"]["request_url"] == URL
    assert data["settings"]["interactivity"]["request_url"] == URL
    assert all(c["url"] == URL for c in data["features"]["slash_commands"])


def test_socket_variant_has_no_url() -> None:
    text = manifest_yaml(None)
    data = yaml.safe_load(text)
    assert data["settings"]["socket_mode_enabled"] is True
    assert "url" not in text.split("\n", 2)[2]


def test_documented_scope_list_matches_the_manifest() -> None:
    readme = (ROOT / "docs" / "slack-app.md").read_text()
    section = readme.split("It asks\nonly for the scopes the bot uses", 1)[1].split("\n\n", 2)[1]
    listed = {
        scope for line in section.splitlines() for scope in re.findall(r"`([a-z_]+:[a-z_]+|commands)`", line)
    }
    assert listed == set(manifest(URL)["oauth_config"]["scopes"]["bot"])


def test_the_command_picks_the_mode_from_bot_mode(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["manifest", "--url", URL]) == 0
    assert yaml.safe_load(capsys.readouterr().out) == manifest(URL)
    monkeypatch.setenv("SLACK_REQUEST_URL", URL)
    assert main(["manifest"]) == 0
    assert yaml.safe_load(capsys.readouterr().out) == manifest(URL)
    monkeypatch.delenv("SLACK_REQUEST_URL")
    monkeypatch.setenv("BOT_MODE", "socket")
    assert main(["manifest"]) == 0
    assert yaml.safe_load(capsys.readouterr().out) == manifest(None)


def test_http_mode_without_a_url_says_what_to_pass(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["manifest"]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.startswith("manifest: BOT_MODE=http") and "--url https://HOST/slack/events" in err
    assert "SLACK_REQUEST_URL" in err and "BOT_MODE=socket" in err


def test_a_url_in_socket_mode_is_refused(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("BOT_MODE", "socket")
    assert main(["manifest", "--url", URL]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "--url is set but BOT_MODE=socket" in err


@pytest.mark.parametrize(
    "url",
    [
        "not-a-url",
        "http://bot.example.com/slack/events",
        "https:///slack/events",
        "https://user:pw@bot.example.com/slack/events",
        "https://bot.example.com/slack/events?token=x",
        "https://bot.example.com/slack events",
        "ftp://bot.example.com/",
        "https://bot.example.com/",
        PLACEHOLDER_URL,
    ],
)
def test_manifest_refuses_a_request_url_slack_cannot_post_to(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ValueError):
        check_request_url(url)
    assert main(["manifest", "--url", url]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("manifest: --url: ")
