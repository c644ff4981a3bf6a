"""Scenario files: the simulated world (Google project, TPU queued resources, vLLM server) as YAML.

Each simulator reads its own section (`google`, `vllm`); this module only finds and loads the file.
"""

from __future__ import annotations

import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import yaml

_DURATION = re.compile(r"^(-?)(\d+(?:\.\d+)?)([smhd])$")
_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
DEFAULT = Path(__file__).parent / "scenarios" / "default.yaml"


def load(path: str | Path | None = None) -> dict[str, Any]:
    """Load a scenario.

    Args:
        path: a YAML file; None loads the bundled default demo scenario (`sim/scenarios/default.yaml`).

    Returns:
        The parsed mapping, with at least `project`, `google` and `vllm` keys.

    Raises:
        ValueError: the file is not a mapping or lacks `project`.
    """
    text = Path(path or DEFAULT).read_text()
    data = yaml.safe_load(text)
    if not isinstance(data, dict) or "project" not in data:
        raise ValueError(f"scenario {path or 'default'}: expected a mapping with a 'project' key")
    data.setdefault("google", {})
    data.setdefault("vllm", {})
    return data


def duration(text: str | int | float) -> timedelta:
    """Parse a scenario duration such as "90m", "-26h", "4h", "30s" or a plain number of seconds.

    Raises:
        ValueError: the text is not a number followed by one of s, m, h, d.
    """
    if isinstance(text, int | float):
        return timedelta(seconds=text)
    match = _DURATION.match(text.strip())
    if not match:
        raise ValueError(f"bad scenario duration {text!r}: use e.g. 90m, -26h, 4h")
    sign = -1 if match.group(1) else 1
    return timedelta(seconds=sign * float(match.group(2)) * _UNIT_SECONDS[match.group(3)])
