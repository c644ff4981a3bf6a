"""app_manifest.yaml is generated from the command registry; the checked-in file must not drift."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

from bot.commands import registry
from bot.manifest import manifest, manifest_yaml

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


def test_readme_scope_list_matches_the_manifest() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("It asks\nonly for the scopes the bot uses", 1)[1].split("\n\n", 2)[1]
    listed = {
        scope for line in section.splitlines() for scope in re.findall(r"`([a-z_]+:[a-z_]+|commands)`", line)
    }
    assert listed == set(manifest()["oauth_config"]["scopes"]["bot"])
