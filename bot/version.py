"""The bot's version: the installed distribution's (`pyproject.toml` `[project] version`), shown in the help
footer and by `/healthz`, so an operator can tell which release answers. Changes per version: CHANGELOG.md."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

DISTRIBUTION = "tpu-chatops"


def bot_version() -> str:
    """E.g. "0.2.0"; "unknown" when the package is not installed (run from a bare source tree)."""
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "unknown"
