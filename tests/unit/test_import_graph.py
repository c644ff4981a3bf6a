"""The project's import graph stays a readable house: no import cycle among its modules, no project import
hidden inside a function (the usual way to dodge a cycle), and no module too long to read in one sitting.

The graph is read from the source (AST), not by importing it, so a cycle that Python happens to tolerate
(one side importing inside a function, or `import a.b` resolved late) still fails here. That the product
(`bot`, `ops`, `llm`) never imports `sim` is checked in test_layering.py.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("bot", "ops", "llm", "sim")
MAX_LINES = 800
# A package folder shows its architecture at a glance: at most this many modules (`__init__.py` aside).
MAX_MODULES = 12

# Function-local imports of project modules that are allowed: only in `__main__.py` entry points, each made
# lazy so that `python -m <package> --help` (and any subcommand that does not need it) starts fast.
# (module, imported module) -> why.
LAZY_ENTRY_IMPORTS: dict[tuple[str, str], str] = {
    ("bot.__main__", "bot.slack.manifest"): "`manifest` prints the app manifest without loading the bot",
    ("bot.__main__", "bot.observability"): "`manifest` and `--help` set up no logging or metrics",
    ("bot.__main__", "bot.slack.app"): "slack-bolt, the Google clients and SQLAlchemy load only for `serve`",
    ("bot.__main__", "bot.startup"): "start-up checks load the Google clients: only `serve` needs them",
}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {
        _module_name(path): path
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if "__pycache__" not in path.parts
    }


def _resolve(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute module an `ImportFrom` reads from (relative imports resolved against `module`)."""
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool, known: set[str]) -> list[str]:
    """The project modules one import statement loads: `from ops import tpu` loads `ops.tpu.api`."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
    else:
        source = _resolve(node, module, is_package)
        names = [f"{source}.{alias.name}" for alias in node.names]
        names = [name if name in known else source for name in names]
    return [name for name in dict.fromkeys(names) if name in known]


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imports(path: Path, module: str, known: set[str]) -> tuple[set[str], list[tuple[int, str]]]:
    """(project modules imported at module level, [(line, project module) imported inside a function])."""
    tree = ast.parse(path.read_text(), filename=str(path))
    is_package = path.name == "__init__.py"
    top: set[str] = set()
    local: list[tuple[int, str]] = []

    def visit(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and _is_type_checking(child):
                continue  # typing-only imports never run, so they cannot form a runtime cycle
            if isinstance(child, ast.Import | ast.ImportFrom):
                targets = _targets(child, module, is_package, known)
                if in_function:
                    local.extend((child.lineno, target) for target in targets)
                else:
                    top.update(targets)
            nested = in_function or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
            visit(child, nested)

    visit(tree, False)
    return top, local


@functools.cache  # two tests read it; parsing every module takes seconds
def _graph() -> tuple[dict[str, set[str]], list[str]]:
    modules = _modules()
    known = set(modules)
    graph: dict[str, set[str]] = {}
    local_imports: list[str] = []
    for module, path in modules.items():
        top, local = _imports(path, module, known)
        graph[module] = top - {module}
        local_imports += [
            f"{path.relative_to(ROOT)}:{line} imports {target} inside a function"
            for line, target in local
            if (module, target) not in LAZY_ENTRY_IMPORTS
        ]
    return graph, local_imports


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                connect(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            connect(node)
    return found


def test_no_import_cycle_among_project_modules() -> None:
    graph, _ = _graph()
    assert _cycles(graph) == []


def test_no_project_import_inside_a_function() -> None:
    _, local_imports = _graph()
    assert local_imports == []


def test_allowed_lazy_imports_are_entry_points_that_still_import_them() -> None:
    modules = _modules()
    for (module, target), reason in LAZY_ENTRY_IMPORTS.items():
        assert module.endswith("__main__") and reason
        _, local = _imports(modules[module], module, set(modules))
        assert target in {name for _, name in local}, f"{module} no longer imports {target} lazily"


def test_no_module_over_the_line_limit() -> None:
    long = [
        f"{path.relative_to(ROOT)}: {count} lines"
        for package in PACKAGES
        for path in sorted((ROOT / package).rglob("*.py"))
        if (count := len(path.read_text().splitlines())) > MAX_LINES
    ]
    assert long == []


def test_no_package_folder_over_the_module_limit() -> None:
    counts = {
        folder.relative_to(ROOT).as_posix(): sum(1 for p in folder.glob("*.py") if p.name != "__init__.py")
        for package in PACKAGES
        for folder in [ROOT / package, *(ROOT / package).rglob("*")]
        if folder.is_dir() and (folder / "__init__.py").exists()
    }
    assert {name: n for name, n in counts.items() if n > MAX_MODULES} == {}


def test_the_walk_finds_cycles_and_local_imports(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("from pkg import b\n")
    (tmp_path / "b.py").write_text("def f():\n    from pkg.a import x\n    import pkg.c\n")
    known = {"pkg.a", "pkg.b", "pkg.c"}
    top_a, _ = _imports(tmp_path / "a.py", "pkg.a", known)
    top_b, local_b = _imports(tmp_path / "b.py", "pkg.b", known)
    assert top_a == {"pkg.b"} and top_b == set()
    assert local_b == [(2, "pkg.a"), (3, "pkg.c")]
    assert _cycles({"pkg.a": {"pkg.b"}, "pkg.b": {"pkg.a"}, "pkg.c": set()}) == [["pkg.a", "pkg.b"]]
