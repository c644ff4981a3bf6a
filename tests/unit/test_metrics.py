"""ops.vllm.metrics on real vLLM scrapes (tests/fixtures/cases/vllm-metrics-real.txt) and hand-made
histograms."""

from __future__ import annotations

import math
import re
from pathlib import Path

import pytest

from ops.vllm.metrics import (
    LOAD_FAMILIES,
    MetricsSummary,
    Quantiles,
    histogram_quantile,
    kv_cache_capacity_tokens,
    samples_by_name,
    summarize,
)

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "cases" / "vllm-metrics-real.txt"


def source(name: str) -> str:
    """The text of one `# ---- source NAME ----` section, alone."""
    parts = re.split(r"^# ---- source (\S+) ----$", REAL.read_text(), flags=re.MULTILINE)
    sections = dict(zip(parts[1::2], parts[2::2], strict=True))
    return sections[name]


def test_fixture_has_the_four_sources() -> None:
    for name in ("A", "B", "C", "4"):
        assert "vllm:" in source(name)


def test_source_a_current_names() -> None:
    s = summarize(source("A"))
    assert s.models == ("llama-vllm-single",)
    assert s.engines == ("0",)
    assert s.running == 0.0
    assert s.waiting == 0.0
    assert s.kv_cache_usage == 0.0
    assert s.prefix_cache_queries == 0.0
    assert s.prefix_cache_hits == 0.0
    assert s.prefix_cache_hit_rate is None  # no queries yet
    assert s.preemptions == 0.0
    assert s.prompt_tokens == 0.0
    assert s.generation_tokens == 0.0
    # the `_created` gauges (~1.78e9) must never leak into a value
    assert all(v is None or v < 1e6 for v in (s.prompt_tokens, s.generation_tokens, s.preemptions))
    # `# HELP vllm:request_success_total` with no samples: nothing finished, no crash
    assert s.requests_finished == {}
    assert s.ttft is None and s.itl is None and s.tpot is None and s.e2e is None
    assert s.cache_config == {}
    assert kv_cache_capacity_tokens(s) is None
    assert s.deprecated_names == ()


def test_source_b_deprecated_gpu_names_beside_new() -> None:
    s = summarize(source("B"))
    assert s.models == ("zai-org/GLM-4.5",)
    assert s.engines == ("0",)
    assert s.kv_cache_usage == 9.75010481363281e-06
    # current vllm:prefix_cache_queries_total wins (gpu_prefix_cache_queries only has a _created sample)
    assert s.prefix_cache_queries == 32.0
    # only the deprecated hits counter is in this scrape, so it is read and reported as deprecated
    assert s.prefix_cache_hits == 0.0
    assert s.prefix_cache_hit_rate == 0.0
    assert s.deprecated_names == ("vllm:gpu_prefix_cache_hits",)
    assert s.running is None and s.waiting is None and s.prompt_tokens is None


def test_source_c_two_engines_and_deprecated_tpot() -> None:
    s = summarize(source("C"))
    assert s.models == ("/home/jovyan/qwen3-8b",)
    assert s.engines == ("0", "1")
    # time_per_output_token_seconds (engine 1): every bucket from le=7.5 up holds all 243 observations.
    # p50: rank 121.5 falls in the first listed bucket (0, 7.5]: 7.5 * 121.5/243 = 3.75; p95: 7.5 * 0.95.
    expected = Quantiles(p50=3.75, p95=7.125, mean=None, count=243)  # no _sum in the excerpt
    assert s.tpot == expected
    # inter_token_latency_seconds is truncated here (two buckets, no +Inf, no _count): unusable, so the
    # deprecated histogram, which recorded the same per-token intervals in vLLM 0.10, is used.
    assert s.itl == expected
    assert s.deprecated_names == ("vllm:time_per_output_token_seconds",)
    assert s.kv_cache_usage is None and s.prefix_cache_hit_rate is None


def test_source_4_no_type_lines_and_cache_config() -> None:
    s = summarize(source("4"))
    assert s.models == ("Lorbus/Qwen3.6-27B-int4-AutoRound",)
    assert s.engines == ("0",)
    assert s.prefix_cache_queries == 10_931_263_819.0
    assert s.prefix_cache_hits == 630_469_280.0
    # 630469280 / 10931263819 = 0.0576758 (by hand: 6.3046928e8 / 1.0931263819e10)
    assert s.prefix_cache_hit_rate == pytest.approx(0.0576758, abs=1e-7)
    assert s.kv_cache_usage == 0.0
    assert s.cache_config == {
        "block_size": "1568",
        "cache_dtype": "fp8",
        "enable_prefix_caching": "True",
        "kv_cache_size_tokens": "66901",
        "num_gpu_blocks": "49",
    }
    # kv_cache_size_tokens wins over 49 * 1568 = 76832
    assert kv_cache_capacity_tokens(s) == 66901
    assert s.deprecated_names == ()


def test_histogram_quantile_interpolates_like_prometheus() -> None:
    # cumulative: 2 obs <= 1 s, 6 <= 2 s, 8 <= 4 s, 10 in all
    buckets = [(1.0, 2.0), (2.0, 6.0), (4.0, 8.0), (math.inf, 10.0)]
    # q=0.5: rank 5 -> bucket (1, 2] holds obs 3..6 -> 1 + (2 - 1) * (5 - 2) / 4 = 1.75
    assert histogram_quantile(0.5, buckets) == 1.75
    # q=0.1: rank 1 -> first bucket, lower bound 0 -> 0 + 1 * 1/2 = 0.5
    assert histogram_quantile(0.1, buckets) == 0.5
    # q=0.8: rank 8 -> bucket (2, 4] (cumulative 8) -> 2 + 2 * (8 - 6) / 2 = 4.0
    assert histogram_quantile(0.8, buckets) == 4.0
    # q=0.95: rank 9.5 -> +Inf bucket -> upper bound of the highest finite bucket
    assert histogram_quantile(0.95, buckets) == 4.0
    # order of input does not matter
    assert histogram_quantile(0.5, list(reversed(buckets))) == 1.75
    # undefined cases (NaN in Prometheus)
    assert histogram_quantile(0.5, [(1.0, 2.0), (2.0, 6.0)]) is None  # no +Inf bucket
    assert histogram_quantile(0.5, [(1.0, 0.0), (math.inf, 0.0)]) is None  # no observations
    assert histogram_quantile(0.5, [(math.inf, 3.0)]) is None  # fewer than two buckets
    # non-monotonic counts are raised first: (1, 5), (2, 3 -> 5), (inf, 10); rank 5 is in the first bucket
    assert histogram_quantile(0.5, [(1.0, 5.0), (2.0, 3.0), (math.inf, 10.0)]) == 1.0
    with pytest.raises(ValueError):
        histogram_quantile(1.5, buckets)


HAND_MADE = """\
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.1",model_name="m"} 1.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.5",model_name="m"} 3.0
vllm:time_to_first_token_seconds_bucket{engine="0",le="+Inf",model_name="m"} 4.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 4.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 1.0
vllm:time_to_first_token_seconds_created{engine="0",model_name="m"} 1.7e9
vllm:time_to_first_token_seconds_bucket{engine="1",le="0.1",model_name="m"} 1.0
vllm:time_to_first_token_seconds_bucket{engine="1",le="0.5",model_name="m"} 1.0
vllm:time_to_first_token_seconds_bucket{engine="1",le="+Inf",model_name="m"} 2.0
vllm:time_to_first_token_seconds_count{engine="1",model_name="m"} 2.0
vllm:time_to_first_token_seconds_sum{engine="1",model_name="m"} 2.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="0.3",model_name="m"} 0.0
vllm:e2e_request_latency_seconds_bucket{engine="0",le="+Inf",model_name="m"} 0.0
vllm:e2e_request_latency_seconds_count{engine="0",model_name="m"} 0.0
vllm:e2e_request_latency_seconds_sum{engine="0",model_name="m"} 0.0
vllm:num_requests_running{engine="0",model_name="m"} 2.0
vllm:num_requests_running{engine="1",model_name="m"} 3.0
vllm:gpu_cache_usage_perc{engine="0",model_name="m"} 0.25
vllm:gpu_cache_usage_perc{engine="1",model_name="m"} 0.75
vllm:request_success_total{engine="0",finished_reason="stop",model_name="m"} 5.0
vllm:request_success_total{engine="1",finished_reason="stop",model_name="m"} 2.0
vllm:request_success_total{engine="1",finished_reason="length",model_name="m"} 1.0
vllm:request_success_created{engine="1",finished_reason="length",model_name="m"} 1.7e9
vllm:cache_config_info{block_size="16",engine="1",num_gpu_blocks="100"} 1.0
vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="200"} 1.0
"""


def test_histograms_merge_across_engines() -> None:
    s = summarize(HAND_MADE)
    # merged cumulative: 0.1 -> 2, 0.5 -> 4, +Inf -> 6. p50: rank 3 in (0.1, 0.5]: 0.1 + 0.4 * 1/2 = 0.3.
    # p95: rank 5.7 in +Inf -> 0.5. mean: (1 + 2) / 6.
    assert s.ttft is not None
    assert s.ttft.p50 == pytest.approx(0.3)
    assert s.ttft.p95 == 0.5
    assert s.ttft.mean == 0.5
    assert s.ttft.count == 6
    # a histogram with no observations yet is present but empty
    assert s.e2e == Quantiles(p50=None, p95=None, mean=None, count=0)
    assert s.running == 5.0
    assert s.kv_cache_usage == 0.75  # max over engines, from the deprecated name
    assert s.deprecated_names == ("vllm:gpu_cache_usage_perc",)
    assert s.requests_finished == {"stop": 7.0, "length": 1.0}
    assert s.engines == ("0", "1")
    assert s.cache_config == {"block_size": "16", "num_gpu_blocks": "200"}  # engine 0
    assert kv_cache_capacity_tokens(s) == 3200  # 200 blocks * 16 tokens


def test_current_name_wins_over_deprecated() -> None:
    text = (
        'vllm:kv_cache_usage_perc{engine="0",model_name="m"} 0.5\n'
        'vllm:gpu_cache_usage_perc{engine="0",model_name="m"} 0.9\n'
    )
    s = summarize(text)
    assert s.kv_cache_usage == 0.5
    assert s.deprecated_names == ()


def test_engines_sort_numerically_and_capacity_of_unknown_blocks() -> None:
    line = 'vllm:num_requests_waiting{{engine="{}",model_name="m"}} 1.0\n'
    text = "".join(line.format(engine) for engine in ("10", "2", "0"))
    text += 'vllm:cache_config_info{block_size="16",engine="0",num_gpu_blocks="None"} 1.0\n'
    s = summarize(text)
    assert s.engines == ("0", "2", "10")
    assert s.waiting == 3.0
    assert kv_cache_capacity_tokens(s) is None


def test_empty_and_garbage() -> None:
    empty = summarize("")
    assert isinstance(empty, MetricsSummary)
    assert empty.models == () and empty.running is None and empty.requests_finished == {}
    with pytest.raises(ValueError):
        summarize("<html><body>502 Bad Gateway</body></html>")


def test_samples_by_name_keeps_every_engine_and_drops_created() -> None:
    text = (
        "# TYPE vllm:prompt_tokens counter\n"
        'vllm:prompt_tokens_total{engine="0"} 5\n'
        'vllm:prompt_tokens_total{engine="1"} 7\n'
        'vllm:prompt_tokens_created{engine="0"} 1.7e9\n'
        "process_start_time_seconds 1.7e9\n"
    )
    samples = samples_by_name(text)
    assert samples["vllm:prompt_tokens_total"] == [({"engine": "0"}, 5.0), ({"engine": "1"}, 7.0)]
    assert "vllm:prompt_tokens_created" not in samples
    assert samples["process_start_time_seconds"] == [({}, 1.7e9)]
    assert samples_by_name("") == {}
    with pytest.raises(ValueError):
        samples_by_name("vllm:x{engine=0} 1\n")


@pytest.mark.parametrize("name", ["A", "B", "C", "4"])
def test_the_load_alone_reads_as_the_whole_scrape_does(name: str) -> None:
    whole, load = summarize(source(name)), summarize(source(name), LOAD_FAMILIES)
    assert (load.running, load.waiting, load.kv_cache_usage) == (
        whole.running,
        whole.waiting,
        whole.kv_cache_usage,
    )
    assert load.ttft is None and load.prompt_tokens is None  # the rest is not read
