"""The fault matrix's vLLM family (tests/faults/matrix.py): every command with the vLLM server down, slow,
or answering HTTP 500."""

from __future__ import annotations

import logging
from collections.abc import Callable

import pytest

from sim.demo import Demo
from tests.faults.matrix import COMMANDS, check_family, queued_resources, run_cells, still_up


def test_vllm_faults(world: Demo, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    before = queued_resources(world)
    faults: dict[str, tuple[Callable[[], None], Callable[[], None]]] = {
        "down": (world.vllm.stop, world.vllm.start),
        "slow": (lambda: world.vllm.set_latency(3.0), lambda: world.vllm.set_latency(0)),
        "500": (lambda: world.vllm.fail_next("*", 500, count=1_000_000), world.vllm.stop),
    }
    for name, (inject, clear) in faults.items():
        inject()
        run_cells(world, "vllm", name, COMMANDS)
        clear()
        if name == "500":  # restarting drops the injected failures
            world.vllm.start()
            world.vllm.set_mode("ready")
        still_up(world, "vllm", name)
    check_family(world, before, "vllm", caplog)
