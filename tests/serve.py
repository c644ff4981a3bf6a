"""Run `python -m bot serve` as its own process, the way an operator starts it, and wait for it to stop.

For the tests of a start that must stop at once with one line (a bad setting, an unreachable backend): the
environment is exactly what the caller gives (nothing inherited), the working directory is the test's own.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path


def serve_until_exit(
    env: Mapping[str, str], cwd: Path, timeout_s: float = 90
) -> subprocess.CompletedProcess[str]:
    """Start the bot with `env` in `cwd`, wait until it exits, and return its exit code and output.

    Args:
        env: the whole environment of the process (PATH included when the bot needs one).
        cwd: its working directory (a SQLite store named relative to it lands there).
        timeout_s: seconds to wait before `subprocess.TimeoutExpired` is raised (a bot that did not stop).

    Returns:
        The finished process, with stdout and stderr as text.
    """
    return subprocess.run(
        [sys.executable, "-m", "bot", "serve"],
        env=dict(env),
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
