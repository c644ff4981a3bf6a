"""The fault matrix's Google family (tests/faults/matrix.py): every command against Google API 429s, 503s,
timeouts and malformed bodies."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

from sim.demo import Demo
from tests.faults.matrix import COMMANDS, check_family, queued_resources, run_cells, still_up


def test_google_faults(world: Demo, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    before = queued_resources(world)
    faults: dict[str, Callable[[], None]] = {
        "429": lambda: world.gcp.inject_fault(".*", 429, count=1_000_000),
        "503": lambda: world.gcp.inject_fault(".*", 503, count=1_000_000),
        "timeout": lambda: world.gcp.inject_fault(".*", 200, count=1_000_000, delay_s=3.0),
        "malformed body": lambda: world.gcp.inject_fault(
            ".*", 200, count=1_000_000, body="<html>not json</html>"
        ),
    }
    for name, inject in faults.items():
        inject()
        run_cells(world, "google", name, COMMANDS)
        world.gcp.clear_faults()
        still_up(world, "google", name)
    check_family(world, before, "google", caplog)
