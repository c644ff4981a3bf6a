"""The diagnosis table (tests/fixtures/diagnose_cases.yaml), case by case, through bench/diagnose.py's runner:
every handed case file and every variant must name its expected family with the expected fix terms."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from ops.diagnosis.families import catalogue
from tests.cases import case_names

ROOT = Path(__file__).resolve().parents[2]


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_diagnose", ROOT / "bench" / "diagnose.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


BENCH = _bench()
DEFAULT, TABLE = BENCH.load_table()


def _id(case: dict[str, object]) -> str:
    return str(case.get("file") or case.get("label"))


@pytest.mark.parametrize("case", TABLE, ids=[_id(c) for c in TABLE])
def test_case(case: dict[str, object]) -> None:
    outcome = BENCH.run_case(case, DEFAULT)
    assert outcome.right, outcome.problem


def test_every_handed_case_has_an_expectation() -> None:
    handed = case_names()
    assert handed <= {c["file"] for c in TABLE if "file" in c}


def test_table_size_and_three_wordings_per_family() -> None:
    families: dict[str, int] = {}
    for case in TABLE:
        if case["family"]:
            families[str(case["family"])] = families.get(str(case["family"]), 0) + 1
    assert len(TABLE) >= 150 and len(families) >= 55
    variants = {f: sum(1 for c in TABLE if c["family"] == f and "text" in c) for f in families}
    assert min(variants.values()) >= 3, {f: n for f, n in variants.items() if n < 3}


def test_negative_cases_are_part_of_the_table() -> None:
    """Healthy logs, benign warnings and noise that mention errors in passing must give no finding: a
    wrong cause costs more than none, so the table holds such cases beside the failures."""
    negatives = [c for c in TABLE if not c["family"]]
    assert len(negatives) >= 15


def test_every_catalogue_family_is_in_the_table() -> None:
    """A family nobody checks is a family whose wordings nobody knows work."""
    assert {f.name for f in catalogue().families} <= {str(c["family"]) for c in TABLE}
