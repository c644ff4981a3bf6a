"""`/vllm bench` and `/vllm sweep`: `vllm bench serve` inside the container on the VM, as the reference setup
runs it; results parsed (current and older output formats), shown as a table and stored; a sweep uploads a
heatmap PNG and the CSV to the thread."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from bot.commands.context import Context
from bot.commands.registry import Param, Role, int_range, registry
from bot.shared.serving import explained_when_starting, require_serving
from bot.slack.render import Reply
from bot.views.metrics import (
    bench_comparison,
    bench_result,
    bench_running,
    bench_runs,
    sweep_progress,
    sweep_result,
)
from ops.errors import BadInput, Cancelled, OpsError
from ops.vllm.bench import (
    BenchResult,
    SweepPoint,
    context_refusal,
    heatmap_png,
    largest_lengths,
    parse_bench_serve,
    plan_sweep,
    sweep_csv,
)
from ops.vllm.container import BenchParams
from ops.vllm.metrics import kv_cache_capacity_tokens
from ops.vllm.server import ModelCard


def int_list(low: int, high: int) -> Callable[[str], list[int]]:
    """Comma-separated whole numbers from `low` to `high`, e.g. 1,8,64."""
    single = int_range(low, high)

    def convert(word: str) -> list[int]:
        values = [single(part) for part in word.split(",") if part]
        if not values or len(values) > 8:
            raise ValueError("give 1 to 8 comma-separated values, e.g. 1,8,64")
        return values

    return convert


_SIZE_PARAMS = (
    Param.option("prompts", "requests to send (default 100)", int_range(1, 10000), "N"),
    Param.option("output_len", "output tokens per request (default 128)", int_range(1, 32768), "L"),
)


def _context_window(cards: list[ModelCard], model: str) -> int | None:
    """The `max_model_len` `/v1/models` gives for `model` (the base model's when no card has that id), or
    None when the server does not say."""
    card = next((c for c in cards if c.id == model), None) or next(
        (c for c in cards if c.parent is None), None
    )
    return card.max_model_len if card is not None else None


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
    Param.option("input_len", "prompt tokens per request (default 1024)", int_range(1, 262144), "L"),
    Param.option("concurrency", "requests in flight (default 16)", int_range(1, 4096), "C"),
    role=Role.OPERATOR,
)
def vllm_bench(
    ctx: Context, prompts: int | None, output_len: int | None, input_len: int | None, concurrency: int | None
) -> Reply:
    params = _params(ctx, prompts, input_len or 1024, output_len, concurrency or 16)
    require_serving(ctx)  # never the benchmarker's raw "Cannot connect" while vLLM loads
    client, _ = ctx.services.vllm()
    with client, explained_when_starting(ctx):
        window = _context_window(client.models(), params.model)
    refused = context_refusal(params.input_len, params.output_len, window)
    if (
        refused is not None and window is not None
    ):  # every request would get vLLM's HTTP 400: nothing to measure
        raise BadInput(
            f"{refused} of `{params.model}`: vLLM refuses every such request (HTTP 400), so nothing was run",
            f"the largest lengths that fit: {largest_lengths(params.input_len, params.output_len, window)}",
        )
    if ctx.progress is not None:
        ctx.progress.update(bench_running(params))
    container, host = ctx.services.container()
    with host:
        output = container.bench(params)
    result = parse_bench_serve(output)
    run_id = ctx.services.store.save_bench("bench", asdict(params), _figures(result), now=ctx.services.now())
    return bench_result(params, result, run_id, output)


def _figures(result: BenchResult) -> dict[str, Any]:
    return {k: v for k, v in asdict(result).items() if k != "percentiles_ms"}


@registry.command(
    "vllm bench list",
    "Stored benchmark runs, newest first: id, time, parameters, throughput and median latencies",
    Param.option("last", "how many (default 10)", int_range(1, 100), "N"),
)
def vllm_bench_list(ctx: Context, last: int | None) -> Reply:
    runs = ctx.services.store.bench_runs(last or 10)
    return bench_runs(runs)


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
    return bench_comparison(runs[0], runs[1])


@registry.command(
    "vllm sweep",
    "Benchmark a grid of concurrency x input length; skips cells beyond the KV cache; heatmap and CSV",
    Param.option("concurrency", "comma-separated, e.g. 1,8,64", int_list(1, 4096), "C,C", required=True),
    Param.option(
        "input_len", "comma-separated tokens, e.g. 128,1024,4096", int_list(1, 262144), "L,L", required=True
    ),
    *_SIZE_PARAMS,
    role=Role.OPERATOR,
)
def vllm_sweep(
    ctx: Context, concurrency: list[int], input_len: list[int], prompts: int | None, output_len: int | None
) -> Reply:
    """Plan with the KV-cache capacity read from the metrics (`vllm:cache_config_info`) and the context window
    from `/v1/models` (cells beyond it are skipped), run each cell, report progress in one message (with
    Cancel), and attach the heatmap and CSV."""
    require_serving(ctx)
    client, _ = ctx.services.vllm()
    with client, explained_when_starting(ctx):
        capacity = kv_cache_capacity_tokens(client.metrics())
        window = _context_window(client.models(), ctx.services.settings.vllm_model)
    if capacity is None:  # vLLM answers /health (checked above) but its /metrics lack the cache config
        raise OpsError(
            "the KV-cache capacity is unknown: vLLM answers, but its /metrics have no vllm:cache_config_info",
            "/vllm metrics --raw shows what it exports; /vllm bench runs single cells without the plan",
        )
    points = plan_sweep(concurrency, input_len, output_len or 128, capacity, window)
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
        {
            "concurrency": concurrency,
            "input_len": input_len,
            "kv_capacity_tokens": capacity,
            "max_model_len": window,
        },
        {"csv": sweep_csv(done)},
        now=ctx.services.now(),
    )
    return sweep_result(done, capacity, window, heatmap_png(done), sweep_csv(done))


def _show_progress(ctx: Context, points: list[SweepPoint], done: list[SweepPoint], index: int) -> None:
    if ctx.progress is None:
        return
    ctx.progress.update(sweep_progress(points, done, index, ctx.operation_id))
