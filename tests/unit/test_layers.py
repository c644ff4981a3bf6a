"""The bot's layers, read from the source: views render and reach no backend, and what handlers share
lives outside `bot/handlers/` (so no handler needs another)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

BOT = Path(__file__).resolve().parents[2] / "bot"

# What a view may not import: the layers that call it, and the ones that reach Slack or a backend.
NOT_FOR_VIEWS = (
    "bot.handlers",
    "bot.slack.listeners",
    "bot.commands.runner",
    "bot.slack.gateway",
    "bot.services",
    "bot.slack.app",
)
# What handlers share (every module of these folders, and Slack's rendering primitives); a handler importing
# them is how handlers avoid importing each other.
SHARED = ("shared", "views", "slack/render.py")


def _imports(path: Path) -> set[str]:
    """Every module `path` imports, at any depth of its code."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
        elif isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
    return names


def _under(name: str, prefixes: tuple[str, ...]) -> bool:
    return any(name == p or name.startswith(p + ".") for p in prefixes)


@pytest.mark.parametrize("path", sorted((BOT / "views").glob("*.py")), ids=lambda p: p.name)
def test_views_import_no_caller_and_no_backend_client(path: Path) -> None:
    assert not {n for n in _imports(path) if _under(n, NOT_FOR_VIEWS)}


@pytest.mark.parametrize("name", SHARED)
def test_shared_modules_import_no_handler(name: str) -> None:
    paths = sorted((BOT / name).glob("*.py")) if (BOT / name).is_dir() else [BOT / name]
    assert paths
    for path in paths:
        assert not {n for n in _imports(path) if _under(n, ("bot.handlers",))}, path.name


@pytest.mark.parametrize("path", sorted((BOT / "handlers").glob("*.py")), ids=lambda p: p.name)
def test_no_handler_imports_another(path: Path) -> None:
    assert not {n for n in _imports(path) if _under(n, ("bot.handlers",))}
