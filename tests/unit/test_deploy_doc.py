"""docs/deploy.md runs only commands that are tested: each line of its shell blocks is a line of a deploy/
file (deploy/gcp-setup.sh is checked by test_iam.py, the recipes by test_deploy_recipes.py) or a
`python -m bot` command that works."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "deploy.md"
SHELL_BLOCKS = ("sh", "bash", "shell", "console")


def shell_lines() -> list[str]:
    """The commands of the doc's shell blocks, one per line (continuations joined)."""
    lines: list[str] = []
    for info, body in re.findall(r"^```(\w*)\n(.*?)^```", DOC.read_text(), flags=re.M | re.S):
        if info in SHELL_BLOCKS:
            text = body.replace("\\\n", " ")
            lines += [line.strip() for line in text.splitlines() if line.strip() and not line.startswith("#")]
    return lines


def deploy_lines() -> set[str]:
    """Every line of deploy/, stripped, comment markers too (the script's usage lines are comments)."""
    found = set()
    for path in (ROOT / "deploy").iterdir():
        for line in path.read_text().splitlines():
            found.add(line.strip())
            found.add(line.strip().lstrip("#").strip())
    return found


def test_the_doc_has_shell_blocks_and_every_line_is_tested() -> None:
    lines = shell_lines()
    assert len(lines) >= 15, lines
    known = deploy_lines()
    untested = [line for line in lines if line not in known and not line.startswith("python -m bot ")]
    assert untested == [], f"docs/deploy.md lines in no deploy/ file (add them there, tested): {untested}"


@pytest.mark.slow  # starts `python -m bot` in a subprocess per command of the doc
def test_its_python_m_bot_commands_work() -> None:
    commands = [line for line in shell_lines() if line.startswith("python -m bot ")]
    assert commands, "the doc shows the manifest command"
    for line in commands:
        argv = shlex.split(line)[3:]
        result = subprocess.run(
            [sys.executable, "-m", "bot", *argv],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
            cwd=ROOT,
        )
        assert result.returncode == 0, f"{line}: {result.stderr}"
        assert "https://SERVICE-URL/slack/events" in result.stdout


def test_the_doc_walks_in_order() -> None:
    headings = re.findall(r"^## (\d+[ab]?)\. (.+)$", DOC.read_text(), flags=re.M)
    assert [title for _, title in headings] == [
        "Google setup",
        "Secrets",
        "The image",
        "Cloud Run",
        "Kubernetes (GKE)",
        "The Slack app",
        "SSH to the TPU VMs",
        "First command",
    ]
    text = DOC.read_text()
    for path in ("deploy/gcp-setup.sh", "deploy/cloudrun.yaml", "deploy/kubernetes.yaml", "docs/ssh.md"):
        assert path in text, path
