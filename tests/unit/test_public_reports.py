"""The held-back public reports (tests/fixtures/reports/public.yaml) through bench/reports.py's engine runner,
report by report: each reaches the diagnosis the way it reaches the bot and must be named rightly (or, for
the unknown and benign ones, given no confident cause)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_reports", ROOT / "bench" / "reports.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while the file runs
    spec.loader.exec_module(module)
    return module


BENCH = _bench()
REPORTS = BENCH.load()


@pytest.mark.parametrize("report", REPORTS, ids=[r["id"] for r in REPORTS])
def test_report(report: dict[str, Any]) -> None:
    outcome = BENCH.judge(report, BENCH.engine_answer(report))
    assert outcome.verdict == "right", outcome.problem


def test_corpus_shape() -> None:
    """Enough reports, each with a public source, and some that must give no cause at all."""
    assert len(REPORTS) >= 60
    assert all(str(r["source"]).startswith("https://") for r in REPORTS)
    assert len({r["id"] for r in REPORTS}) == len(REPORTS)
    assert sum(1 for r in REPORTS if "" in r["family"]) >= 10


def test_a_wrong_family_is_wrong_and_none_is_missed() -> None:
    report = {"id": "x", "kind": "k", "family": ["kv-cache-insufficient"], "fix": [["--max-model-len"]]}
    assert BENCH.judge(report, BENCH.Answer("tpu-stockout", "", "another zone")).verdict == "wrong"
    assert BENCH.judge(report, BENCH.Answer("")).verdict == "missed"
    assert BENCH.judge(report, BENCH.Answer("kv-cache-insufficient", "", "lower it")).verdict == "half"
    negative = {"id": "y", "kind": "benign", "family": [""]}
    assert BENCH.judge(negative, BENCH.Answer("disk-full", "", "prune")).verdict == "wrong"
