"""`/vllm bench` and `/vllm sweep` against the served model's context window (max_model_len 16384 in
`/v1/models` of the demo's vLLM): what vLLM would refuse with HTTP 400 is not run, a sweep skips such cells,
and nothing refused is stored as a run."""

from __future__ import annotations

from tests.handlers.conftest import Handlers


def test_bench_beyond_max_model_len_is_refused_with_the_largest_lengths(handlers: Handlers) -> None:
    before = handlers.run("vllm bench list")
    text = handlers.run("vllm bench --input-len 20000 --prompts 5")
    assert "input 20000 + output 128 = 20128 tokens is beyond max_model_len 16384" in text
    assert "`--input-len 16256` with `--output-len 128`" in text
    assert "Successful requests" not in text
    text = handlers.run("vllm bench --input-len 16000 --output-len 1000")
    assert "input 16000 + output 1000 = 17000 tokens is beyond max_model_len 16384" in text
    assert (
        "`--input-len 15384` with `--output-len 1000`, or `--output-len 384` with `--input-len 16000`" in text
    )
    assert handlers.run("vllm bench list") == before  # nothing was run, nothing stored


def test_bench_that_fills_max_model_len_exactly_runs(handlers: Handlers) -> None:
    text = handlers.run("vllm bench --input-len 16000 --output-len 384 --prompts 4 --concurrency 2")
    assert "Successful requests" in text and "beyond max_model_len" not in text


def test_sweep_skips_cells_beyond_max_model_len(handlers: Handlers) -> None:
    text = handlers.run("vllm sweep --concurrency 1,8 --input-len 128,20000")
    assert "Ran 2 cells, skipped 2 (2 beyond max_model_len 16384: input length 20000), failed 0" in text
    csv = next(m.content for m in reversed(handlers.world.slack.messages) if m.filename == "sweep.csv")
    rows = [line.split(",") for line in csv.decode().splitlines()[1:]]
    assert {(r[1], r[4]) for r in rows} == {("128", "ok"), ("20000", "skipped")}
    assert "beyond max_model_len 16384 (20000 + 128 = 20128 tokens)" in csv.decode()
