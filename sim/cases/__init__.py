"""The real failure texts the simulators replay, shipped as this package's data (README.md lists them).

The simulated TPU VM prints them as a failing container's log (`sim.host`), the simulated Cloud Logging
serves them as log entries (`sim.gcp.loggen`), and tests that check the bot's conclusions on the same texts
read them from here. Read through importlib.resources, so they are found wherever `sim` is importable.
"""

from __future__ import annotations

from importlib.resources import files
from importlib.resources.abc import Traversable
from pathlib import Path

CASES: Traversable = files(__name__)
"""This package's folder: `CASES / "vllm-kv-cache-insufficient.log"` is one case file."""


def read_case(name: str, folder: Path | None = None) -> str | None:
    """The text of the case file `name` (its base name only: no path reaches outside the folder).

    Args:
        name: a file name such as "docker-pull-rate-limit.log".
        folder: where to look instead of this package (a scenario's `cases_dir`), or None.

    Returns:
        The file's text, or None when there is no such file.
    """
    path = (folder or CASES) / Path(name).name
    try:
        return path.read_text()
    except OSError:
        return None


def missing_case_line(name: str, folder: Path | None = None) -> str:
    """The one line a simulator shows in place of a case file that does not exist."""
    return f"(simulator: case file {name} not found in {folder or CASES})"
