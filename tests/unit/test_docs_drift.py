"""The generated reference docs (docs/commands.md, docs/settings.md, docs/faults.md) match the code they
are rendered from: the command registry, the settings model and the fault catalogue."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.commands.registry import registry
from bot.config import Settings
from bot.docs import GENERATED, REGENERATE, write

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_committed_doc_matches_the_code(name: str) -> None:
    path = ROOT / "docs" / name
    assert path.is_file(), f"docs/{name} is missing: run {REGENERATE}"
    assert path.read_text() == GENERATED[name](), f"docs/{name} is out of date: run {REGENERATE}"


@pytest.mark.parametrize("name", sorted(GENERATED))
def test_generation_is_deterministic(name: str) -> None:
    assert GENERATED[name]() == GENERATED[name]()


def test_every_command_setting_and_family_is_listed() -> None:
    commands, settings = GENERATED["commands.md"](), GENERATED["settings.md"]()
    assert all(f"\n## {command.name}\n" in commands for command in registry.commands())
    assert all(f"| `{name.upper()}` |" in settings for name in Settings.model_fields)
    assert all(info.description for info in Settings.model_fields.values()), "every setting has a description"


def test_write_puts_every_file_in_the_folder(tmp_path: Path) -> None:
    written = write(tmp_path)
    assert sorted(path.name for path in written) == sorted(GENERATED)
    assert all(path.read_text() == GENERATED[path.name]() for path in written)
