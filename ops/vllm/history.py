"""History of each deployment's vLLM metrics in the state store, and the series a chart draws.

A sample keeps what one `/metrics` scrape said: the gauges (KV-cache usage, running and waiting requests),
the generation-token counter and the cumulative TTFT and TPOT histogram buckets. Rates and latency
percentiles over time come from the difference of consecutive samples, as Prometheus' `rate()` and
`histogram_quantile()` do (https://prometheus.io/docs/prometheus/latest/querying/functions/#histogram_quantile);
a counter that goes down marks a vLLM restart. Retention is bounded: samples older than `RETENTION` are
deleted, and those older than `FULL_RESOLUTION` are thinned to one per `DOWNSAMPLE_STEP`.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from sqlalchemy import Column, DateTime, Float, Integer, String, Table, Text, and_, delete, select

from ops.store.state import Store, metadata
from ops.vllm.metrics import histogram_quantile, samples_by_name, summarize

__all__ = ["DOWNSAMPLE_STEP", "RETENTION", "History", "Point", "Sample", "sample_of", "series"]

RETENTION = timedelta(days=7)
FULL_RESOLUTION = timedelta(hours=24)
DOWNSAMPLE_STEP = timedelta(minutes=10)

# vLLM's histogram names, the current one first (vllm/v1/metrics/loggers.py; see ops/vllm/metrics.py).
TTFT = ("vllm:time_to_first_token_seconds",)
TPOT = ("vllm:request_time_per_output_token_seconds", "vllm:time_per_output_token_seconds")

samples_table = Table(
    "metric_samples",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("deployment", String(64), nullable=False, index=True),
    Column("at", DateTime(timezone=True), nullable=False, index=True),
    Column("kv_cache_usage", Float),
    Column("running", Float),
    Column("waiting", Float),
    Column("generation_tokens", Float),
    Column("ttft_buckets", Text),
    Column("tpot_buckets", Text),
)


@dataclass(frozen=True)
class Sample:
    """One scrape: gauges, the generation-token counter and cumulative histogram buckets.

    Attributes:
        at: when it was taken, timezone-aware.
        kv_cache_usage: fraction 0..1; running, waiting: requests; generation_tokens: tokens since start.
        ttft, tpot: cumulative bucket counts, upper bound in seconds (inf for +Inf) -> observations.
    """

    at: datetime
    kv_cache_usage: float | None
    running: float | None
    waiting: float | None
    generation_tokens: float | None
    ttft: dict[float, float] = field(default_factory=dict)
    tpot: dict[float, float] = field(default_factory=dict)


def _buckets(
    samples: Mapping[str, Sequence[tuple[Mapping[str, str], float]]], names: Sequence[str]
) -> dict[float, float]:
    """The first of `names` present, its `_bucket` samples summed over engines per `le`."""
    for name in names:
        series = samples.get(f"{name}_bucket")
        if series:
            found: dict[float, float] = defaultdict(float)
            for labels, value in series:
                found[float(labels.get("le", "nan"))] += value
            return {le: count for le, count in found.items() if not math.isnan(le)}
    return {}


def sample_of(text: str, at: datetime) -> Sample:
    """A Sample of one `/metrics` text.

    Raises:
        ValueError: the text is not Prometheus text exposition format.
    """
    summary, samples = summarize(text), samples_by_name(text)
    return Sample(
        at=at,
        kv_cache_usage=summary.kv_cache_usage,
        running=summary.running,
        waiting=summary.waiting,
        generation_tokens=summary.generation_tokens,
        ttft=_buckets(samples, TTFT),
        tpot=_buckets(samples, TPOT),
    )


def _dump(buckets: dict[float, float]) -> str:
    return json.dumps([["+Inf" if math.isinf(le) else le, count] for le, count in sorted(buckets.items())])


def _load(text: str | None) -> dict[float, float]:
    return {float(le): float(count) for le, count in json.loads(text or "[]")}


class History:
    """Samples per deployment in the state store (table `metric_samples`, made by the migrations)."""

    def __init__(self, store: Store) -> None:
        self.engine = store.engine

    def add(self, deployment: str, *samples: Sample) -> None:
        """Store samples of `deployment` (one transaction)."""
        rows = [
            {
                "deployment": deployment,
                "at": sample.at,
                "kv_cache_usage": sample.kv_cache_usage,
                "running": sample.running,
                "waiting": sample.waiting,
                "generation_tokens": sample.generation_tokens,
                "ttft_buckets": _dump(sample.ttft),
                "tpot_buckets": _dump(sample.tpot),
            }
            for sample in samples
        ]
        if rows:
            with self.engine.begin() as conn:
                conn.execute(samples_table.insert(), rows)

    def window(self, deployment: str, since: datetime, until: datetime) -> list[Sample]:
        """Samples of `deployment` taken in [since, until], oldest first."""
        t = samples_table
        query = (
            select(t)
            .where(and_(t.c.deployment == deployment, t.c.at >= since, t.c.at <= until))
            .order_by(t.c.at)
        )
        with self.engine.connect() as conn:
            rows = conn.execute(query).all()
        return [
            Sample(
                at=_aware(row.at),
                kv_cache_usage=row.kv_cache_usage,
                running=row.running,
                waiting=row.waiting,
                generation_tokens=row.generation_tokens,
                ttft=_load(row.ttft_buckets),
                tpot=_load(row.tpot_buckets),
            )
            for row in rows
        ]

    def prune(self, now: datetime) -> int:
        """Delete samples older than RETENTION; thin those older than FULL_RESOLUTION to the first of each
        DOWNSAMPLE_STEP per deployment. Returns how many rows were deleted."""
        t = samples_table
        with self.engine.begin() as conn:
            deleted = conn.execute(delete(t).where(t.c.at < now - RETENTION)).rowcount or 0
            old = conn.execute(
                select(t.c.id, t.c.deployment, t.c.at).where(t.c.at < now - FULL_RESOLUTION).order_by(t.c.at)
            ).all()
            kept: set[tuple[str, int]] = set()
            drop: list[int] = []
            step = DOWNSAMPLE_STEP.total_seconds()
            for row in old:
                slot = (row.deployment, int(_aware(row.at).timestamp() // step))
                if slot in kept:
                    drop.append(row.id)
                kept.add(slot)
            for start in range(0, len(drop), 500):
                deleted += conn.execute(delete(t).where(t.c.id.in_(drop[start : start + 500]))).rowcount or 0
        return deleted


def _aware(moment: datetime) -> datetime:
    """SQLite returns naive datetimes; the store writes UTC."""
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


@dataclass(frozen=True)
class Point:
    """What a chart draws at one time: gauges as sampled; rates and percentiles over the interval that
    ends here (None for the first sample, after a restart, or with no requests in it).

    Attributes: kv_cache_usage 0..1; running, waiting: requests; generation_tokens_per_s: tokens/s;
    ttft_p50, ttft_p95, tpot_p50, tpot_p95: seconds.
    """

    at: datetime
    kv_cache_usage: float | None
    running: float | None
    waiting: float | None
    generation_tokens_per_s: float | None = None
    ttft_p50: float | None = None
    ttft_p95: float | None = None
    tpot_p50: float | None = None
    tpot_p95: float | None = None


def _delta_quantiles(
    now: dict[float, float], before: dict[float, float]
) -> tuple[float | None, float | None]:
    delta = [(le, count - before.get(le, 0.0)) for le, count in now.items()]
    if not delta or max(count for _, count in delta) <= 0:
        return None, None
    return histogram_quantile(0.5, delta), histogram_quantile(0.95, delta)


def series(samples: Sequence[Sample]) -> tuple[list[Point], list[datetime]]:
    """Points from consecutive samples, and the times vLLM restarted (a counter went down).

    Returns:
        (points, one per sample; restart times).
    """
    points: list[Point] = []
    restarts: list[datetime] = []
    previous: Sample | None = None
    for sample in samples:
        gauges = (sample.kv_cache_usage, sample.running, sample.waiting)
        restarted = (
            previous is not None
            and previous.generation_tokens is not None
            and sample.generation_tokens is not None
            and sample.generation_tokens < previous.generation_tokens
        )
        if restarted:
            restarts.append(sample.at)
        if previous is None or restarted:
            points.append(Point(sample.at, *gauges))
            previous = sample
            continue
        seconds = (sample.at - previous.at).total_seconds()
        rate = None
        if seconds > 0 and sample.generation_tokens is not None and previous.generation_tokens is not None:
            rate = (sample.generation_tokens - previous.generation_tokens) / seconds
        ttft = _delta_quantiles(sample.ttft, previous.ttft)
        tpot = _delta_quantiles(sample.tpot, previous.tpot)
        points.append(Point(sample.at, *gauges, rate, *ttft, *tpot))
        previous = sample
    return points, restarts
