"""Shared fixtures: the whole demo world (simulators plus the real bot over HTTP), and a state store."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ops.store.state import Store
from sim.demo import Demo
from tests.resources import ResourceWatch

FIXTURES = Path(__file__).parent / "fixtures"
CASES = FIXTURES / "cases"
TESTS = Path(__file__).parent
SLOW_DIRS = frozenset({"e2e", "integration", "faults", "handlers"})
"""Test folders whose tests run a demo world or real servers."""
SLOW_NAMES = frozenset(
    {"Demo", "GcpSimulator", "SlackSimulator", "SimProcess", "llama_server", "OpenSSHServer", "cluster"}
)
"""Names whose presence in a test module means it starts simulators, servers or subprocesses."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--resources",
        action="store_true",
        help="print the descriptors, threads and child processes "
        "each test module left behind (tests/resources.py)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(ResourceWatch(config), "resource-watch")
    config.addinivalue_line(
        "markers",
        "slow: starts a demo world, a simulator, a real server or a subprocess (`make check` skips it)",
    )


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """The fault matrix's size and failing cells (tests/faults/matrix.py), added up from the
    "fault_matrix" user property of each test's teardown report: these reach this process from every
    pytest-xdist worker. Prints nothing when no matrix test ran."""
    cells, failed = 0, []
    for reports in terminalreporter.stats.values():
        for report in reports:
            if getattr(report, "when", None) != "teardown":
                continue
            for name, value in getattr(report, "user_properties", ()):
                if name == "fault_matrix":
                    cells += value["cells"]
                    failed += value["failed"]
    if cells:
        terminalreporter.write_line(f"fault matrix: {cells} cells, {len(failed)} failed")
        for line in failed:
            terminalreporter.write_line(f"  {line}")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark `slow` every test that needs servers: those in SLOW_DIRS, those of a module holding one of
    SLOW_NAMES, and those using the `demo` or `world` fixture. `make check` runs the rest
    (`-m "not slow"`)."""
    for item in items:
        path = Path(str(item.fspath))
        parts = path.relative_to(TESTS).parts if path.is_relative_to(TESTS) else ()
        module = getattr(item, "module", None)
        uses_servers = module is not None and not SLOW_NAMES.isdisjoint(vars(module))
        fixtures = set(getattr(item, "fixturenames", ()))
        if (parts and parts[0] in SLOW_DIRS) or uses_servers or fixtures & {"demo", "world"}:
            item.add_marker(pytest.mark.slow)
    # The tests of the real llama.cpp server run last: .ci/run installs it beside the suite
    # (tests/llama_server.py waits for that install). pytest-xdist hands out modules in collection order.
    llama = [item for item in items if _uses_llama_server(getattr(item, "module", None))]
    if llama:
        items[:] = [item for item in items if item not in llama] + llama


def _uses_llama_server(module: object) -> bool:
    """Whether a test module imported anything from tests/llama_server.py."""
    return module is not None and any(
        getattr(value, "__module__", None) == "tests.llama_server" for value in vars(module).values()
    )


@pytest.fixture(scope="module")
def demo() -> Iterator[Demo]:
    """One demo world shared by a module's tests (faults and the vLLM mode are reset after each test)."""
    with Demo() as world:
        yield world


@pytest.fixture()
def world() -> Iterator[Demo]:
    """A demo world of the test's own, for a test that changes it (deletes, restarts, crashes...)."""
    with Demo() as fresh:
        yield fresh


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    """A state store on SQLite in the test's own folder, closed after the test."""
    state = Store(f"sqlite:///{tmp_path}/state.db")
    yield state
    state.close()


@pytest.fixture(autouse=True)
def _no_leftover_faults(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if "demo" in request.fixturenames:
        world: Demo = request.getfixturevalue("demo")
        world.gcp.clear_faults()
        world.vllm.set_mode("ready")
