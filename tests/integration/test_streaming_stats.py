"""GemmaClient.stream through the real openai SDK against the vLLM simulator: exact usage-based stats."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from typing import Any

import httpx
import openai
import pytest

from llm.client import NO_USAGE_NOTE, GemmaClient
from ops.errors import BackendUnavailable, BadInput
from sim import scenario
from sim.vllm import VllmSimulator
from sim.vllm.model import CANNED

MODEL = "google/gemma-4-31B-it"
LATENCY_S = 0.05
ITL_S = 0.01


@pytest.fixture
def sim() -> Iterator[VllmSimulator]:
    # no background traffic: the counters move only with this test's requests
    cfg = {**scenario.load()["vllm"], "latency_s": LATENCY_S, "itl_s": ITL_S, "background_rps": 0.0}
    simulator = VllmSimulator(cfg).start()
    yield simulator
    simulator.stop()


@pytest.fixture
def gemma(sim: VllmSimulator) -> Iterator[GemmaClient]:
    with GemmaClient(sim.url, model=MODEL, timeout_s=5.0) as client:
        yield client


def _generated(sim: VllmSimulator, name: str) -> float:
    value = sim.metrics.registry.get_sample_value(name, {"model_name": MODEL, "engine": "0"})
    assert value is not None
    return value


def test_stream_counts_come_from_usage_and_match_the_simulator(
    sim: VllmSimulator, gemma: GemmaClient
) -> None:
    generated_before = _generated(sim, "vllm:generation_tokens_total")
    prompt_before = _generated(sim, "vllm:prompt_tokens_total")
    deltas: list[str] = []
    messages = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "tell me about TPUs"}]
    result = gemma.stream(messages, max_tokens=12, on_delta=deltas.append)
    assert result.note == ""
    assert result.completion_tokens == 12
    assert result.completion_tokens == _generated(sim, "vllm:generation_tokens_total") - generated_before
    assert result.prompt_tokens == _generated(sim, "vllm:prompt_tokens_total") - prompt_before
    assert result.text == " ".join(CANNED[:12]) == "".join(deltas)
    assert result.finish_reason == "length"
    # timing: TTFT includes the simulated network latency; tokens then arrive every ITL_S
    assert result.ttft_s is not None and LATENCY_S <= result.ttft_s < LATENCY_S + 0.5
    assert result.tpot_s is not None and ITL_S * 0.8 <= result.tpot_s < ITL_S + 0.05
    assert result.tpot_s == pytest.approx((result.total_s - result.ttft_s) / 11)
    assert result.output_tokens_per_s == pytest.approx(12 / result.total_s)
    assert result.total_s >= result.ttft_s + 11 * ITL_S * 0.8


def test_stream_to_the_end_finishes_with_stop(gemma: GemmaClient) -> None:
    result = gemma.stream([{"role": "user", "content": "hi"}], max_tokens=500)
    assert result.finish_reason == "stop"
    assert result.completion_tokens == len(CANNED)
    assert result.text.split() == CANNED


def test_single_token_stream_has_no_tpot(gemma: GemmaClient) -> None:
    result = gemma.stream([{"role": "user", "content": "ping"}], max_tokens=1)
    assert result.completion_tokens == 1 and result.tpot_s is None
    assert result.ttft_s is not None and result.output_tokens_per_s is not None


def test_stream_errors_are_mapped_like_probe(sim: VllmSimulator, gemma: GemmaClient) -> None:
    with pytest.raises(BadInput, match="maximum context length is 16384"):
        gemma.stream([{"role": "user", "content": "x"}], max_tokens=16384)
    sim.set_mode("engine-dead")
    with pytest.raises(BackendUnavailable, match="HTTP 500"):
        gemma.stream([{"role": "user", "content": "x"}], max_tokens=5)
    sim.set_mode("booting", boot_s=30)
    with pytest.raises(BackendUnavailable, match="cannot connect"):
        gemma.stream([{"role": "user", "content": "x"}], max_tokens=5)
    sim.set_mode("ready")  # ends the boot at once
    assert gemma.stream([{"role": "user", "content": "x"}], max_tokens=2).completion_tokens == 2


def test_booting_mode_refuses_then_becomes_ready(sim: VllmSimulator, gemma: GemmaClient) -> None:
    sim.set_mode("booting", boot_s=0.3)
    assert sim.mode == "booting" and not sim.listening
    with pytest.raises(BackendUnavailable):
        gemma.stream([{"role": "user", "content": "x"}], max_tokens=2)
    deadline = time.monotonic() + 5
    while sim.mode != "ready" or not sim.listening:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    assert gemma.stream([{"role": "user", "content": "x"}], max_tokens=2).completion_tokens == 2


def _sse(events: list[dict[str, Any]]) -> bytes:
    body = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)
    return body + b"data: [DONE]\n\n"


def _chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": MODEL,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
    }


def _client_with(body: bytes) -> GemmaClient:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, headers={"content-type": "text/event-stream"}, content=body)

    client = GemmaClient("http://vllm.invalid", model=MODEL)
    client._openai = openai.OpenAI(
        base_url="http://vllm.invalid/v1",
        api_key="EMPTY",
        max_retries=0,
        http_client=httpx.Client(transport=httpx.MockTransport(handler)),  # type: ignore[arg-type]
    )
    return client


def test_without_a_usage_chunk_counts_are_none_and_it_says_so() -> None:
    body = _sse(
        [
            _chunk({"role": "assistant", "content": ""}),
            _chunk({"content": "a"}),
            _chunk({"content": " b"}),
            _chunk({"content": ""}, "stop"),
        ]
    )
    with _client_with(body) as client:
        result = client.stream([{"role": "user", "content": "x"}], max_tokens=5)
    assert result.text == "a b" and result.finish_reason == "stop"
    assert result.prompt_tokens is None and result.completion_tokens is None
    assert result.tpot_s is None and result.output_tokens_per_s is None
    assert result.ttft_s is not None
    assert result.note == NO_USAGE_NOTE and "usage" in result.note


def test_reasoning_delta_counts_for_ttft_but_not_text() -> None:
    usage = {"prompt_tokens": 3, "completion_tokens": 4, "total_tokens": 7}
    body = _sse(
        [
            _chunk({"role": "assistant", "content": ""}),
            _chunk({"reasoning_content": "thinking"}),
            _chunk({"content": "answer"}, "stop"),
            {**_chunk({}), "choices": [], "usage": usage},
        ]
    )
    with _client_with(body) as client:
        result = client.stream([{"role": "user", "content": "x"}], max_tokens=5)
    assert result.text == "answer"
    assert (result.prompt_tokens, result.completion_tokens) == (3, 4)
    assert result.ttft_s is not None and result.tpot_s is not None


def test_error_event_in_the_stream_is_backend_unavailable() -> None:
    body = _sse(
        [_chunk({"content": "a"}), {"error": {"message": "EngineCore encountered an issue.", "code": 500}}]
    )
    with _client_with(body) as client, pytest.raises(BackendUnavailable, match="EngineCore"):
        client.stream([{"role": "user", "content": "x"}], max_tokens=5)
