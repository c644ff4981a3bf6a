"""The Makefile picks a supported interpreter (3.11 to 3.13) instead of refusing a newer python3."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
MAKE = shutil.which("make")


def _install(bin_dir: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PATH": f"{bin_dir}:/usr/bin:/bin"}
    for inherited in ("PYTHON", "MAKEFLAGS", "MAKELEVEL", "MFLAGS"):  # as a user's shell, not a parent make
        env.pop(inherited, None)
    return subprocess.run(
        [str(MAKE), "-B", "install", "VENV=/nonexistent-venv", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.skipif(MAKE is None, reason="make is not installed")
def test_an_unsupported_python3_is_passed_over_for_a_supported_one(tmp_path: Path) -> None:
    unsupported = tmp_path / "python3"
    unsupported.write_text("#!/bin/sh\nexit 1\n")  # as a Python 3.10 fails the version check
    unsupported.chmod(0o755)
    (tmp_path / "python3.12").symlink_to(sys.executable)  # this interpreter is 3.11-3.13
    result = _install(tmp_path, "-n")  # dry run: print the commands only
    out = result.stdout
    assert "python3.12 -m venv /nonexistent-venv" in out
    assert "--require-hashes" in out and "requirements-dev.lock" in out


@pytest.mark.skipif(MAKE is None, reason="make is not installed")
def test_no_supported_python_is_a_clear_message(tmp_path: Path) -> None:
    result = _install(tmp_path, "PYTHON=/bin/false")  # really run: it stops at the version check
    assert result.returncode != 0
    assert result.stdout.startswith("Python 3.11, 3.12 or 3.13 is required")
    assert not Path("/nonexistent-venv").exists()
