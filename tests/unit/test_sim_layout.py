"""The simulators' house rules: the product's wheel leaves `sim/` out, `sim/` has no import cycle, no
function-local import of a project module and no module over 800 lines, and the case files it replays are
its own package data (one copy: none of them also in tests/fixtures/cases)."""

from __future__ import annotations

import ast
import fnmatch
import tomllib
from pathlib import Path

import yaml

from sim.cases import CASES, read_case
from tests.cases import TEST_CASES

ROOT = Path(__file__).resolve().parents[2]
SIM = ROOT / "sim"
MAX_LINES = 800


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(path): path for path in sorted(SIM.rglob("*.py"))}


def _imports(tree: ast.AST) -> set[str]:
    """The sim modules an AST imports (`from a.b import c` counts a.b and, if it is a module, a.b.c)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names |= {node.module} | {f"{node.module}.{alias.name}" for alias in node.names}
    return names & set(MODULES)


def test_the_wheel_holds_the_product_only() -> None:
    """setuptools' package discovery: every folder with an __init__.py whose dotted name matches an
    `include` pattern (fnmatch, as setuptools.find_packages)."""
    find = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    tops = [top for top in ROOT.iterdir() if top.is_dir() and not top.name.startswith(".")]
    packages = [".".join(p.parent.relative_to(ROOT).parts) for top in tops for p in top.rglob("__init__.py")]
    shipped = [name for name in packages if any(fnmatch.fnmatchcase(name, pat) for pat in find["include"])]
    assert {"bot", "ops", "llm"} <= set(shipped)
    assert not [name for name in shipped if name.split(".")[0] not in ("bot", "ops", "llm")], shipped


def test_sim_has_no_import_cycle() -> None:
    graph = {name: _imports(ast.parse(path.read_text())) - {name} for name, path in MODULES.items()}
    state: dict[str, str] = {}
    cycles: list[list[str]] = []

    def visit(name: str, path: list[str]) -> None:
        state[name] = "open"
        for dep in sorted(graph[name]):
            if state.get(dep) == "open":
                cycles.append([*path[path.index(dep) :], dep])
            elif dep not in state:
                visit(dep, [*path, dep])
        state[name] = "done"

    for name in MODULES:
        if name not in state:
            visit(name, [name])
    assert cycles == []


def test_sim_imports_project_modules_at_the_top_only() -> None:
    project = ("bot", "ops", "llm", "sim")
    offenders = []
    for name, path in MODULES.items():
        for function in ast.walk(ast.parse(path.read_text())):
            if isinstance(function, ast.FunctionDef | ast.AsyncFunctionDef):
                for node in ast.walk(function):
                    if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] in project:
                        offenders.append(f"{name}.{function.name}: {node.module}")
                    elif isinstance(node, ast.Import):
                        offenders += [
                            f"{name}.{function.name}: {alias.name}"
                            for alias in node.names
                            if alias.name.split(".")[0] in project
                        ]
    assert offenders == []


def test_no_sim_module_is_over_800_lines() -> None:
    sizes = {name: len(path.read_text().splitlines()) for name, path in MODULES.items()}
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


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
