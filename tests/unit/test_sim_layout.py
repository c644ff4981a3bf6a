"""The simulators' house rules: the product's wheel leaves `sim/` out, and the case files it replays are
its own package data (one copy: none of them also in tests/fixtures/cases). Cycles, local imports and module
size are checked for every package by test_import_graph.py."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

import yaml

from sim.cases import CASES, read_case
from tests.cases import TEST_CASES

ROOT = Path(__file__).resolve().parents[2]
SIM = ROOT / "sim"


def test_the_wheel_holds_the_product_only() -> None:
    """setuptools' package discovery: every folder with an __init__.py whose dotted name matches an
    `include` pattern (fnmatch, as setuptools.find_packages)."""
    find = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    tops = [top for top in ROOT.iterdir() if top.is_dir() and not top.name.startswith(".")]
    packages = [".".join(p.parent.relative_to(ROOT).parts) for top in tops for p in top.rglob("__init__.py")]
    shipped = [name for name in packages if any(fnmatch.fnmatchcase(name, pat) for pat in find["include"])]
    assert {"bot", "ops", "llm"} <= set(shipped)
    assert not [name for name in shipped if name.split(".")[0] not in ("bot", "ops", "llm")], shipped


def test_case_files_have_one_home() -> None:
    ours = {path.name for path in CASES.iterdir() if path.is_file()} - {"README.md", "__init__.py"}
    assert ours and not ours & {path.name for path in TEST_CASES.iterdir()}


def test_every_case_file_a_scenario_names_is_package_data() -> None:
    named = []
    for scenario in sorted((SIM / "scenarios").glob("*.yaml")):
        data = yaml.safe_load(scenario.read_text())
        logs = (data.get("google") or {}).get("logs") or {}
        named += [str(case["file"]) for case in logs.get("cases") or []]
        host = data.get("host") or {}
        named += [str(c["failing_log"]) for c in host.get("containers") or [] if c.get("failing_log")]
        named += [str(host["run_failing_log"])] if host.get("run_failing_log") else []
    assert named
    assert [name for name in named if read_case(name) is None] == []
