"""vLLM's Prometheus metrics for the SIMULATED server, under vLLM's current names and buckets
(vllm/v1/metrics/loggers.py, PrometheusStatLogger); they advance with the requests served."""

from __future__ import annotations

import random
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

# Histogram buckets as in vllm/v1/metrics/loggers.py (PrometheusStatLogger).
TTFT_BUCKETS = [
    0.001,
    0.005,
    0.01,
    0.02,
    0.04,
    0.06,
    0.08,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
    160.0,
    640.0,
    2560.0,
]
ITL_BUCKETS = [
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.15,
    0.2,
    0.3,
    0.4,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    20.0,
    40.0,
    80.0,
]
REQUEST_LATENCY_BUCKETS = [
    0.3,
    0.5,
    0.8,
    1.0,
    1.5,
    2.0,
    2.5,
    5.0,
    10.0,
    15.0,
    20.0,
    30.0,
    40.0,
    50.0,
    60.0,
    120.0,
    240.0,
    480.0,
    960.0,
    1920.0,
    7680.0,
]
FINISH_REASONS = ("stop", "length", "abort", "error")


def build_1_2_5_buckets(max_value: int) -> list[float]:
    """1, 2, 5, 10, 20, 50, ... up to max_value (vLLM's `build_1_2_5_buckets`, vllm/v1/metrics/loggers.py)."""
    buckets: list[float] = []
    exponent = 0
    while True:
        for mantissa in (1, 2, 5):
            value = mantissa * 10**exponent
            if value > max_value:
                return buckets
            buckets.append(float(value))
        exponent += 1


# Preemptions in a fresh simulator's history (`seed`); the generated Cloud Logging of the serving container
# holds as many preemption warnings (sim/gcp/loggen.py), so the two surfaces agree.
SEEDED_PREEMPTIONS = 2


class EngineMetrics:
    """vLLM's Prometheus metrics for one engine ("0"), in a registry of their own."""

    def __init__(self, cfg: dict[str, Any]) -> None:
        self.registry = CollectorRegistry()
        reg = self.registry
        names = ["model_name", "engine"]
        labels = (str(cfg["model"]), "0")
        token_buckets = build_1_2_5_buckets(int(cfg["max_model_len"]))

        def gauge(name: str, doc: str) -> Any:
            return Gauge(name, doc, names, registry=reg).labels(*labels)

        def counter(name: str, doc: str) -> Any:
            return Counter(name, doc, names, registry=reg).labels(*labels)

        def histogram(name: str, doc: str, buckets: list[float]) -> Any:
            return Histogram(name, doc, names, buckets=buckets, registry=reg).labels(*labels)

        self.running = gauge("vllm:num_requests_running", "Number of requests in model execution batches.")
        self.waiting = gauge("vllm:num_requests_waiting", "Number of requests waiting to be processed.")
        self.kv_usage = gauge("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.")
        self.prefix_queries = counter(
            "vllm:prefix_cache_queries", "Prefix cache queries, in terms of number of queried tokens."
        )
        self.prefix_hits = counter(
            "vllm:prefix_cache_hits", "Prefix cache hits, in terms of number of cached tokens."
        )
        self.preemptions = counter("vllm:num_preemptions", "Cumulative number of preemption from the engine.")
        self.prompt_tokens = counter("vllm:prompt_tokens", "Number of prefill tokens processed.")
        self.generation_tokens = counter("vllm:generation_tokens", "Number of generation tokens processed.")
        success = Counter(
            "vllm:request_success",
            "Count of successfully processed requests.",
            [*names, "finished_reason"],
            registry=reg,
        )
        self.success = {reason: success.labels(*labels, reason) for reason in FINISH_REASONS}
        self.req_prompt_tokens = histogram(
            "vllm:request_prompt_tokens", "Number of prefill tokens processed.", token_buckets
        )
        self.req_generation_tokens = histogram(
            "vllm:request_generation_tokens", "Number of generation tokens processed.", token_buckets
        )
        self.ttft = histogram(
            "vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", TTFT_BUCKETS
        )
        self.itl = histogram(
            "vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", ITL_BUCKETS
        )
        self.tpot = histogram(
            "vllm:request_time_per_output_token_seconds",
            "Histogram of time_per_output_token_seconds per request.",
            ITL_BUCKETS,
        )
        self.e2e = histogram(
            "vllm:e2e_request_latency_seconds",
            "Histogram of e2e request latency in seconds.",
            REQUEST_LATENCY_BUCKETS,
        )
        self.queue = histogram(
            "vllm:request_queue_time_seconds",
            "Histogram of time spent in WAITING phase for request.",
            REQUEST_LATENCY_BUCKETS,
        )
        block_size, blocks = int(cfg["block_size"]), int(cfg["num_gpu_blocks"])
        info = {
            "block_size": str(block_size),
            "cache_dtype": "auto",
            "enable_prefix_caching": "True",
            "engine": "0",
            "gpu_memory_utilization": "0.9",
            "kv_cache_size_tokens": str(block_size * blocks),
            "num_cpu_blocks": "0",
            "num_gpu_blocks": str(blocks),
        }
        Gauge(
            "vllm:cache_config_info", "Information of the LLMEngine CacheConfig", list(info), registry=reg
        ).labels(**info).set(1)

    def seed(self, requests: int, hit_rate: float) -> None:
        """Record `requests` plausible past requests (deterministic), so a fresh simulator has history."""
        self.serve_background(requests, hit_rate, random.Random(20260402))  # simulated numbers, not security
        self.preemptions.inc(SEEDED_PREEMPTIONS)

    def serve_background(self, requests: int, hit_rate: float, rng: random.Random) -> None:
        """Record `requests` plausible finished requests drawn from `rng` (prompts of 200-1500 tokens, 20-300
        generated, TTFT around 0.15 s), `hit_rate` of their prompt tokens found in the prefix cache: the
        traffic of other clients, which the logs of a serving container show."""
        queries = 0
        for i in range(requests):
            prompt = rng.randint(200, 1500)
            generated = rng.randint(20, 300)
            ttft = rng.lognormvariate(-1.9, 0.5)  # median about 0.15 s
            itl = rng.uniform(0.02, 0.045)
            reason = "length" if i % 13 == 0 else "abort" if i % 97 == 0 else "stop"
            queue_s = rng.uniform(0, 0.05)
            self.observe(prompt, generated, ttft, [itl] * (generated - 1), reason, queue_s=queue_s)
            queries += prompt
        self.prefix_queries.inc(queries)
        self.prefix_hits.inc(round(queries * hit_rate))

    def observe(
        self,
        prompt: int,
        generated: int,
        ttft: float,
        itls: list[float],
        reason: str,
        *,
        queue_s: float = 0.0,
    ) -> None:
        """Record one finished request like PrometheusStatLogger.record does."""
        self.prompt_tokens.inc(prompt)
        self.generation_tokens.inc(generated)
        self.success[reason].inc()
        self.req_prompt_tokens.observe(prompt)
        self.req_generation_tokens.observe(generated)
        if generated > 0:
            self.ttft.observe(ttft)
        for gap in itls:
            self.itl.observe(gap)
        if generated > 1:
            self.tpot.observe(sum(itls) / len(itls) if itls else 0.0)
        self.e2e.observe(queue_s + ttft + sum(itls))
        self.queue.observe(queue_s)

    def set_load(self, running: int, blocks: int, total_blocks: int) -> None:
        """The gauges of the requests running now: `running` requests holding `blocks` KV-cache blocks of
        `total_blocks` (vLLM's usage counts the blocks running requests hold; cached blocks no request holds
        are free to evict, so an idle server shows 0)."""
        self.running.set(running)
        self.kv_usage.set(min(1.0, blocks / total_blocks) if total_blocks else 0.0)
