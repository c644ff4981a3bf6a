"""Release hygiene: a LICENSE, one version (pyproject's) that the bot reports, and its changelog entry."""

from __future__ import annotations

import tomllib
from pathlib import Path

import bot.handlers  # noqa: F401  (declares every command on the registry)
from bot.commands.registry import registry
from bot.version import bot_version
from bot.views.admin import short_help

ROOT = Path(__file__).resolve().parents[2]


def _pyproject_version() -> str:
    return str(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"])


def test_the_license_is_apache_2() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text


def test_the_bot_reports_the_version_pyproject_declares() -> None:
    assert bot_version() == _pyproject_version()
    assert short_help(registry, None, "production").endswith(f"_tpu-chatops {_pyproject_version()}_")


def test_the_changelog_has_an_entry_for_the_version() -> None:
    changelog = (ROOT / "CHANGELOG.md").read_text()
    assert f"## [{_pyproject_version()}]" in changelog
    assert "## [Unreleased]" in changelog
