"""Run `python -m sim demo --script` in its own process, as a newcomer would."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path


def run_demo_script(directory: Path, lines: str, timeout: float = 240) -> subprocess.CompletedProcess[str]:
    """Write `lines` to a script file in `directory` and run the demo on it.

    Returns:
        The finished process (exit code, stdout with the transcript, stderr).
    """
    script = directory / "script.txt"
    script.write_text(lines)
    return subprocess.run(
        [sys.executable, "-m", "sim", "demo", "--script", str(script)],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
