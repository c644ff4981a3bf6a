"""`vllm bench serve` results: parse the console summary, plan a concurrency x input-length sweep, and render
the sweep as a heatmap (PNG) or CSV.

Output format: `vllm/benchmarks/serve.py` (see docs/vllm.md §3.1). Each result line is
`{label:<40} {value:<10}`; the block starts with `==== Serving Benchmark Result ====` and ends with a line of
`=`. Optional lines: `Failed requests`, `Maximum request concurrency`, `Request rate configured (RPS)`,
`Request goodput`, `Peak ...` and the End-to-end Latency section; older versions (mid-2025) print
`Total Token throughput` with a capital T and have no Failed/Peak lines. Percentile lines follow
`--metric-percentiles` (default 99).
"""

from __future__ import annotations

import csv
import io
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any

from ops.errors import BadInput, OpsError
from ops.linear import linear

__all__ = [
    "METRICS",
    "BenchResult",
    "SweepPoint",
    "context_refusal",
    "heatmap_png",
    "largest_lengths",
    "parse_bench_serve",
    "plan_sweep",
    "run_sweep",
    "sweep_csv",
]

_HEADER = linear(r"=+\s*Serving Benchmark Result\s*=+")
_END = linear(r"(?:^|\s)={40,}\s*$")
_LINE = linear(r"(?P<label>[A-Za-z][A-Za-z0-9 ()/._-]*?):\s+(?P<value>-?(?:\d+(?:\.\d+)?|inf|nan))\s*$")
_LATENCY = linear(r"^(?P<stat>mean|median|std|p(?P<p>\d+(?:\.\d+)?)) (?P<metric>ttft|tpot|itl|e2el) \(ms\)$")

# normalized label -> (field, type)
_LABELS: dict[str, tuple[str, type]] = {
    "successful requests": ("successful_requests", int),
    "failed requests": ("failed_requests", int),
    "maximum request concurrency": ("max_concurrency", int),
    "request rate configured (rps)": ("request_rate_configured", float),
    "benchmark duration (s)": ("duration_s", float),
    "total input tokens": ("total_input_tokens", int),
    "total generated tokens": ("total_generated_tokens", int),
    "request throughput (req/s)": ("request_throughput", float),
    "request goodput (req/s)": ("request_goodput", float),
    "output token throughput (tok/s)": ("output_throughput", float),
    "peak output token throughput (tok/s)": ("peak_output_throughput", float),
    "peak concurrent requests": ("peak_concurrent_requests", float),
    "total token throughput (tok/s)": ("total_token_throughput", float),
}


@dataclass(frozen=True)
class BenchResult:
    """Every figure of one `vllm bench serve` summary. None = not printed by that version or run.

    Attributes:
        successful_requests, failed_requests: request counts.
        max_concurrency: `--max-concurrency` (from the block, else from the line printed before it).
        request_rate_configured: requests/s when `--request-rate` was finite.
        duration_s: benchmark duration in seconds.
        total_input_tokens, total_generated_tokens: token counts.
        request_throughput, request_goodput: requests/s.
        output_throughput, peak_output_throughput, total_token_throughput: tokens/s.
        peak_concurrent_requests: requests in flight at the peak.
        mean_/median_/p99_ x ttft/tpot/itl/e2el _ms: latencies in milliseconds (TTFT: time to first token;
            TPOT: time per output token excluding the first; ITL: inter-token latency; E2EL: end-to-end).
        percentiles_ms: every printed percentile, e.g. {"ttft": {99.0: 106359.44}, "itl": {50.0: ...}}.
    """

    successful_requests: int | None = None
    failed_requests: int | None = None
    max_concurrency: int | None = None
    request_rate_configured: float | None = None
    duration_s: float | None = None
    total_input_tokens: int | None = None
    total_generated_tokens: int | None = None
    request_throughput: float | None = None
    request_goodput: float | None = None
    output_throughput: float | None = None
    peak_output_throughput: float | None = None
    peak_concurrent_requests: float | None = None
    total_token_throughput: float | None = None
    mean_ttft_ms: float | None = None
    median_ttft_ms: float | None = None
    p99_ttft_ms: float | None = None
    mean_tpot_ms: float | None = None
    median_tpot_ms: float | None = None
    p99_tpot_ms: float | None = None
    mean_itl_ms: float | None = None
    median_itl_ms: float | None = None
    p99_itl_ms: float | None = None
    mean_e2el_ms: float | None = None
    median_e2el_ms: float | None = None
    p99_e2el_ms: float | None = None
    percentiles_ms: dict[str, dict[float, float]] = field(default_factory=dict)


def _number(text: str) -> float:
    return float(text)


def parse_bench_serve(text: str) -> BenchResult:
    """Parse the console output of `vllm bench serve`.

    Args:
        text: the command's output; noise before and after the block (progress bars, log lines, the command
            echo) is ignored, and so are prefixes on the block's lines (e.g. docker log timestamps). If the
            output holds several result blocks, the last one is parsed.

    Returns:
        BenchResult with every figure printed.

    Raises:
        OpsError: no "Serving Benchmark Result" block, or a block without any figure (the benchmark failed).
    """
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if _HEADER.search(line)]
    if not starts:
        raise OpsError(
            "no 'Serving Benchmark Result' block in the vllm bench serve output",
            "the benchmark probably failed: read its output (or /vllm logs)",
            backend="bench",
        )
    start = starts[-1]
    values: dict[str, object] = {}
    percentiles: dict[str, dict[float, float]] = {}
    # Lines printed before the block (vllm/benchmarks/serve.py): "Maximum request concurrency: N".
    for line in lines[:start]:
        match = _LINE.search(line)
        if match and match.group("label").strip().lower() == "maximum request concurrency":
            values["max_concurrency"] = int(_number(match.group("value")))
    found = 0
    for line in lines[start + 1 :]:
        if _END.search(line):
            break
        match = _LINE.search(line)
        if not match:
            continue
        label = " ".join(match.group("label").split()).lower()
        raw = match.group("value")
        if label in _LABELS:
            name, kind = _LABELS[label]
            number = _number(raw)
            values[name] = int(number) if kind is int and math.isfinite(number) else number
            found += 1
            continue
        latency = _LATENCY.match(label)
        if latency:
            metric, stat = latency.group("metric"), latency.group("stat")
            number = _number(raw)
            if latency.group("p"):
                percentiles.setdefault(metric, {})[float(latency.group("p"))] = number
                if float(latency.group("p")) == 99.0:
                    values[f"p99_{metric}_ms"] = number
            elif stat in ("mean", "median"):
                values[f"{stat}_{metric}_ms"] = number
            found += 1
    if not found:
        raise OpsError(
            "the vllm bench serve result block has no figures",
            "the benchmark probably failed: read its output",
            backend="bench",
        )
    return BenchResult(**values, percentiles_ms=percentiles)  # type: ignore[arg-type]


# -- sweeps --------------------------------------------------------------------------------------------------

METRICS: dict[str, tuple[str, str]] = {
    "output_throughput": ("output token throughput", "tok/s"),
    "total_token_throughput": ("total token throughput", "tok/s"),
    "peak_output_throughput": ("peak output token throughput", "tok/s"),
    "request_throughput": ("request throughput", "req/s"),
    "mean_ttft_ms": ("mean TTFT", "ms"),
    "median_ttft_ms": ("median TTFT", "ms"),
    "p99_ttft_ms": ("P99 TTFT", "ms"),
    "mean_tpot_ms": ("mean TPOT", "ms"),
    "median_tpot_ms": ("median TPOT", "ms"),
    "p99_tpot_ms": ("P99 TPOT", "ms"),
    "mean_itl_ms": ("mean ITL", "ms"),
    "median_itl_ms": ("median ITL", "ms"),
    "p99_itl_ms": ("P99 ITL", "ms"),
    "duration_s": ("benchmark duration", "s"),
}
"""Metrics a heatmap can show: BenchResult field -> (label, unit)."""


@dataclass(frozen=True)
class SweepPoint:
    """One cell of a sweep.

    Attributes:
        concurrency: `--max-concurrency` (requests in flight).
        input_len, output_len: random-dataset lengths in tokens.
        skipped: True when the cell is not run.
        reason: why it was skipped (or why the run failed), else "".
        result: the parsed benchmark once run, else None.
        limit: what a skipped cell is beyond: "max_model_len" (every request of the cell would be refused)
            or "KV cache" (the cell would only measure preemption); "" when not skipped.
    """

    concurrency: int
    input_len: int
    output_len: int
    skipped: bool = False
    reason: str = ""
    result: BenchResult | None = None
    limit: str = ""

    @property
    def kv_tokens(self) -> int:
        """KV-cache tokens the cell needs at full concurrency: concurrency * (input_len + output_len)."""
        return self.concurrency * (self.input_len + self.output_len)


def context_refusal(input_len: int, output_len: int, max_model_len: int | None) -> str | None:
    """Why a request of `input_len` prompt tokens and `output_len` output tokens cannot run, or None.

    vLLM refuses with HTTP 400 every request whose prompt plus `max_tokens` exceeds `max_model_len`
    ("'max_tokens' or 'max_completion_tokens' is too large: ..." or "This model's maximum context length is N
    tokens. However, your request has M input tokens", vllm/entrypoints/openai/serving_engine.py; docs/vllm.md
    §1.7); `vllm bench serve` sends `--random-output-len` as `max_tokens`, so such a run fails on its first
    request.

    Args:
        input_len, output_len: tokens per request (positive).
        max_model_len: the served model's context window in tokens (`/v1/models`), None when unknown (then
            nothing is refused).

    Returns:
        e.g. "input 20000 + output 128 = 20128 tokens is beyond max_model_len 16384", else None.
    """
    if max_model_len is None or input_len + output_len <= max_model_len:
        return None
    return (
        f"input {input_len} + output {output_len} = {input_len + output_len} tokens is beyond "
        f"max_model_len {max_model_len}"
    )


def largest_lengths(input_len: int, output_len: int, max_model_len: int) -> str:
    """The largest lengths that fit in `max_model_len` when one of the two is kept, as options of `/vllm
    bench`, e.g. "`--input-len 16256` with `--output-len 128`, or `--output-len 384` with `--input-len
    16000`" (either part left out when keeping its length leaves no token for the other)."""
    options = []
    if output_len < max_model_len:
        options.append(f"`--input-len {max_model_len - output_len}` with `--output-len {output_len}`")
    if input_len < max_model_len:
        options.append(f"`--output-len {max_model_len - input_len}` with `--input-len {input_len}`")
    if not options:
        half = max_model_len // 2
        options.append(f"`--input-len {max_model_len - half}` with `--output-len {half}`")
    return ", or ".join(options)


def plan_sweep(
    concurrencies: Iterable[int],
    input_lens: Iterable[int],
    output_len: int,
    kv_capacity_tokens: int,
    max_model_len: int | None = None,
) -> list[SweepPoint]:
    """Plan a concurrency x input-length sweep, skipping cells that cannot succeed or fit in the KV cache.

    A cell whose input_len + output_len exceeds `max_model_len` is skipped ("beyond max_model_len N (...)"):
    vLLM refuses each of its requests (see `context_refusal`). A cell whose concurrency * (input_len +
    output_len) exceeds the KV-cache capacity would only measure preemption and queueing, so it is skipped
    too. Each skipped cell carries its reason and `limit`.

    Args:
        concurrencies: `--max-concurrency` values (positive).
        input_lens: `--random-input-len` values in tokens (positive).
        output_len: `--random-output-len` in tokens (positive).
        kv_capacity_tokens: KV-cache capacity in tokens, e.g. block_size * num_gpu_blocks from
            `vllm:cache_config_info` (or its `kv_cache_size_tokens` label), or vLLM's "GPU KV cache size"
            start-up line.
        max_model_len: the served model's context window in tokens (`/v1/models`), None when unknown.

    Returns:
        Points ordered by input length, then concurrency (both ascending, duplicates removed).

    Raises:
        BadInput: a non-positive value.
    """
    cons = sorted(set(concurrencies))
    lens = sorted(set(input_lens))
    if not cons or not lens or min(cons) < 1 or min(lens) < 1 or output_len < 1 or kv_capacity_tokens < 1:
        raise BadInput(
            "a sweep needs positive concurrencies, input lengths, output length and KV capacity",
            "e.g. concurrencies 1,4,16,64 and input lengths 128,1024,4096",
            backend="bench",
        )
    points = []
    for input_len in lens:
        refused = context_refusal(input_len, output_len, max_model_len)
        for concurrency in cons:
            point = SweepPoint(concurrency, input_len, output_len)
            if refused is not None:
                total = input_len + output_len
                reason = f"beyond max_model_len {max_model_len} ({input_len} + {output_len} = {total} tokens)"
                point = replace(point, skipped=True, reason=reason, limit="max_model_len")
            elif point.kv_tokens > kv_capacity_tokens:
                point = replace(
                    point,
                    skipped=True,
                    reason=(
                        f"needs {point.kv_tokens} KV tokens ({concurrency} x ({input_len} + {output_len})) "
                        f"> capacity {kv_capacity_tokens}"
                    ),
                    limit="KV cache",
                )
            points.append(point)
    return points


def run_sweep(points: Sequence[SweepPoint], run: Callable[[SweepPoint], str]) -> list[SweepPoint]:
    """Run every non-skipped point and attach its parsed result.

    Args:
        points: from `plan_sweep`.
        run: runs one benchmark and returns its output, e.g.
            `lambda p: container.bench(BenchParams(..., input_len=p.input_len, ...))`.

    Returns:
        New points; a run that raised OpsError or printed no result block is kept with `reason` set and
        `result` None.
    """
    done = []
    for point in points:
        if point.skipped:
            done.append(point)
            continue
        try:
            done.append(replace(point, result=parse_bench_serve(run(point))))
        except OpsError as exc:
            done.append(replace(point, reason=f"failed: {exc.message}"))
    return done


def sweep_csv(points: Sequence[SweepPoint]) -> str:
    """The sweep as CSV text.

    Columns: concurrency, input_len, output_len, kv_tokens, status ("ok", "skipped", "failed", "planned"),
    reason, then every numeric BenchResult field (empty when absent).
    """
    metric_fields = [f.name for f in fields(BenchResult) if f.name != "percentiles_ms"]
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(
        ["concurrency", "input_len", "output_len", "kv_tokens", "status", "reason", *metric_fields]
    )
    for p in points:
        status = "skipped" if p.skipped else "ok" if p.result else "failed" if p.reason else "planned"
        row: list[object] = [p.concurrency, p.input_len, p.output_len, p.kv_tokens, status, p.reason]
        for name in metric_fields:
            value = getattr(p.result, name) if p.result is not None else None
            row.append("" if value is None else value)
        writer.writerow(row)
    return out.getvalue()


def heatmap_png(points: Sequence[SweepPoint], metric: str = "output_throughput") -> bytes:
    """Render a sweep as a heatmap PNG (matplotlib, Agg backend; no display needed).

    x: max concurrency (requests), y: input length (tokens), colour: the metric. Skipped cells are grey and
    marked "skip (KV)" (beyond the KV cache) or "skip (len)" (beyond max_model_len); cells without a result
    are marked "n/a".

    Args:
        points: sweep points (with results for the cells to colour).
        metric: a key of METRICS (a BenchResult field).

    Returns:
        The PNG bytes.

    Raises:
        BadInput: unknown metric or no points.
    """
    if metric not in METRICS:
        raise BadInput(
            f"unknown heatmap metric {metric!r}", "use one of: " + ", ".join(METRICS), backend="bench"
        )
    if not points:
        raise BadInput("no sweep points to draw", "plan and run a sweep first", backend="bench")
    fig = _heatmap_figure(points, metric)
    try:
        buffer = io.BytesIO()
        fig.savefig(buffer, format="png")
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)
    return buffer.getvalue()


def _heatmap_figure(points: Sequence[SweepPoint], metric: str) -> Any:
    """The heatmap as a matplotlib Figure (the caller closes it). The title is two short lines and the
    figure at least 6.4 inches wide, so a one- or two-column sweep does not clip it."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    cons = sorted({p.concurrency for p in points})
    lens = sorted({p.input_len for p in points})
    grid = np.full((len(lens), len(cons)), np.nan)
    labels: dict[tuple[int, int], str] = {}
    for p in points:
        row, col = lens.index(p.input_len), cons.index(p.concurrency)
        value = getattr(p.result, metric) if p.result is not None else None
        if p.skipped:
            labels[(row, col)] = "skip\n(len)" if p.limit == "max_model_len" else "skip\n(KV)"
        elif value is None:
            labels[(row, col)] = "n/a"
        else:
            grid[row, col] = float(value)
            labels[(row, col)] = f"{value:,.1f}"  # the number format of the bench table
    title, unit = METRICS[metric]
    output_lens = sorted({p.output_len for p in points})
    width = max(6.4, 1.2 * len(cons) + 3)
    fig, ax = plt.subplots(figsize=(width, 0.8 * len(lens) + 2.4), dpi=100)
    cmap = plt.get_cmap("viridis").with_extremes(bad="#d0d0d0")
    image = ax.imshow(np.ma.masked_invalid(grid), cmap=cmap, aspect="auto", origin="lower")
    ax.set_xticks(range(len(cons)), [str(c) for c in cons])
    ax.set_yticks(range(len(lens)), [str(n) for n in lens])
    ax.set_xlabel("max concurrency (requests)")
    ax.set_ylabel("input length (tokens)")
    out_text = ", ".join(str(n) for n in output_lens)
    ax.set_title(f"vllm bench serve: {title} ({unit})\noutput length {out_text} tokens")
    finite = grid[np.isfinite(grid)]
    middle = float(np.nanmean(finite)) if finite.size else 0.0
    for (row, col), text in labels.items():
        value = grid[row, col]
        colour = "black" if not np.isfinite(value) or value > middle else "white"
        ax.text(col, row, text, ha="center", va="center", fontsize=8, color=colour)
    bar = fig.colorbar(image, ax=ax)
    bar.set_label(f"{title} ({unit})")
    fig.tight_layout()
    return fig
