"""Starting and stopping the demo stack returns every descriptor, thread and child process it took: the
bot's shutdown path (`Bot.close`, `HttpServer.close`) stops what it started, as a restart in one process
needs. Counts come from /proc (tests/resources.py)."""

from __future__ import annotations

import sys

import pytest

from sim.demo import Demo
from tests.resources import Snapshot, settled, summary

ROUNDS = 3
LINES = ("/tpu status", "/vllm logs", "/fleet", "/tpu list")
"""Commands that touch every backend: the Google and vLLM simulators (both deployments), SSH, the state
store and the worker pools."""


def _round() -> None:
    with Demo(alerts=True) as demo:
        for line in LINES:
            _, answered = demo.user.run(line, timeout=30)
            assert answered, line
        demo.bot.services.workers.warm()  # the worker processes too


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="counts are read from /proc")
def test_demo_stack_gives_back_what_it_took() -> None:
    _round()  # the first start fills process-wide caches (imports, the discovery document)
    baseline = settled(Snapshot.take(), wait_s=0)  # garbage collected, then counted
    for _ in range(ROUNDS):
        _round()
    after = settled(baseline)
    (f0, t0, c0), (f1, t1, c1) = baseline.totals(), after.totals()
    assert f1 <= f0 and t1 <= t0 and c1 <= c0, summary(baseline, after)
