"""`/vllm bench` and `/vllm sweep`: `vllm bench serve` inside the container on the VM, as the reference setup
runs it; results parsed (current and older output formats), shown as a table and stored; a sweep uploads a
heatmap PNG and the CSV to the thread."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from bot.commands import Param, Role, int_range, registry
from bot.context import Context
from bot.render import Attachment, Reply, blocks_reply, cancel_button, code, context, header, section, utc
from bot.serving import explained_when_starting, require_serving
from ops.bench import BenchResult, SweepPoint, heatmap_png, parse_bench_serve, plan_sweep, sweep_csv
from ops.container import BenchParams
from ops.errors import BadInput, Cancelled, OpsError
from ops.metrics import kv_cache_capacity_tokens
from ops.store import BenchRun


def int_list(low: int, high: int) -> Callable[[str], list[int]]:
    """Comma-separated whole numbers from `low` to `high`, e.g. 1,8,64."""
    single = int_range(low, high)

    def convert(word: str) -> list[int]:
        values = [single(part) for part in word.split(",") if part]
        if not values or len(values) > 8:
            raise ValueError("give 1 to 8 comma-separated values, e.g. 1,8,64")
        return values

    return convert


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
    lines = [f"{'':<30}{'run ' + str(a_id):>12}{'run ' + str(b_id):>12}{'change':>9}"]
    for label, field_name, unit in TABLE_ROWS:
        va, vb = a.get(field_name), b.get(field_name)
        change = f"{(vb - va) / va:+.1%}" if va and vb is not None else "-"
        lines.append(
            f"{(label + (f' ({unit})' if unit else '')):<30}{figure(va):>12}{figure(vb):>12}{change:>9}"
        )
    return "\n".join(lines)


_SIZE_PARAMS = (
    Param(
        "prompts", "requests to send (default 100)", flag="--prompts", kind=int_range(1, 10000), metavar="N"
    ),
    Param(
        "output_len",
        "output tokens per request (default 128)",
        flag="--output-len",
        kind=int_range(1, 32768),
        metavar="L",
    ),
)


def _params(
    ctx: Context, prompts: int | None, input_len: int, output_len: int | None, concurrency: int
) -> BenchParams:
    s = ctx.services.settings
    return BenchParams(
        model=s.vllm_model,
        num_prompts=prompts or 100,
        input_len=input_len,
        output_len=output_len or 128,
        max_concurrency=concurrency,
        port=s.vllm_port,
    )


@registry.command(
    "vllm bench",
    "Run vllm bench serve in the container; show and store TTFT, TPOT, ITL and throughput",
    *_SIZE_PARAMS,
    Param(
        "input_len",
        "prompt tokens per request (default 1024)",
        flag="--input-len",
        kind=int_range(1, 262144),
        metavar="L",
    ),
    Param(
        "concurrency",
        "requests in flight (default 16)",
        flag="--concurrency",
        kind=int_range(1, 4096),
        metavar="C",
    ),
    role=Role.OPERATOR,
)
def vllm_bench(
    ctx: Context, prompts: int | None, output_len: int | None, input_len: int | None, concurrency: int | None
) -> Reply:
    params = _params(ctx, prompts, input_len or 1024, output_len, concurrency or 16)
    require_serving(ctx)  # never the benchmarker's raw "Cannot connect" while vLLM loads
    if ctx.progress is not None:
        ctx.progress.update(
            blocks_reply([section(f":hourglass_flowing_sand: Benchmarking: {_describe(params)} …")])
        )
    container, host = ctx.services.container()
    with host:
        output = container.bench(params)
    result = parse_bench_serve(output)
    run_id = ctx.services.store.save_bench("bench", asdict(params), _figures(result), now=ctx.services.now())
    reply = blocks_reply(
        [
            header("vllm bench serve"),
            section(code(result_table(result))),
            context(f"{_describe(params)} · stored as run {run_id}"),
        ]
    )
    reply.files.append(Attachment("bench-serve.txt", output, "vllm bench serve output"))
    return reply


def _describe(p: BenchParams) -> str:
    tokens = f"input {p.input_len} / output {p.output_len} tokens"
    return f"{p.num_prompts} prompts, {tokens}, concurrency {p.max_concurrency}"


def _figures(result: BenchResult) -> dict[str, Any]:
    return {k: v for k, v in asdict(result).items() if k != "percentiles_ms"}


def _run_params(run: BenchRun) -> str:
    p = run.params
    if run.kind == "sweep":
        return f"sweep: concurrency {p.get('concurrency')}, input length {p.get('input_len')}"
    return (
        f"{p.get('num_prompts')} prompts, input {p.get('input_len')} / output {p.get('output_len')} tokens, "
        f"concurrency {p.get('max_concurrency')}"
    )


@registry.command(
    "vllm bench list",
    "Stored benchmark runs, newest first: id, time, parameters, throughput and median latencies",
    Param("last", "how many (default 10)", flag="--last", kind=int_range(1, 100), metavar="N"),
)
def vllm_bench_list(ctx: Context, last: int | None) -> Reply:
    runs = ctx.services.store.bench_runs(last or 10)
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


@registry.command(
    "vllm bench compare",
    "Two stored benchmark runs side by side, with the change of B against A",
    Param("a", "run id (see /vllm bench list)", kind=int_range(1, 2**31 - 1), required=True, metavar="A"),
    Param("b", "run id to compare with A", kind=int_range(1, 2**31 - 1), required=True, metavar="B"),
)
def vllm_bench_compare(ctx: Context, a: int, b: int) -> Reply:
    runs = [ctx.services.store.bench_run(a), ctx.services.store.bench_run(b)]
    sweeps = [str(run.run_id) for run in runs if run.kind != "bench"]
    if sweeps:
        raise BadInput(
            f"run {' and '.join(sweeps)} is a sweep", "compare two `/vllm bench` runs; sweeps carry a CSV"
        )
    first, second = runs
    return blocks_reply(
        [
            header(f"Benchmark run {a} vs {b}"),
            section(code(compare_table(first.results, second.results, a, b))),
            context("\n".join(f"run {run.run_id}: {utc(run.at)}, {_run_params(run)}" for run in runs)),
        ]
    )


@registry.command(
    "vllm sweep",
    "Benchmark a grid of concurrency x input length; skips cells beyond the KV cache; heatmap and CSV",
    Param(
        "concurrency",
        "comma-separated, e.g. 1,8,64",
        flag="--concurrency",
        kind=int_list(1, 4096),
        required=True,
        metavar="C,C",
    ),
    Param(
        "input_len",
        "comma-separated tokens, e.g. 128,1024,4096",
        flag="--input-len",
        kind=int_list(1, 262144),
        required=True,
        metavar="L,L",
    ),
    *_SIZE_PARAMS,
    role=Role.OPERATOR,
)
def vllm_sweep(
    ctx: Context, concurrency: list[int], input_len: list[int], prompts: int | None, output_len: int | None
) -> Reply:
    """Plan with the KV-cache capacity read from the metrics (`vllm:cache_config_info`), run each cell,
    report progress in one message (with Cancel), and attach the heatmap and CSV."""
    require_serving(ctx)
    client, _ = ctx.services.vllm()
    with client, explained_when_starting(ctx):
        capacity = kv_cache_capacity_tokens(client.metrics())
    if capacity is None:  # vLLM answers /health (checked above) but its /metrics lack the cache config
        raise OpsError(
            "the KV-cache capacity is unknown: vLLM answers, but its /metrics have no vllm:cache_config_info",
            "/vllm metrics --raw shows what it exports; /vllm bench runs single cells without the plan",
        )
    points = plan_sweep(concurrency, input_len, output_len or 128, capacity)
    done: list[SweepPoint] = []
    container, host = ctx.services.container()
    with host:
        for index, point in enumerate(points):
            if ctx.cancelled.is_set():
                raise Cancelled("sweep cancelled", f"{len(done)} of {len(points)} cells were run")
            _show_progress(ctx, points, done, index)
            if point.skipped:
                done.append(point)
                continue
            params = _params(ctx, prompts, point.input_len, output_len, point.concurrency)
            try:
                result = parse_bench_serve(container.bench(params))
            except OpsError as exc:
                done.append(
                    SweepPoint(point.concurrency, point.input_len, point.output_len, reason=exc.message)
                )
                continue
            done.append(SweepPoint(point.concurrency, point.input_len, point.output_len, result=result))
    ctx.services.store.save_bench(
        "sweep",
        {"concurrency": concurrency, "input_len": input_len, "kv_capacity_tokens": capacity},
        {"csv": sweep_csv(done)},
        now=ctx.services.now(),
    )
    ran = sum(1 for p in done if p.result is not None)
    skipped = sum(1 for p in done if p.skipped)
    reply = blocks_reply(
        [
            header("vLLM sweep"),
            section(
                f"Ran {ran} cells, skipped {skipped} (beyond the KV cache of {capacity:,} tokens), "
                f"failed {len(done) - ran - skipped}. Output token throughput in the heatmap."
            ),
            context("Files: sweep-heatmap.png, sweep.csv"),
        ]
    )
    reply.files.append(Attachment("sweep-heatmap.png", heatmap_png(done), "Output token throughput"))
    reply.files.append(Attachment("sweep.csv", sweep_csv(done), "Sweep results"))
    return reply


def _cell_state(point: SweepPoint) -> str:
    if point.skipped:
        return "skipped (KV)"
    if point.result is not None and point.result.output_throughput is not None:
        return f"{figure(point.result.output_throughput)} tok/s"
    return f"failed: {point.reason}"


def _show_progress(ctx: Context, points: list[SweepPoint], done: list[SweepPoint], index: int) -> None:
    if ctx.progress is None:
        return
    lines = []
    for i, p in enumerate(points):
        label = f"c={p.concurrency:<5} in={p.input_len:<6}"
        if i < len(done):
            state = _cell_state(done[i])
        else:
            state = "running…" if i == index else "queued"
        lines.append(f"{label} {state}")
    ctx.progress.update(
        blocks_reply([header("vLLM sweep"), section(code("\n".join(lines))), cancel_button(ctx.operation_id)])
    )
