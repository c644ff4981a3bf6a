"""`vllm bench serve` on the SIMULATED TPU VM (`sim.host`): its summary in the real format, with figures from
a toy model of the parameters (nothing is measured)."""

from __future__ import annotations

import math
from datetime import UTC, datetime
from typing import Any

from sim.host.container import Container, log_stamp
from sim.host.shell import NotAllowed


def bench_serve(
    c: Container, args: list[str], config: dict[str, Any], *, reachable: bool
) -> tuple[int, str, str]:
    """`vllm bench serve ARGS` run in container `c`: (exit status, stdout, stderr), SIMULATED.

    Args:
        c: the container (its model, port and max_model_len; an engine-stats line, or the refused request's
            access line, is appended to its log).
        args: the options after `vllm bench serve` (`--name value` pairs).
        config: the host scenario mapping (`kv_capacity_tokens`, `bench` speeds).
        reachable: whether the container's vLLM answers (else the benchmark's connect error).

    Raises:
        NotAllowed: an option without a value.
    """
    opts: dict[str, str] = {}
    for i in range(0, len(args), 2):
        if not args[i].startswith("--") or i + 1 >= len(args):
            raise NotAllowed(f"vllm bench serve {args[i]}")
        opts[args[i]] = args[i + 1]
    try:
        n = int(opts.get("--num-prompts", "1000"))
        input_len = int(opts.get("--random-input-len", "1024"))
        output_len = int(opts.get("--random-output-len", "128"))
        concurrency = int(opts.get("--max-concurrency", str(n)))
    except ValueError:
        return 2, "", "vllm bench serve: error: argument: invalid int value\n"
    model = opts.get("--model", c.model)
    if not reachable:
        return (
            1,
            "",
            (
                "ValueError: Initial test run failed - Please make sure benchmark arguments are "
                f"correctly specified. Error: Cannot connect to host 127.0.0.1:{c.port} ssl:default "
                "[Connect call failed]\n"
            ),
        )
    if model != c.model:
        return (
            1,
            "",
            (
                "ValueError: Initial test run failed - Please make sure benchmark arguments are "
                f"correctly specified. Error: Not Found: The model `{model}` does not exist.\n"
            ),
        )
    if input_len + output_len > c.max_model_len:
        # vLLM refuses the initial test request with HTTP 400 (prompt + max_tokens beyond max_model_len), and
        # the benchmarker keeps only the reason phrase of a non-200 answer (vllm/benchmarks/lib/
        # endpoint_request_func.py: `output.error = response.reason`), then stops before the main run.
        now = datetime.now(UTC)
        access = (
            '(APIServer pid=1) INFO:     127.0.0.1:41234 - "POST /v1/completions HTTP/1.1" 400 Bad Request'
        )
        c.write([(now, access)])
        return (
            1,
            "Starting initial single prompt test run...\n",
            (
                "ValueError: Initial test run failed - Please make sure benchmark arguments are "
                "correctly specified. Error: Bad Request\n"
            ),
        )
    text = bench_output(
        num_prompts=n,
        input_len=input_len,
        output_len=output_len,
        max_concurrency=concurrency,
        kv_capacity_tokens=int(config["kv_capacity_tokens"]),
        **{k: float(v) for k, v in (config["bench"] or {}).items()},
    )
    now = datetime.now(UTC)
    running = min(concurrency, n)
    usage = min(100.0, 100 * running * (input_len + output_len) / int(config["kv_capacity_tokens"]))
    stats = (
        f"(APIServer pid=1) INFO {log_stamp(now)} [loggers.py:127] Engine 000: Avg prompt throughput: "
        f"{running * input_len / 5:.1f} tokens/s, Avg generation throughput: "
        f"{running * 40:.1f} tokens/s, Running: {running} reqs, Waiting: {max(0, n - running)} reqs, "
        f"GPU KV cache usage: {usage:.1f}%, "
        "Prefix cache hit rate: 0.0%"
    )
    c.write([(now, stats)])
    progress = f"100%|██████████| {n}/{n} [00:42<00:00,  {n / 42:.2f}it/s]\n"
    return 0, text, progress


def bench_output(
    *,
    num_prompts: int,
    input_len: int,
    output_len: int,
    max_concurrency: int,
    kv_capacity_tokens: int = 262144,
    prefill_tok_per_s: float = 40000.0,
    decode_step_ms: float = 18.0,
    decode_ms_per_seq: float = 0.12,
) -> str:
    """SIMULATED `vllm bench serve` console output, in the real format (vllm/benchmarks/serve.py, see
    tests/fixtures/cases/vllm-bench-serve.txt), with figures derived from the parameters by a toy model:
    effective concurrency c = min(max_concurrency, num_prompts, kv_capacity // (input+output));
    TPOT = decode_step_ms + decode_ms_per_seq * c; TTFT = input/prefill rate scaled by contention;
    requests run in ceil(num_prompts / c) waves.
    """
    n, c = (
        num_prompts,
        max(1, min(max_concurrency, num_prompts, kv_capacity_tokens // (input_len + output_len))),
    )
    tpot = decode_step_ms + decode_ms_per_seq * c
    ttft = 1000.0 * input_len / prefill_tok_per_s * (1 + 0.5 * (c - 1))
    e2e = ttft + max(0, output_len - 1) * tpot
    duration = math.ceil(n / c) * e2e / 1000.0
    total_in, total_out = n * input_len, n * output_len

    def row(label: str, value: float | int, fmt: str = "") -> str:
        return "{:<40} {:<10{}}".format(label, value, fmt).rstrip() + "\n"

    head = (
        "Starting initial single prompt test run...\n"
        "Initial test run completed. Starting main benchmark run...\n"
        "Traffic request rate: inf\n"
        "Burstiness factor: 1.0 (Poisson process)\n"
        f"Maximum request concurrency: {max_concurrency}\n"
    )
    body = "{s:{c}^{n}}\n".format(s=" Serving Benchmark Result ", n=50, c="=")
    body += row("Successful requests:", n)
    body += row("Failed requests:", 0)
    body += row("Maximum request concurrency:", max_concurrency)
    body += row("Benchmark duration (s):", duration, ".2f")
    body += row("Total input tokens:", total_in)
    body += row("Total generated tokens:", total_out)
    body += row("Request throughput (req/s):", n / duration, ".2f")
    body += row("Output token throughput (tok/s):", total_out / duration, ".2f")
    body += row("Peak output token throughput (tok/s):", c * 1000.0 / tpot, ".2f")
    body += row("Peak concurrent requests:", float(c), ".2f")
    body += row("Total token throughput (tok/s):", (total_in + total_out) / duration, ".2f")
    for header, name, mean, median, p99 in (
        ("Time to First Token", "TTFT", ttft * 1.05, ttft, ttft * 1.9),
        ("Time per Output Token (excl. 1st token)", "TPOT", tpot, tpot * 0.97, tpot * 1.4),
        ("Inter-token Latency", "ITL", tpot, tpot * 0.9, tpot * 3.4),
    ):
        body += "{s:{c}^{n}}\n".format(s=header, n=50, c="-")
        body += row(f"Mean {name} (ms):", mean, ".2f")
        body += row(f"Median {name} (ms):", median, ".2f")
        body += row(f"P99 {name} (ms):", p99, ".2f")
    body += "=" * 50 + "\n"
    return head + body
