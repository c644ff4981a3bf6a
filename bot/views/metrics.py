"""vLLM metrics as text: the summary lines of /vllm metrics, /tpu status and the chat facts, and
latencies in milliseconds; benchmarks as Slack blocks (a `vllm bench serve` run, the stored runs and a
comparison of two)."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from bot.slack.render import (
    Attachment,
    Reply,
    blocks_reply,
    cancel_button,
    code,
    context,
    header,
    human_duration,
    plural,
    section,
    utc,
)
from ops.store.state import BenchRun
from ops.vllm.bench import BenchResult, SweepPoint
from ops.vllm.container import BenchParams
from ops.vllm.metrics import MetricsSummary, Quantiles


def ms(seconds: float | None) -> str:
    """Seconds as whole milliseconds, "-" when unknown."""
    return "-" if seconds is None else f"{seconds * 1000:,.0f} ms"


def _quantiles(label: str, q: Quantiles | None) -> str | None:
    if q is None or q.count == 0:
        return None
    return f"{label} p50 {ms(q.p50)} · p95 {ms(q.p95)} · mean {ms(q.mean)} ({q.count:,} samples)"


def _num(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def metrics_lines(m: MetricsSummary) -> list[str]:
    """A metrics summary as markdown lines: load, KV cache, prefix cache, tokens, latency quantiles, and
    since when the counters count (the server's start)."""
    kv = "-" if m.kv_cache_usage is None else f"{m.kv_cache_usage:.1%}"
    hit = "-" if m.prefix_cache_hit_rate is None else f"{m.prefix_cache_hit_rate:.1%}"
    lines = [
        f"*Requests* running {_num(m.running)} · waiting {_num(m.waiting)}"
        # vLLM's scheduler preempting requests for KV-cache space (vllm:num_preemptions_total), not a TPU
        # preemption: the words say whose.
        f" · preempted by vLLM {_num(m.preemptions)} (KV cache full)",
        f"*KV cache* usage {kv} · *prefix cache* hit rate {hit}"
        + (
            f" ({_num(m.prefix_cache_hits)} of {_num(m.prefix_cache_queries)} tokens)"
            if m.prefix_cache_queries
            else ""
        ),
        f"*Tokens* prompt {_num(m.prompt_tokens)} · generated {_num(m.generation_tokens)}",
    ]
    lines += [
        line
        for line in (
            _quantiles("*TTFT*", m.ttft),
            _quantiles("*ITL*", m.itl),
            _quantiles("*TPOT*", m.tpot),
            _quantiles("*E2E*", m.e2e),
        )
        if line
    ]
    if m.started_at is not None:  # a restart starts every counter at 0: say from when they count
        lines.append(f"_Counted since the server started, {utc(m.started_at)}._")
    if len(m.engines) > 1:
        lines.append(f"_Engines: {', '.join(m.engines)} (summed; KV cache is the fullest engine)._")
    if m.deprecated_names:
        lines.append(
            "_Read deprecated metric names: " + ", ".join(f"`{n}`" for n in m.deprecated_names) + "._"
        )
    return lines


def chart_reply(
    deployment: str,
    model: str,
    span: timedelta,
    samples: int,
    restarts: int,
    events: int,
    name: str,
    png: bytes,
) -> Reply:
    """/vllm metrics --chart: a summary of the window (`samples` sampled, `restarts` of vLLM, `events` marks
    in all, restarts included) and the chart `png` attached as `name`."""
    summary = (
        f"*vLLM metrics history* of `{deployment}` (`{model}`), last {human_duration(span)}: "
        f"{samples} samples, {plural(restarts, 'restart')}, {plural(events - restarts, 'alert')} marked."
    )
    reply = blocks_reply(
        [
            section(summary),
            context(
                f"Chart: {name} (KV cache %, running / waiting, generated tokens/s, TTFT and TPOT p50 / p95)"
            ),
        ]
    )
    reply.files.append(Attachment(name, png, "vLLM metrics history"))
    return reply


def figure(value: float | int | None) -> str:
    """One number format for every benchmark figure: counts with thousands separators, measurements with
    one decimal ("1,234", "1,234.5"); "-" when the run did not print it."""
    if value is None:
        return "-"
    return f"{value:,}" if isinstance(value, int) else f"{value:,.1f}"


#: (label, BenchResult field, unit) of each table row: one figure per row, every row labelled.
TABLE_ROWS: tuple[tuple[str, str, str], ...] = (
    ("Successful requests", "successful_requests", ""),
    ("Failed requests", "failed_requests", ""),
    ("Max concurrency", "max_concurrency", ""),
    ("Duration", "duration_s", "s"),
    ("Input tokens", "total_input_tokens", ""),
    ("Generated tokens", "total_generated_tokens", ""),
    ("Request throughput", "request_throughput", "req/s"),
    ("Output token throughput", "output_throughput", "tok/s"),
    ("Peak output token throughput", "peak_output_throughput", "tok/s"),
    ("Total token throughput", "total_token_throughput", "tok/s"),
    ("TTFT mean", "mean_ttft_ms", "ms"),
    ("TTFT median", "median_ttft_ms", "ms"),
    ("TTFT P99", "p99_ttft_ms", "ms"),
    ("TPOT mean", "mean_tpot_ms", "ms"),
    ("TPOT median", "median_tpot_ms", "ms"),
    ("TPOT P99", "p99_tpot_ms", "ms"),
    ("ITL mean", "mean_itl_ms", "ms"),
    ("ITL median", "median_itl_ms", "ms"),
    ("ITL P99", "p99_itl_ms", "ms"),
)


def result_table(r: BenchResult) -> str:
    """The figures of one benchmark as a fixed-width table (milliseconds, tokens/s, requests/s)."""
    rows = [(label, getattr(r, field_name), unit) for label, field_name, unit in TABLE_ROWS]
    return "\n".join(f"{label:<30}{figure(value):>12} {unit}".rstrip() for label, value, unit in rows)


def compare_table(a: dict[str, Any], b: dict[str, Any], a_id: int, b_id: int) -> str:
    """Two stored runs' figures side by side with B's change against A, in percent ("-" where either
    lacks the figure or A is 0)."""
    labels = [label + (f" ({unit})" if unit else "") for label, _, unit in TABLE_ROWS]
    width = max(map(len, labels)) + 2  # the longest label with its unit, then the figures in line
    lines = [f"{'':<{width}}{'run ' + str(a_id):>12}{'run ' + str(b_id):>12}{'change':>9}"]
    for shown, (_, field_name, _) in zip(labels, TABLE_ROWS, strict=True):
        va, vb = a.get(field_name), b.get(field_name)
        change = f"{(vb - va) / va:+.1%}" if va and vb is not None else "-"
        lines.append(f"{shown:<{width}}{figure(va):>12}{figure(vb):>12}{change:>9}")
    return "\n".join(lines)


def _describe(p: BenchParams) -> str:
    tokens = f"input {p.input_len} / output {p.output_len} tokens"
    return f"{p.num_prompts} prompts, {tokens}, concurrency {p.max_concurrency}"


def _run_params(run: BenchRun) -> str:
    p = run.params
    if run.kind == "sweep":
        return f"sweep: concurrency {p.get('concurrency')}, input length {p.get('input_len')}"
    return (
        f"{p.get('num_prompts')} prompts, input {p.get('input_len')} / output {p.get('output_len')} tokens, "
        f"concurrency {p.get('max_concurrency')}"
    )


def _cell_state(point: SweepPoint) -> str:
    if point.skipped:
        return f"skipped: {point.reason}" if point.limit == "max_model_len" else "skipped (KV)"
    if point.result is not None and point.result.output_throughput is not None:
        return f"{figure(point.result.output_throughput)} tok/s"
    return f"failed: {point.reason}"


def bench_running(params: BenchParams) -> Reply:
    """The progress message of a benchmark while it runs."""
    return blocks_reply([section(f":hourglass_flowing_sand: Benchmarking: {_describe(params)} …")])


def bench_result(params: BenchParams, result: BenchResult, run_id: int, output: str) -> Reply:
    """One benchmark's table, a warning when requests failed, its parameters and stored run id, and the
    benchmarker's whole `output` attached."""
    blocks = [header("vllm bench serve"), section(code(result_table(result)))]
    if result.failed_requests:  # vLLM answered them with an error: never counted among the successful
        sent = result.failed_requests + (result.successful_requests or 0)
        blocks.append(
            section(
                f":warning: {result.failed_requests:,} of {sent:,} requests failed; the throughput and "
                f"latencies count only the {result.successful_requests or 0:,} that succeeded "
                "(the benchmarker's output is attached)"
            )
        )
    blocks.append(context(f"{_describe(params)} · stored as run {run_id}"))
    reply = blocks_reply(blocks)
    reply.files.append(Attachment("bench-serve.txt", output, "vllm bench serve output"))
    return reply


def bench_runs(runs: list[BenchRun]) -> Reply:
    """`/vllm bench list`: one line per stored run, newest first (throughput and median latencies for a
    benchmark, the grid for a sweep)."""
    if not runs:
        return blocks_reply([section("No benchmark runs are stored yet. Run one with `/vllm bench`.")])
    lines = []
    for run in runs:
        r = run.results
        figures = (
            ""
            if run.kind == "sweep"
            else f" · {figure(r.get('output_throughput'))} tok/s · TTFT median "
            f"{figure(r.get('median_ttft_ms'))} ms · TPOT median {figure(r.get('median_tpot_ms'))} ms"
        )
        lines.append(f"• *run {run.run_id}* {utc(run.at)} · {_run_params(run)}{figures}")
    return blocks_reply(
        [
            header("Stored benchmark runs"),
            section("\n".join(lines)),
            context("Compare two with `/vllm bench compare A B`."),
        ]
    )


def bench_comparison(first: BenchRun, second: BenchRun) -> Reply:
    """`/vllm bench compare A B`: the two runs side by side, then when and how each ran."""
    return blocks_reply(
        [
            header(f"Benchmark run {first.run_id} vs {second.run_id}"),
            section(code(compare_table(first.results, second.results, first.run_id, second.run_id))),
            context(
                "\n".join(f"run {run.run_id}: {utc(run.at)}, {_run_params(run)}" for run in (first, second))
            ),
        ]
    )


def sweep_progress(points: list[SweepPoint], done: list[SweepPoint], index: int, operation_id: str) -> Reply:
    """A running sweep: one line per cell (its result, running or queued) and a Cancel button."""
    lines = []
    for i, p in enumerate(points):
        label = f"c={p.concurrency:<5} in={p.input_len:<6}"
        if i < len(done):
            state = _cell_state(done[i])
        else:
            state = "running…" if i == index else "queued"
        lines.append(f"{label} {state}")
    return blocks_reply([header("vLLM sweep"), section(code("\n".join(lines))), cancel_button(operation_id)])


def sweep_result(
    done: list[SweepPoint], capacity: int, max_model_len: int | None, heatmap: bytes, csv: str
) -> Reply:
    """The ended sweep: cells run, skipped (beyond `max_model_len`, the context window in tokens, None when
    unknown; or beyond the KV cache of `capacity` tokens) and failed, with the heatmap PNG and the CSV
    attached."""
    ran = sum(1 for p in done if p.result is not None)
    too_long = sum(1 for p in done if p.skipped and p.limit == "max_model_len")
    too_big = sum(1 for p in done if p.skipped) - too_long
    beyond = [f"beyond the KV cache of {capacity:,} tokens"]
    if too_long:  # which input lengths, since no cell of theirs can run at any concurrency
        lens = sorted({p.input_len for p in done if p.limit == "max_model_len"})
        beyond = [
            f"{too_long} beyond max_model_len {max_model_len}: input length {', '.join(map(str, lens))}"
        ]
        if too_big:
            beyond.append(f"{too_big} beyond the KV cache of {capacity:,} tokens")
    reply = blocks_reply(
        [
            header("vLLM sweep"),
            section(
                f"Ran {ran} cells, skipped {too_long + too_big} ({', '.join(beyond)}), "
                f"failed {len(done) - ran - too_long - too_big}. Output token throughput in the heatmap."
            ),
            context("Files: sweep-heatmap.png, sweep.csv"),
        ]
    )
    reply.files.append(Attachment("sweep-heatmap.png", heatmap, "Output token throughput"))
    reply.files.append(Attachment("sweep.csv", csv, "Sweep results"))
    return reply
