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
    with Demo() as world:
        yield world


@pytest.fixture(autouse=True)
def _no_leftover_faults(request: pytest.FixtureRequest) -> Iterator[None]:
    yield
    if "demo" in request.fixturenames:
        world: Demo = request.getfixturevalue("demo")
        world.gcp.clear_faults()
        world.vllm.set_mode("ready")
