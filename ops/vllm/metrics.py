"""Parse and summarize vLLM's Prometheus `/metrics` scrape.

vLLM (V1 engine) exposes its metrics with prometheus-client; the names and buckets are defined in
`vllm/v1/metrics/loggers.py` (`PrometheusStatLogger`) and listed at https://docs.vllm.ai/en/latest/usage/metrics.html.
See also docs/vllm.md §2. What this module relies on:

- Every `vllm:` series carries the labels `model_name` and `engine` (the data-parallel engine index); labels
  are printed in alphabetical order, so nothing here depends on their order.
- Counters are exposed with a `_total` suffix and a companion `_created` gauge (a unix timestamp); `_created`
  samples are ignored. Some scrapes have no `# TYPE` lines at all, so the parser works on samples, by their
  exposed name, never on family types.
- Renamed metrics: `vllm:gpu_cache_usage_perc` -> `vllm:kv_cache_usage_perc` and
  `vllm:gpu_prefix_cache_queries` / `_hits` -> `vllm:prefix_cache_queries` / `_hits` (deprecated in 0.9);
  `vllm:time_per_output_token_seconds` -> `vllm:inter_token_latency_seconds` plus
  `vllm:request_time_per_output_token_seconds` (deprecated in 0.11).
  When both names are in a scrape the current one wins; a deprecated name that was actually read is listed in
  `MetricsSummary.deprecated_names`.

The values are cumulative since the server started (counters, histograms) or instantaneous (gauges). Rates
need two scrapes: subtract them, and treat a counter that went down as a server restart.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

from prometheus_client.parser import text_string_to_metric_families

__all__ = [
    "MetricsSummary",
    "Quantiles",
    "histogram_quantile",
    "kv_cache_capacity_tokens",
    "samples_by_name",
    "summarize",
]


@dataclass(frozen=True)
class Quantiles:
    """Latency distribution read from one Prometheus histogram, merged over engines.

    Attributes:
        p50: median in seconds, or None when it cannot be computed (no observations, or no `+Inf` bucket).
        p95: 95th percentile in seconds, same rules.
        mean: `_sum / _count` in seconds, or None when there is no `_sum` or no observations.
        count: number of observations (`_count`, else the `+Inf` bucket).

    Percentiles follow Prometheus `histogram_quantile` (see `histogram_quantile` below): they are estimates
    interpolated inside a bucket, so they are only as fine as vLLM's bucket boundaries.
    """

    p50: float | None
    p95: float | None
    mean: float | None
    count: int


@dataclass(frozen=True)
class MetricsSummary:
    """What the bot reports about one `/metrics` scrape. Every value is None when the scrape lacks the metric.

    Attributes:
        models: `model_name` label values seen on `vllm:` series, sorted.
        engines: `engine` label values, sorted (numerically when they are numbers).
        running: `vllm:num_requests_running`, summed over engines (requests).
        waiting: `vllm:num_requests_waiting`, summed over engines (requests).
        kv_cache_usage: fraction 0..1 of KV-cache blocks in use, the maximum over engines
            (`vllm:kv_cache_usage_perc`, else deprecated `vllm:gpu_cache_usage_perc`; "perc" is a misnomer).
        prefix_cache_queries: tokens looked up in the prefix cache since start, summed over engines
            (`vllm:prefix_cache_queries`, else deprecated `vllm:gpu_prefix_cache_queries`).
        prefix_cache_hits: tokens found in the prefix cache since start (same naming rule).
        prefix_cache_hit_rate: hits / queries since server start (0..1); None if there were no queries.
        preemptions: `vllm:num_preemptions` since start; rising means KV-cache pressure.
        prompt_tokens: prefill tokens since start (`vllm:prompt_tokens`).
        generation_tokens: decode tokens since start (`vllm:generation_tokens`).
        requests_finished: `vllm:request_success` by `finished_reason` (stop, length, abort, ...), summed
            over engines; empty when the scrape has none.
        ttft: time to first token (`vllm:time_to_first_token_seconds`).
        itl: inter-token latency (`vllm:inter_token_latency_seconds`, else deprecated
            `vllm:time_per_output_token_seconds`, which recorded the same per-token intervals).
        tpot: per-request mean time per output token (`vllm:request_time_per_output_token_seconds`, else
            deprecated `vllm:time_per_output_token_seconds`).
        e2e: end-to-end request latency (`vllm:e2e_request_latency_seconds`).
        cache_config: labels of `vllm:cache_config_info` for the lowest engine (normally "0"), without the
            `engine` label, e.g. {"block_size": "16", "num_gpu_blocks": "5000", "kv_cache_size_tokens": ...}.
        deprecated_names: deprecated metric names (as registered, without `_total`) that supplied a value.
        started_at: when the server process started (`process_start_time_seconds`, prometheus_client's
            process collector; vLLM serves it with one API server), the start of every counter above; None
            when the scrape lacks it.
    """

    models: tuple[str, ...]
    engines: tuple[str, ...]
    running: float | None
    waiting: float | None
    kv_cache_usage: float | None
    prefix_cache_queries: float | None
    prefix_cache_hits: float | None
    prefix_cache_hit_rate: float | None
    preemptions: float | None
    prompt_tokens: float | None
    generation_tokens: float | None
    requests_finished: dict[str, float] = field(default_factory=dict)
    ttft: Quantiles | None = None
    itl: Quantiles | None = None
    tpot: Quantiles | None = None
    e2e: Quantiles | None = None
    cache_config: dict[str, str] = field(default_factory=dict)
    deprecated_names: tuple[str, ...] = ()
    started_at: datetime | None = None


_Labels = Mapping[str, str]
_Series = list[tuple[_Labels, float]]


def _engine_key(engine: str) -> tuple[int, int, str]:
    return (0, int(engine), "") if engine.isdigit() else (1, 0, engine)


LOAD_FAMILIES = (
    "vllm:num_requests_running",
    "vllm:num_requests_waiting",
    "vllm:kv_cache_usage_perc",
    "vllm:gpu_cache_usage_perc",
)
"""The gauges of a server's load (`MetricsSummary.running`, `waiting`, `kv_cache_usage`), as vLLM names
them (https://docs.vllm.ai/en/latest/design/metrics.html); `/fleet` reads only these of each deployment."""

_SERIES_SUFFIXES = ("", "_total", "_bucket", "_sum", "_count", "_created")


def _only(text: str, families: Iterable[str]) -> str:
    """The lines of `text` that belong to `families` (their `# HELP`/`# TYPE` lines and samples, a counter's
    `_total` and a histogram's `_bucket`, `_sum` and `_count` included): the parser then reads a few lines,
    not a whole scrape (a TPU server's is about a thousand lines, parsed in milliseconds of CPU)."""
    wanted = {family + suffix for family in families for suffix in _SERIES_SUFFIXES}
    kept = []
    for line in text.splitlines():
        if line.startswith("#"):
            parts = line.split(" ", 3)
            name = parts[2] if len(parts) > 2 and parts[1] in ("HELP", "TYPE") else ""
        else:
            name = line.split("{", 1)[0].split(" ", 1)[0]
        if name in wanted:
            kept.append(line)
    return "\n".join(kept) + "\n"


def samples_by_name(
    text: str, families: Iterable[str] | None = None
) -> dict[str, list[tuple[Mapping[str, str], float]]]:
    """The one reader of a `/metrics` text: its samples by exposed name, `_created` samples dropped.

    Args:
        text: Prometheus text exposition format
            (https://prometheus.io/docs/instrumenting/exposition_formats/#text-based-format), as vLLM's
            `/metrics` serves it, parsed by prometheus_client's `text_string_to_metric_families`.
        families: read only these metric families (e.g. LOAD_FAMILIES); None: every one.

    Returns:
        {"vllm:prompt_tokens_total": [(labels, value), ...], ...}: a counter under its `_total` name, a
        histogram's `_bucket`, `_sum` and `_count` series each under its own; every engine's sample kept.

    Raises:
        ValueError: the text is not Prometheus text exposition format.
    """
    by_name: dict[str, _Series] = defaultdict(list)
    for family in text_string_to_metric_families(text if families is None else _only(text, families)):
        for sample in family.samples:
            if sample.name.endswith("_created"):
                continue
            by_name[sample.name].append((sample.labels, float(sample.value)))
    return by_name


def histogram_quantile(q: float, buckets: Iterable[tuple[float, float]]) -> float | None:
    """Estimate the q-quantile of a histogram the way Prometheus' `histogram_quantile()` does.

    Semantics (https://prometheus.io/docs/prometheus/latest/querying/functions/#histogram_quantile and
    `bucketQuantile` in prometheus/promql/quantile.go):
    - buckets are cumulative counts by upper bound `le`; the highest one must be `+Inf`, else the result is
      undefined (None here; NaN in Prometheus). Fewer than two buckets or zero observations: None.
    - counts are made monotonic first (a lower count after a higher one is raised to it).
    - rank = q * total. The answer lies in the first bucket whose cumulative count is >= rank, by linear
      interpolation between that bucket's lower bound (the previous `le`, or 0 for the first bucket) and its
      upper bound, assuming observations are spread evenly inside the bucket.
    - if that bucket is `+Inf`, the upper bound of the highest finite bucket is returned.
    - if it is the first bucket and its upper bound is <= 0, that upper bound is returned.

    Args:
        q: the quantile, 0..1 (0.5 = median).
        buckets: (upper bound, cumulative count) pairs in any order; `math.inf` for the `+Inf` bucket.

    Returns:
        The estimate, in the unit of the bucket bounds (seconds for vLLM's latency histograms), or None.

    Raises:
        ValueError: q is outside 0..1.
    """
    if not 0.0 <= q <= 1.0:
        raise ValueError(f"quantile {q} is outside 0..1")
    merged: dict[float, float] = defaultdict(float)
    for upper, count in buckets:
        merged[upper] += count
    ordered = sorted(merged.items())
    if len(ordered) < 2 or not math.isinf(ordered[-1][0]):
        return None
    bounds = [upper for upper, _ in ordered]
    counts: list[float] = []
    for _, count in ordered:
        counts.append(max(count, counts[-1]) if counts else count)
    total = counts[-1]
    if total <= 0:
        return None
    rank = q * total
    b = next((i for i in range(len(counts) - 1) if counts[i] >= rank), len(counts) - 1)
    if b == len(counts) - 1:
        return bounds[-2]
    if b == 0 and bounds[0] <= 0:
        return bounds[0]
    start = 0.0 if b == 0 else bounds[b - 1]
    end = bounds[b]
    in_bucket = counts[b] - (counts[b - 1] if b > 0 else 0.0)
    below = counts[b - 1] if b > 0 else 0.0
    if in_bucket <= 0:
        return start
    return start + (end - start) * ((rank - below) / in_bucket)


def _le(value: str) -> float | None:
    try:
        return float(value)  # float() reads "+Inf" as inf
    except ValueError:
        return None


def _histogram(samples: Mapping[str, _Series], name: str) -> Quantiles | None:
    """Merge one histogram over engines (bucket counts summed per `le`) and summarize it.

    Returns None when the scrape has no usable total for it (neither `_count` nor a `+Inf` bucket), which
    also happens with a truncated scrape.
    """
    buckets: dict[float, float] = defaultdict(float)
    for labels, value in samples.get(name + "_bucket", []):
        upper = _le(labels.get("le", ""))
        if upper is not None:
            buckets[upper] += value
    count_series = samples.get(name + "_count")
    if count_series:
        count = sum(value for _, value in count_series)
    elif math.inf in buckets:
        count = buckets[math.inf]
    else:
        return None
    sum_series = samples.get(name + "_sum")
    total = sum(value for _, value in sum_series) if sum_series else None
    pairs = list(buckets.items())
    return Quantiles(
        p50=histogram_quantile(0.5, pairs),
        p95=histogram_quantile(0.95, pairs),
        mean=total / count if total is not None and count > 0 else None,
        count=int(count),
    )


class _Reader:
    """Looks metrics up by current name, then deprecated name, remembering the deprecated ones used."""

    def __init__(self, samples: Mapping[str, _Series]) -> None:
        self.samples = samples
        self.deprecated: list[str] = []

    def _note(self, name: str) -> None:
        if name not in self.deprecated:
            self.deprecated.append(name)

    def series(self, names: Sequence[str], suffix: str = "") -> _Series | None:
        """First non-empty series among `names` (registered names; `suffix` e.g. "_total" is appended)."""
        for i, name in enumerate(names):
            found = self.samples.get(name + suffix)
            if found:
                if i > 0:
                    self._note(name)
                return found
        return None

    def total(self, *names: str, suffix: str = "") -> float | None:
        found = self.series(names, suffix)
        return sum(value for _, value in found) if found is not None else None

    def maximum(self, *names: str) -> float | None:
        found = self.series(names)
        return max(value for _, value in found) if found is not None else None

    def histogram(self, *names: str) -> Quantiles | None:
        for i, name in enumerate(names):
            result = _histogram(self.samples, name)
            if result is not None:
                if i > 0:
                    self._note(name)
                return result
        return None


def summarize(text: str, families: Iterable[str] | None = None) -> MetricsSummary:
    """Summarize one `/metrics` scrape of a vLLM server.

    Args:
        text: the body of `GET /metrics` (Prometheus text exposition format 0.0.4).
        families: summarize only these metric families (`samples_by_name`); the other fields are None.

    Returns:
        A MetricsSummary; fields the scrape lacks are None (or empty). An empty text gives an all-empty
        summary.

    Raises:
        ValueError: the text is not Prometheus exposition format (from prometheus-client's parser).
    """
    samples = samples_by_name(text, families)
    reader = _Reader(samples)

    models: set[str] = set()
    engines: set[str] = set()
    for name, series in samples.items():
        if not name.startswith("vllm:"):
            continue
        for labels, _ in series:
            if "model_name" in labels:
                models.add(labels["model_name"])
            if "engine" in labels:
                engines.add(labels["engine"])

    queries = reader.total("vllm:prefix_cache_queries", "vllm:gpu_prefix_cache_queries", suffix="_total")
    hits = reader.total("vllm:prefix_cache_hits", "vllm:gpu_prefix_cache_hits", suffix="_total")
    hit_rate = hits / queries if hits is not None and queries else None

    finished: dict[str, float] = defaultdict(float)
    for labels, value in samples.get("vllm:request_success_total", []):
        finished[labels.get("finished_reason", "")] += value

    cache_config: dict[str, str] = {}
    info = samples.get("vllm:cache_config_info", [])
    if info:
        first = min(info, key=lambda item: _engine_key(item[0].get("engine", "")))
        cache_config = {key: value for key, value in first[0].items() if key != "engine"}

    return MetricsSummary(
        models=tuple(sorted(models)),
        engines=tuple(sorted(engines, key=_engine_key)),
        running=reader.total("vllm:num_requests_running"),
        waiting=reader.total("vllm:num_requests_waiting"),
        kv_cache_usage=reader.maximum("vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc"),
        prefix_cache_queries=queries,
        prefix_cache_hits=hits,
        prefix_cache_hit_rate=hit_rate,
        preemptions=reader.total("vllm:num_preemptions", suffix="_total"),
        prompt_tokens=reader.total("vllm:prompt_tokens", suffix="_total"),
        generation_tokens=reader.total("vllm:generation_tokens", suffix="_total"),
        requests_finished=dict(finished),
        ttft=reader.histogram("vllm:time_to_first_token_seconds"),
        itl=reader.histogram("vllm:inter_token_latency_seconds", "vllm:time_per_output_token_seconds"),
        tpot=reader.histogram(
            "vllm:request_time_per_output_token_seconds", "vllm:time_per_output_token_seconds"
        ),
        e2e=reader.histogram("vllm:e2e_request_latency_seconds"),
        cache_config=cache_config,
        deprecated_names=tuple(reader.deprecated),
        started_at=next(
            (
                datetime.fromtimestamp(value, UTC)
                for _, value in samples.get("process_start_time_seconds", [])
            ),
            None,
        ),
    )


def kv_cache_capacity_tokens(summary: MetricsSummary) -> int | None:
    """How many tokens the KV cache of one engine can hold, from `vllm:cache_config_info`.

    Uses the `kv_cache_size_tokens` label (newer vLLM builds) when present, else
    `num_gpu_blocks * block_size`.
    The label is preferred because block count times block size can overstate the capacity (for example
    with hybrid attention models: a real scrape reports kv_cache_size_tokens=66901 with 49 blocks of 1568).

    Args:
        summary: a summary from `summarize`.

    Returns:
        Capacity in tokens, or None when the scrape has no cache config or the labels are not integers
        (vLLM prints "None" for blocks not yet known).
    """
    config = summary.cache_config
    try:
        if "kv_cache_size_tokens" in config:
            return int(config["kv_cache_size_tokens"])
        if "num_gpu_blocks" in config and "block_size" in config:
            return int(config["num_gpu_blocks"]) * int(config["block_size"])
    except ValueError:
        return None
    return None
