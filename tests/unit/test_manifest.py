"""app_manifest.yaml is generated from the command registry; the checked-in file must not drift."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import yaml

from bot.__main__ import main
from bot.commands import registry
from bot.manifest import manifest, manifest_yaml, request_url

ROOT = Path(__file__).resolve().parents[2]


def test_checked_in_manifest_matches_the_registry() -> None:
    assert (ROOT / "app_manifest.yaml").read_text() == manifest_yaml(), (
        "app_manifest.yaml is stale: run `make manifest`"
    )


def test_every_group_is_a_slash_command_with_its_usage() -> None:
    commands = {c["command"]: c for c in manifest()["features"]["slash_commands"]}
    assert set(commands) == {f"/{g}" for g in registry.groups()}
    assert "list" in commands["/tpu"]["usage_hint"]


def test_http_variant_sets_request_urls() -> None:
    url = "https://bot.example.com/slack/events"
    data = yaml.safe_load(manifest_yaml(url))
    assert data["settings"]["socket_mode_enabled"] is False
    assert data["settings"]["event_subscriptions"]["request_url"] == url
    assert all(c["url"] == url for c in data["features"]["slash_commands"])


def test_documented_scope_list_matches_the_manifest() -> None:
    readme = (ROOT / "docs" / "slack-app.md").read_text()
    section = readme.split("It asks\nonly for the scopes the bot uses", 1)[1].split("\n\n", 2)[1]
    listed = {
        scope for line in section.splitlines() for scope in re.findall(r"`([a-z_]+:[a-z_]+|commands)`", line)
    }
    assert listed == set(manifest()["oauth_config"]["scopes"]["bot"])


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
    ],
)
def test_manifest_refuses_a_request_url_slack_cannot_post_to(
    url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(ValueError):
        request_url(url)
    assert main(["manifest", "--url", url]) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith("manifest: ")


def test_manifest_accepts_a_public_https_url(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["manifest", "--url", "https://bot.example.com/slack/events"]) == 0
    assert "https://bot.example.com/slack/events" in capsys.readouterr().out
