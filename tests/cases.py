"""The handed real-world case files, wherever each one lives: the simulators' own (`sim.cases`, package data
the simulators replay; tests that check the bot's conclusions read the same copy) or a test-only one
(tests/fixtures/cases). Each file lives in exactly one of the two; both README.md files say what the bot
must conclude for each."""

from __future__ import annotations

from pathlib import Path

from sim.cases import CASES as SIM_CASES
from sim.cases import read_case

TEST_CASES = Path(__file__).resolve().parent / "fixtures" / "cases"


def case_text(name: str) -> str:
    """The text of the handed case file `name`. Raises FileNotFoundError when neither folder has it."""
    text = read_case(name)
    return text if text is not None else (TEST_CASES / name).read_text()


def case_names() -> set[str]:
    """The names of every handed case file (both folders, without their README.md and package code)."""
    names = {p.name for p in SIM_CASES.iterdir() if p.is_file()} | {p.name for p in TEST_CASES.iterdir()}
    return {n for n in names if n != "README.md" and not n.endswith(".py")}
