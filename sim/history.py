"""SIMULATED metrics history for the demo: samples as the bot would have taken them over past hours.

The load follows a smooth daily shape with a burst; KV-cache use follows the running requests; latency
rises with the load; a vLLM restart (counters back to zero) can be placed in the window. Histogram buckets are
vLLM's (vllm/v1/metrics/loggers.py) so the chart's percentiles come out of the same arithmetic as live data.
"""

from __future__ import annotations

import math
import random
from datetime import datetime, timedelta
from typing import Any

from ops.vllm.history import Sample
from sim.scenario import duration

TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
                20.0, 40.0, 80.0, 160.0, 640.0, 2560.0, math.inf)  # fmt: skip
TPOT_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0,
                40.0, 80.0, math.inf)  # fmt: skip


def _observe(buckets: dict[float, float], bounds: tuple[float, ...], value: float) -> None:
    for upper in bounds:
        if value <= upper:
            buckets[upper] += 1


def simulated_samples(spec: dict[str, Any], now: datetime) -> list[Sample]:
    """Samples from `now - span` to `now`, every `step`.

    Args:
        spec: the scenario's `history` keys: span (e.g. 6h), step (1m), peak_running (requests at the busiest
            moment), kv_per_request (KV-cache fraction one running request holds), ttft_ms and tpot_ms
            (median latency when idle), restart (when vLLM restarted, e.g. -130m, or null), seed.
        now: the end of the window.
    """
    rng = random.Random(int(spec.get("seed", 1)))
    span, step = duration(spec.get("span", "6h")), duration(spec.get("step", "1m"))
    peak = float(spec.get("peak_running", 16))
    kv_each = float(spec.get("kv_per_request", 0.03))
    ttft_s, tpot_s = float(spec.get("ttft_ms", 150)) / 1000, float(spec.get("tpot_ms", 25)) / 1000
    restart = now + duration(spec["restart"]) if spec.get("restart") else None
    ttft: dict[float, float] = dict.fromkeys(TTFT_BUCKETS, 0.0)
    tpot: dict[float, float] = dict.fromkeys(TPOT_BUCKETS, 0.0)
    tokens = 0.0
    samples: list[Sample] = []
    steps = int(span / step)
    for index in range(steps + 1):
        at = now - span + index * step
        if restart is not None and at - step < restart <= at:
            ttft, tpot, tokens = dict.fromkeys(TTFT_BUCKETS, 0.0), dict.fromkeys(TPOT_BUCKETS, 0.0), 0.0
        phase = index / max(1, steps)
        burst = math.exp(-(((phase - 0.7) / 0.06) ** 2))
        load = peak * (0.35 + 0.25 * math.sin(2 * math.pi * phase) + 0.6 * burst) * rng.uniform(0.85, 1.15)
        running = max(0.0, round(min(load, peak)))
        waiting = max(0.0, round(load - peak)) + (rng.random() < 0.1)
        pressure = 1 + running / max(1.0, peak)
        for _ in range(int(running * 2) + 1):
            _observe(ttft, TTFT_BUCKETS, rng.lognormvariate(math.log(ttft_s * pressure**2), 0.4))
            _observe(tpot, TPOT_BUCKETS, rng.lognormvariate(math.log(tpot_s * pressure), 0.2))
        tokens += running / (tpot_s * pressure) * step.total_seconds()
        samples.append(
            Sample(
                at=at,
                kv_cache_usage=min(0.99, running * kv_each + rng.uniform(0.0, 0.02)),
                running=running,
                waiting=waiting,
                generation_tokens=tokens,
                ttft=dict(ttft),
                tpot=dict(tpot),
            )
        )
    return samples


def seed(history: Any, deployment: str, spec: dict[str, Any], now: datetime) -> int:
    """Store `simulated_samples(spec, now)` for `deployment` in an `ops.vllm.history.History`.

    Returns:
        How many samples were stored.
    """
    samples = simulated_samples(spec, now - timedelta(minutes=1))
    history.add(deployment, *samples)
    return len(samples)
