"""The product (`bot`, `ops`, `llm`) never imports the simulators: the production image and an installed
bot ship without `sim/`, so any such import would fail there. The demo lives in `sim/` for that reason."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from bot.__main__ import main

ROOT = Path(__file__).resolve().parents[2]
PRODUCT = ("bot", "ops", "llm")


def _imported_modules(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names: list[str] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
    return names


def test_product_never_imports_the_simulators() -> None:
    offenders = [
        f"{path.relative_to(ROOT)} imports {name}"
        for package in PRODUCT
        for path in sorted((ROOT / package).rglob("*.py"))
        for name in _imported_modules(path)
        if name == "sim" or name.startswith("sim.")
    ]
    assert offenders == []


def test_the_walk_sees_function_local_imports(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text("def f():\n    from sim.demo import Demo\n    import sim.gcp\n")
    assert _imported_modules(module) == ["sim.demo", "sim.gcp"]


def test_sources_are_public_or_in_docs() -> None:
    """Nothing cites a path of the machines the project was written on: sources are public URLs or the
    project's own docs/ (docs/google-apis.md, docs/vllm.md)."""
    private = ("/" + "work/", "shared/" + "notes", "../" + "shared")
    files = [
        path
        for folder in ("bot", "ops", "llm", "sim", "tests", "bench", "docs")
        for path in (ROOT / folder).rglob("*")
        if path.suffix in (".py", ".md", ".yaml", ".txt") and "__pycache__" not in path.parts
    ]
    files += [ROOT / name for name in ("README.md", "Makefile", "Dockerfile", "pyproject.toml")]
    offenders = [
        f"{path.relative_to(ROOT)}: {marker}"
        for path in files
        for marker in private
        if marker in path.read_text(errors="replace")
    ]
    assert offenders == []
    for doc in ("google-apis.md", "vllm.md"):
        assert "https://" in (ROOT / "docs" / doc).read_text()


def test_the_old_demo_command_points_to_the_new_one(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["demo", "--script", "lines.txt"]) == 2
    assert "python -m sim demo" in capsys.readouterr().err
