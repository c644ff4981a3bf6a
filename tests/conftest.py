"""Shared fixtures: the whole demo world (simulators plus the real bot over HTTP)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from sim.demo import Demo

FIXTURES = Path(__file__).parent / "fixtures"
CASES = FIXTURES / "cases"


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


@pytest.fixture(autouse=True)
def _no_leftover_faults(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if "demo" in request.fixturenames:
        world: Demo = request.getfixturevalue("demo")
        world.gcp.clear_faults()
        world.vllm.set_mode("ready")
