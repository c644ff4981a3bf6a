"""The fault matrix's fixtures (tests/faults/matrix.py): each test's cells recorded on its report, and a
demo world with 1 s backend timeouts."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sim.demo import Demo
from tests.faults.matrix import MATRIX


@pytest.fixture(autouse=True)
def record_cells(request: pytest.FixtureRequest) -> Iterator[None]:
    """After each test, put its cells on its report as the user property "fault_matrix": {"cells": n,
    "failed": ["FAIL [family/fault] command: problems", ...]}, which reaches the main process under
    pytest-xdist too (tests/conftest.py prints the sum)."""
    start = len(MATRIX)
    yield
    mine = MATRIX[start:]
    failed = [f"FAIL [{o.family}/{o.fault}] {o.command}: {'; '.join(o.problems)}" for o in mine if o.problems]
    request.node.user_properties.append(("fault_matrix", {"cells": len(mine), "failed": failed}))


@pytest.fixture
def world() -> Iterator[Demo]:
    """A demo world of the test's own whose Google and HTTP calls time out after 1 s."""
    with Demo(google_timeout_s=1.0, http_timeout_s=1.0) as demo:
        yield demo
