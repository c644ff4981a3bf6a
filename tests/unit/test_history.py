"""Metrics history: windowed rates and percentiles, restarts, retention and downsampling (SQLite store)."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from ops.charts import Event, metrics_chart_png
from ops.errors import BadInput
from ops.store.state import Store
from ops.vllm.history import History, Sample, sample_of, series

T0 = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)
BUCKETS = (0.1, 0.5, 1.0, math.inf)


def _sample(minute: int, tokens: float, fast: float, slow: float) -> Sample:
    """Cumulative TTFT buckets: `fast` observations under 0.1 s, `slow` between 0.5 and 1 s."""
    ttft = {0.1: fast, 0.5: fast, 1.0: fast + slow, math.inf: fast + slow}
    return Sample(T0 + timedelta(minutes=minute), 0.5, 3, 1, tokens, ttft=ttft, tpot={})


def test_rates_and_percentiles_come_from_the_difference_of_samples() -> None:
    points, restarts = series([_sample(0, 0, 100, 0), _sample(1, 6000, 100, 10), _sample(2, 300, 100, 10)])
    assert points[0].generation_tokens_per_s is None  # nothing before the first sample
    assert points[1].generation_tokens_per_s == pytest.approx(100.0)  # 6000 tokens in 60 s
    # Only the 10 new observations count (all slow), not the 100 fast ones since start.
    assert 0.5 < (points[1].ttft_p50 or 0) <= 1.0
    assert restarts == [T0 + timedelta(minutes=2)]  # the counter went down: vLLM restarted
    assert points[2].generation_tokens_per_s is None


def test_sample_of_reads_vllm_metrics() -> None:
    text = "\n".join(
        [
            "# TYPE vllm:num_requests_running gauge",
            'vllm:num_requests_running{engine="0",model_name="m"} 4.0',
            "# TYPE vllm:time_to_first_token_seconds histogram",
            'vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="m"} 2.0',
            'vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 5.0',
            'vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 5.0',
            'vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 1.0',
            "",
        ]
    )
    sample = sample_of(text, T0)
    assert sample.running == 4.0
    assert sample.ttft == {0.1: 2.0, math.inf: 5.0}


def test_store_window_retention_and_downsampling(tmp_path: Path) -> None:
    history = History(Store(f"sqlite:///{tmp_path}/state.db"))
    now = T0 + timedelta(days=10)
    for minutes in range(0, 60):  # one hour, 2 days ago: thinned to one sample per 10 minutes
        history.add("production", Sample(now - timedelta(days=2, minutes=minutes), 0.1, 1, 0, 1.0))
    history.add("production", Sample(now - timedelta(days=8), 0.1, 1, 0, 1.0))  # past retention
    history.add("staging", Sample(now - timedelta(minutes=5), 0.2, 2, 0, 2.0, ttft={0.1: 1.0, math.inf: 2.0}))
    deleted = history.prune(now)
    assert deleted == 1 + 60 - 7  # one past retention; the hour spans 7 ten-minute slots, one kept in each
    kept = history.window("production", now - timedelta(days=7), now)
    assert len(kept) == 7
    (recent,) = history.window("staging", now - timedelta(hours=1), now)
    assert recent.ttft == {0.1: 1.0, math.inf: 2.0} and recent.at.tzinfo is not None


def test_chart_needs_two_points_and_draws_a_png() -> None:
    points, _ = series([_sample(0, 0, 1, 0), _sample(1, 600, 2, 1), _sample(2, 1200, 3, 1)])
    with pytest.raises(BadInput):
        metrics_chart_png(points[:1], [], "t")
    png = metrics_chart_png(points, [Event(T0 + timedelta(minutes=1), "alert: kv_cache")], "production")
    assert png.startswith(b"\x89PNG")
