"""ops.vllm.bench: parse `vllm bench serve` output (real fixture, older format, noise), sweeps, CSV, PNG."""

from __future__ import annotations

import csv
import io
from dataclasses import replace
from pathlib import Path

import matplotlib.image
import pytest

from ops.errors import BadInput, OpsError
from ops.vllm.bench import (
    BenchResult,
    context_refusal,
    heatmap_png,
    largest_lengths,
    parse_bench_serve,
    plan_sweep,
    run_sweep,
    sweep_csv,
)
from sim.host.bench import bench_output

CASES = Path(__file__).resolve().parents[1] / "fixtures" / "cases"
REAL = (CASES / "vllm-bench-serve.txt").read_text()


def test_real_fixture_parses_to_exactly_its_figures() -> None:
    r = parse_bench_serve(REAL)
    assert r.successful_requests == 320
    assert r.failed_requests == 0
    assert r.duration_s == 189.72
    assert r.total_input_tokens == 327680
    assert r.total_generated_tokens == 327680
    assert r.request_throughput == 1.69
    assert r.output_throughput == 1727.14
    assert r.peak_output_throughput == 3432.00
    assert r.peak_concurrent_requests == 320.00
    assert r.total_token_throughput == 3454.28
    assert (r.mean_ttft_ms, r.median_ttft_ms, r.p99_ttft_ms) == (50174.86, 53658.99, 106359.44)
    assert (r.mean_tpot_ms, r.median_tpot_ms, r.p99_tpot_ms) == (53.80, 47.61, 83.25)
    assert (r.mean_itl_ms, r.median_itl_ms, r.p99_itl_ms) == (53.80, 42.96, 183.69)
    assert r.percentiles_ms == {"ttft": {99.0: 106359.44}, "tpot": {99.0: 83.25}, "itl": {99.0: 183.69}}
    # not printed by this run
    assert r.max_concurrency is None and r.request_rate_configured is None and r.request_goodput is None
    assert (r.mean_e2el_ms, r.median_e2el_ms, r.p99_e2el_ms) == (None, None, None)
    assert isinstance(r.successful_requests, int) and isinstance(r.total_input_tokens, int)


OLD = """\
Traffic request rate: inf
Maximum request concurrency: 32
100%|██████████| 200/200 [01:03<00:00,  3.15it/s]
============ Serving Benchmark Result ============
Successful requests:                     200
Benchmark duration (s):                  63.42
Total input tokens:                      204800
Total generated tokens:                  25600
Request throughput (req/s):              3.15
Output token throughput (tok/s):         403.66
Total Token throughput (tok/s):          3632.93
---------------Time to First Token----------------
Mean TTFT (ms):                          812.11
Median TTFT (ms):                        790.02
P50 TTFT (ms):                           790.02
P90 TTFT (ms):                           1200.50
P99 TTFT (ms):                           1650.75
-----Time per Output Token (excl. 1st token)------
Mean TPOT (ms):                          71.20
Median TPOT (ms):                        70.90
P99 TPOT (ms):                           80.01
---------------Inter-token Latency----------------
Mean ITL (ms):                           71.20
Median ITL (ms):                         65.00
P99 ITL (ms):                            190.30
----------------End-to-end Latency----------------
Mean E2EL (ms):                          9855.00
Median E2EL (ms):                        9800.10
P99 E2EL (ms):                           11500.99
==================================================
INFO 07-03 03:19:15 [launcher.py:80] Shutting down FastAPI HTTP server.
"""


def test_older_format_capital_t_no_failed_or_peak_lines_and_extra_percentiles() -> None:
    r = parse_bench_serve(OLD)
    assert r.successful_requests == 200
    assert (
        r.failed_requests is None and r.peak_output_throughput is None and r.peak_concurrent_requests is None
    )
    assert r.total_token_throughput == 3632.93  # "Total Token throughput"
    assert r.max_concurrency == 32  # printed before the block
    assert r.percentiles_ms["ttft"] == {50.0: 790.02, 90.0: 1200.50, 99.0: 1650.75}
    assert r.p99_ttft_ms == 1650.75
    assert (r.mean_e2el_ms, r.median_e2el_ms, r.p99_e2el_ms) == (9855.00, 9800.10, 11500.99)


def test_noise_and_prefixes_around_the_block() -> None:
    prefixed = "\n".join(f"2026-04-28T14:17:50.089230833+08:00 {line}" for line in REAL.splitlines())
    noisy = "WARNING something\n" + prefixed + "\nINFO after the run\nSuccessful requests: 999\n"
    assert parse_bench_serve(noisy) == parse_bench_serve(REAL)


def test_last_block_wins_and_max_concurrency_in_block() -> None:
    text = REAL + "\n" + bench_output(num_prompts=10, input_len=100, output_len=10, max_concurrency=4)
    r = parse_bench_serve(text)
    assert r.successful_requests == 10 and r.max_concurrency == 4 and r.total_input_tokens == 1000


def test_no_block_is_an_ops_error() -> None:
    with pytest.raises(OpsError, match="no 'Serving Benchmark Result' block"):
        parse_bench_serve("Traceback...\nValueError: Initial test run failed")
    with pytest.raises(OpsError, match="no figures"):
        parse_bench_serve("============ Serving Benchmark Result ============\n" + "=" * 50 + "\n")


def test_simulated_output_round_trips() -> None:
    text = bench_output(num_prompts=100, input_len=1024, output_len=128, max_concurrency=16)
    r = parse_bench_serve(text)
    assert r.successful_requests == 100 and r.failed_requests == 0 and r.max_concurrency == 16
    assert r.total_input_tokens == 102400 and r.total_generated_tokens == 12800
    assert r.duration_s is not None and r.output_throughput == pytest.approx(12800 / r.duration_s, rel=0.01)


def test_plan_sweep_skips_cells_beyond_the_kv_cache() -> None:
    points = plan_sweep([64, 1, 16, 16], [4096, 1024], output_len=1024, kv_capacity_tokens=100_000)
    assert [(p.input_len, p.concurrency) for p in points] == [
        (1024, 1), (1024, 16), (1024, 64), (4096, 1), (4096, 16), (4096, 64),
    ]  # fmt: skip
    skipped = {(p.input_len, p.concurrency): p.reason for p in points if p.skipped}
    assert set(skipped) == {(1024, 64), (4096, 64)}  # 64*2048=131072, 64*5120=327680 > 100000
    assert skipped[(1024, 64)] == "needs 131072 KV tokens (64 x (1024 + 1024)) > capacity 100000"
    assert next(p for p in points if (p.input_len, p.concurrency) == (4096, 16)).kv_tokens == 81920
    with pytest.raises(BadInput):
        plan_sweep([0], [128], 128, 1000)


def _ran() -> list:
    points = plan_sweep([1, 8, 64], [128, 2048], output_len=128, kv_capacity_tokens=65536)

    def run(p):
        if p.concurrency == 8 and p.input_len == 2048:
            return "Traceback: boom"
        return bench_output(
            num_prompts=32, input_len=p.input_len, output_len=p.output_len, max_concurrency=p.concurrency
        )

    return run_sweep(points, run)


def test_run_sweep_and_csv() -> None:
    points = _ran()
    rows = list(csv.DictReader(io.StringIO(sweep_csv(points))))
    assert len(rows) == 6
    by = {(int(r["input_len"]), int(r["concurrency"])): r for r in rows}
    assert by[(2048, 64)]["status"] == "skipped" and "capacity 65536" in by[(2048, 64)]["reason"]
    assert by[(2048, 8)]["status"] == "failed" and by[(2048, 8)]["output_throughput"] == ""
    assert by[(128, 8)]["status"] == "ok"
    ok = next(p for p in points if (p.input_len, p.concurrency) == (128, 8))
    assert ok.result is not None
    assert float(by[(128, 8)]["output_throughput"]) == ok.result.output_throughput
    assert int(by[(128, 8)]["successful_requests"]) == 32
    assert "mean_ttft_ms" in rows[0] and "percentiles_ms" not in rows[0]


def test_heatmap_png() -> None:
    png = heatmap_png(_ran())
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    image = matplotlib.image.imread(io.BytesIO(png), format="png")
    assert image.shape[0] > 100 and image.shape[1] > 100
    assert heatmap_png(_ran(), metric="p99_ttft_ms").startswith(b"\x89PNG")
    with pytest.raises(BadInput):
        heatmap_png(_ran(), metric="nope")
    with pytest.raises(BadInput):
        heatmap_png([])


def test_heatmap_axis_labels_have_units(monkeypatch: pytest.MonkeyPatch) -> None:
    import matplotlib.figure

    labels: list[str] = []
    original = matplotlib.figure.Figure.savefig

    def spy(self, *args, **kwargs):
        for ax in self.axes:
            labels.extend([ax.get_xlabel(), ax.get_ylabel(), ax.get_title()])
        return original(self, *args, **kwargs)

    monkeypatch.setattr(matplotlib.figure.Figure, "savefig", spy)
    heatmap_png([replace(p, result=BenchResult(output_throughput=1.0)) for p in plan_sweep([1], [1], 1, 10)])
    assert "max concurrency (requests)" in labels
    assert "input length (tokens)" in labels
    assert any("(tok/s)" in label for label in labels)
    assert any(label == "output token throughput (tok/s)" for label in labels)  # the colour bar


@pytest.mark.parametrize("concurrency", [[1], [1, 8], [1, 8, 64, 256]])
def test_heatmap_title_fits_the_figure(concurrency: list[int]) -> None:
    import matplotlib.pyplot as plt

    from ops.vllm.bench import _heatmap_figure

    points = run_sweep(plan_sweep(concurrency, [128, 1024], 128, 10**7), lambda point: REAL)
    fig = _heatmap_figure(points, "output_throughput")
    try:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        title = fig.axes[0].title.get_window_extent(renderer)
        box = fig.bbox
        assert box.x0 <= title.x0 and title.x1 <= box.x1 and title.y1 <= box.y1
        labels = [t.get_text() for t in fig.axes[0].texts]
        assert all(label.count(".") == 1 for label in labels), labels
    finally:
        plt.close(fig)


def test_plan_sweep_skips_cells_beyond_max_model_len_before_the_kv_cache() -> None:
    points = plan_sweep([1, 64], [128, 16256, 20000], 128, kv_capacity_tokens=100_000, max_model_len=16384)
    by = {(p.input_len, p.concurrency): p for p in points}
    assert not by[(16256, 1)].skipped  # 16256 + 128 = 16384 fills the window exactly
    assert by[(20000, 1)].limit == by[(20000, 64)].limit == "max_model_len"
    assert by[(20000, 1)].reason == "beyond max_model_len 16384 (20000 + 128 = 20128 tokens)"
    assert by[(16256, 64)].limit == "KV cache"
    assert all(not p.skipped for p in plan_sweep([64], [20000], 128, 10**7))  # window unknown: not refused


def test_context_refusal_and_the_largest_lengths() -> None:
    assert context_refusal(16000, 384, 16384) is None and context_refusal(20000, 128, None) is None
    assert context_refusal(16000, 1000, 16384) == (
        "input 16000 + output 1000 = 17000 tokens is beyond max_model_len 16384"
    )
    assert largest_lengths(16000, 1000, 16384) == (
        "`--input-len 15384` with `--output-len 1000`, or `--output-len 384` with `--input-len 16000`"
    )
    assert largest_lengths(20000, 20000, 16384) == "`--input-len 8192` with `--output-len 8192`"


def test_failed_requests_are_said_apart_from_the_successful() -> None:
    from bot.views.metrics import bench_result
    from ops.vllm.container import BenchParams

    result = BenchResult(successful_requests=97, failed_requests=3, output_throughput=10.0)
    text = str(bench_result(BenchParams(num_prompts=100), result, 1, "output").blocks)
    assert "3 of 100 requests failed" in text and "only the 97 that succeeded" in text
    clean = str(
        bench_result(BenchParams(), BenchResult(successful_requests=5, failed_requests=0), 2, "").blocks
    )
    assert "failed;" not in clean
