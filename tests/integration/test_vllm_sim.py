"""Real clients (ops.vllm.server.VllmClient, llm.client.GemmaClient, openai) against the vLLM simulator."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import openai
import pytest

from llm.client import GemmaClient
from ops.errors import BackendTimeout, BackendUnavailable, BadInput, NotFound, OpsError, PermissionDenied
from ops.vllm.server import VllmClient
from sim import scenario
from sim.vllm import VllmSimulator
from sim.vllm.metrics import TTFT_BUCKETS
from sim.vllm.model import CANNED
from sim.vllm.tokens import count_chat_tokens

PING_TOKENS = count_chat_tokens([{"role": "user", "content": "ping"}])  # template markers + "ping"

MODEL = "google/gemma-4-31B-it"


def make_sim(clock: Callable[[], datetime] | None = None, **overrides: Any) -> VllmSimulator:
    cfg = dict(scenario.load()["vllm"])
    # no background traffic unless asked: the counters move only with the test's requests
    cfg.update({"latency_s": 0.0, "itl_s": 0.001, "slow_latency_s": 0.6, "background_rps": 0.0}, **overrides)
    return VllmSimulator(cfg, clock=clock)


@pytest.fixture
def sim() -> Iterator[VllmSimulator]:
    simulator = make_sim().start()
    yield simulator
    simulator.stop()


@pytest.fixture
def vllm(sim: VllmSimulator) -> Iterator[VllmClient]:
    with VllmClient(sim.url, timeout_s=5.0) as client:
        yield client


@pytest.fixture
def gemma(sim: VllmSimulator) -> Iterator[GemmaClient]:
    with GemmaClient(sim.url, model=MODEL, timeout_s=5.0) as client:
        yield client


def test_health_version_models_metrics(sim: VllmSimulator, vllm: VllmClient) -> None:
    health = vllm.health()
    assert (health.state, health.status) == ("ready", 200)
    assert health.latency_s >= 0
    assert vllm.version() == "0.19.1"
    (card,) = vllm.models()
    assert card.id == MODEL and card.root == MODEL and card.parent is None
    assert card.max_model_len == 16384 and card.owned_by == "vllm" and isinstance(card.created, int)
    summary = vllm.metrics()
    assert summary.models == (MODEL,)
    assert summary.engines == ("0",)
    assert summary.deprecated_names == ()
    # plausible history from the start: a few hundred requests, prefix hit rate ~0.6; idle: no KV block held
    assert sum(summary.requests_finished.values()) >= 100
    assert summary.kv_cache_usage == 0.0 and summary.running == 0
    assert summary.prefix_cache_hit_rate == pytest.approx(0.6, abs=0.01)
    for q in (summary.ttft, summary.itl, summary.tpot, summary.e2e):
        assert q is not None and q.count > 0
        assert q.p50 is not None and q.p95 is not None and q.mean is not None
        assert 0 < q.p50 <= q.p95
    assert summary.ttft is not None and summary.ttft.p50 is not None and summary.ttft.p50 < 1.0
    assert summary.cache_config["block_size"] == "16"


def test_models_body_has_vllm_modelcard_shape(sim: VllmSimulator) -> None:
    body = httpx.get(sim.url + "/v1/models").json()
    card = body["data"][0]
    assert body["object"] == "list"
    expected = {"id", "object", "created", "owned_by", "root", "parent", "max_model_len", "permission"}
    assert set(card) >= expected
    assert card["permission"][0]["object"] == "model_permission"
    health = httpx.get(sim.url + "/health")
    assert health.status_code == 200 and health.content == b""


def test_metrics_exposition_looks_like_vllm(sim: VllmSimulator) -> None:
    text = httpx.get(sim.url + "/metrics").text
    assert "vllm:prompt_tokens_total{" in text and "vllm:prompt_tokens_created{" in text
    assert f'vllm:request_success_total{{engine="0",finished_reason="stop",model_name="{MODEL}"}}' in text
    assert 'vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001",model_name=' in text
    assert "vllm:cache_config_info{" in text
    les = re.findall(r'vllm:time_to_first_token_seconds_bucket\{engine="0",le="([^"]+)"', text)
    assert [float(le) for le in les[:-1]] == TTFT_BUCKETS and les[-1] == "+Inf"
    for line in text.splitlines():  # labels sorted alphabetically, like real vLLM output
        match = re.match(r"^vllm:\w+\{(.*)\} ", line)
        if match:
            keys = re.findall(r'(\w+)="', match.group(1))
            assert keys == sorted(keys), line


def test_probe(gemma: GemmaClient) -> None:
    result = gemma.probe()
    assert result.model == MODEL
    assert result.completion_tokens == 1
    assert result.prompt_tokens == PING_TOKENS
    assert 0 <= result.latency_s < 5


def test_stream_with_include_usage(sim: VllmSimulator) -> None:
    client = openai.OpenAI(base_url=sim.url + "/v1", api_key="EMPTY", max_retries=0, timeout=5)
    stream = client.chat.completions.create(
        model=MODEL,
        messages=[{"role": "user", "content": "Summarize the last hour of vLLM logs"}],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = list(stream)
    client.close()
    assert chunks[0].choices[0].delta.role == "assistant"
    contents = [c.choices[0].delta.content for c in chunks if c.choices and c.choices[0].delta.content]
    finishes = [c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason]
    assert finishes == ["stop"]
    usage_chunks = [c for c in chunks if c.usage is not None]
    assert len(usage_chunks) == 1 and usage_chunks[0] is chunks[-1] and chunks[-1].choices == []
    usage = usage_chunks[0].usage
    assert usage is not None
    assert usage.completion_tokens == len(contents) == len(CANNED)
    prompt = count_chat_tokens([{"role": "user", "content": "Summarize the last hour of vLLM logs"}])
    assert usage.prompt_tokens == prompt
    assert usage.total_tokens == prompt + len(contents)
    assert "".join(contents).split() == CANNED


def test_stream_raw_sse_and_max_tokens(sim: VllmSimulator) -> None:
    body = {
        "model": MODEL,
        "messages": [{"role": "user", "content": "hello"}],
        "max_tokens": 3,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with httpx.stream("POST", sim.url + "/v1/chat/completions", json=body) as response:
        assert response.headers["content-type"].startswith("text/event-stream")
        lines = [line for line in response.iter_lines() if line]
    assert all(line.startswith("data: ") for line in lines)
    assert lines[-1] == "data: [DONE]"
    events = [json.loads(line[6:]) for line in lines[:-1]]
    assert {e["object"] for e in events} == {"chat.completion.chunk"}
    assert len({e["id"] for e in events}) == 1 and events[0]["id"].startswith("chatcmpl-")
    assert events[-2]["choices"][0]["finish_reason"] == "length"
    assert events[-1]["choices"] == [] and events[-1]["usage"]["completion_tokens"] == 3


def test_non_streaming_max_tokens_length(sim: VllmSimulator) -> None:
    client = openai.OpenAI(base_url=sim.url + "/v1", api_key="EMPTY", max_retries=0, timeout=5)
    response = client.chat.completions.create(
        model=MODEL, messages=[{"role": "user", "content": "tell me a story"}], max_tokens=4
    )
    client.close()
    assert response.choices[0].finish_reason == "length"
    assert response.usage is not None and response.usage.completion_tokens == 4
    assert response.choices[0].message.content == " ".join(CANNED[:4])


def test_context_length_error_is_bad_input(gemma: GemmaClient, vllm: VllmClient) -> None:
    with pytest.raises(BadInput) as info:
        messages = [{"role": "user", "content": "word " * 1210}]
        gemma._create("chat completion", messages=messages, max_tokens=16000)
    assert "maximum context length is 16384 tokens" in info.value.message
    n = count_chat_tokens(messages)  # 1210 words plus the template markers
    assert f"your request has {n} input tokens (16000 > 16384 - {n})" in info.value.message
    assert vllm.health().state == "ready"  # a client error leaves the server healthy


def test_flat_error_shape_is_understood() -> None:
    with make_sim(error_shape="flat") as simulator:
        raw = httpx.post(
            simulator.url + "/v1/chat/completions",
            json={"model": MODEL, "messages": [{"role": "user", "content": "a b c"}], "max_tokens": 16384},
        )
        assert raw.status_code == 400 and raw.json()["object"] == "error"
        with GemmaClient(simulator.url, model=MODEL) as gemma, pytest.raises(BadInput) as info:
            messages = [{"role": "user", "content": "a b c"}]
            gemma._create("chat completion", messages=messages, max_tokens=16384)
    assert "'max_tokens' or 'max_completion_tokens' is too large: 16384" in info.value.message


def test_unknown_model_is_not_found(sim: VllmSimulator) -> None:
    with GemmaClient(sim.url, model="google/gemma-3-1b-it") as gemma, pytest.raises(NotFound) as info:
        gemma.probe()
    assert "does not exist" in info.value.message


def test_engine_dead(sim: VllmSimulator, vllm: VllmClient, gemma: GemmaClient) -> None:
    sim.set_mode("engine-dead")
    health = vllm.health()
    assert (health.state, health.status) == ("engine-dead", 503)
    assert "restart" in health.detail
    with pytest.raises(BackendUnavailable) as info:
        gemma.probe()
    assert "500" in info.value.message and "EngineCore" in info.value.message
    sim.set_mode("ready")
    assert vllm.health().state == "ready"
    with pytest.raises(ValueError):
        sim.set_mode("sleeping")


def test_stopped_simulator_is_refused() -> None:
    simulator = make_sim().start()
    url = simulator.url
    with VllmClient(url, timeout_s=2.0) as client, GemmaClient(url, model=MODEL, timeout_s=2.0) as gemma:
        assert client.health().state == "ready"  # leaves a kept-alive connection in the pool
        simulator.stop()
        health = client.health()
        assert (health.state, health.status) == ("refused", None)
        with pytest.raises(BackendUnavailable) as info:
            client.models()
        assert url in info.value.message
        assert "still loading the model or it is stopped" in info.value.hint, info.value.hint
        assert "/vllm status" in info.value.hint and "booting" not in info.value.hint
        with pytest.raises(BackendUnavailable):
            gemma.probe()


def test_latency_above_timeout(sim: VllmSimulator) -> None:
    sim.set_latency(1.0)
    with (
        VllmClient(sim.url, timeout_s=0.2) as client,
        GemmaClient(sim.url, model=MODEL, timeout_s=0.2) as gemma,
    ):
        with pytest.raises(BackendTimeout):
            client.models()
        with pytest.raises(BackendTimeout):
            client.metrics()
        assert client.health().state == "timeout"
        with pytest.raises(BackendTimeout):
            gemma.probe()


def test_slow_mode_adds_latency(sim: VllmSimulator, vllm: VllmClient) -> None:
    sim.set_mode("slow")
    health = vllm.health()
    assert health.state == "ready" and health.latency_s >= 0.6


def test_injected_failures(sim: VllmSimulator, vllm: VllmClient) -> None:
    sim.fail_next("/v1/models", 500)
    with pytest.raises(BackendUnavailable) as info:
        vllm.models()
    assert "HTTP 500" in info.value.message and "simulated failure" in info.value.message
    assert vllm.models()[0].id == MODEL  # count=1: the next call works

    sim.fail_next("/health", 502, count=2)
    assert [vllm.health().state for _ in range(3)] == ["error", "error", "ready"]

    sim.fail_next("/version", 404)
    with pytest.raises(OpsError) as other:
        vllm.version()
    assert type(other.value) is OpsError

    sim.fail_next("/metrics", 403)
    with pytest.raises(PermissionDenied):
        vllm.metrics()


def test_metrics_advance_after_completion(sim: VllmSimulator, vllm: VllmClient, gemma: GemmaClient) -> None:
    before = vllm.metrics()
    gemma.probe()
    after = vllm.metrics()
    assert after.generation_tokens == (before.generation_tokens or 0) + 1
    assert after.prompt_tokens == (before.prompt_tokens or 0) + PING_TOKENS
    assert after.requests_finished["stop"] == before.requests_finished["stop"] + 1
    assert after.prefix_cache_queries == (before.prefix_cache_queries or 0) + PING_TOKENS
    assert before.ttft is not None and after.ttft is not None and after.ttft.count == before.ttft.count + 1
    assert before.e2e is not None and after.e2e is not None and after.e2e.count == before.e2e.count + 1
    assert after.running == 0
    assert sim.requests_served == 1


def test_api_key_required_for_v1_only() -> None:
    with make_sim(api_key="s3cret-key") as simulator:
        with VllmClient(simulator.url) as anonymous:
            assert anonymous.health().state == "ready"  # /health is not behind --api-key
            with pytest.raises(PermissionDenied) as info:
                anonymous.models()
            assert "VLLM_API_KEY" in info.value.hint
        with VllmClient(simulator.url, api_key="s3cret-key") as client:
            assert client.models()[0].id == MODEL
            assert "s3cret" not in repr(client)
        with (
            GemmaClient(simulator.url, model=MODEL, api_key="wrong-key") as gemma,
            pytest.raises(PermissionDenied) as denied,
        ):
            gemma.probe()
        assert "wrong-key" not in str(denied.value)
        with GemmaClient(simulator.url, model=MODEL, api_key="s3cret-key") as gemma:
            assert gemma.probe().completion_tokens == 1


def _mock_client(handler: Any, api_key: str | None = None) -> VllmClient:
    client = VllmClient("http://vllm.test:8000", api_key=api_key)
    client._http.close()
    headers = dict(client._http.headers)
    client._http = httpx.Client(
        base_url="http://vllm.test:8000", transport=httpx.MockTransport(handler), headers=headers
    )
    return client


def test_malformed_bodies_and_error_shapes() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        path = request.url.path
        if path == "/version":
            return httpx.Response(200, text="<html>not json</html>")
        if path == "/v1/models":
            return httpx.Response(200, json={"object": "list", "data": [{"object": "model"}]})
        if path == "/metrics":
            return httpx.Response(200, text="<html><body>proxy page</body></html>")
        if path == "/nested":
            return httpx.Response(503, json={"error": {"message": "engine overloaded", "code": 503}})
        return httpx.Response(418, json={"object": "error", "message": "flat message", "code": 418})

    with _mock_client(handler) as client:
        calls = ((client.version, "/version"), (client.models, "/v1/models"), (client.metrics, "/metrics"))
        for call, path in calls:
            with pytest.raises(BackendUnavailable) as info:
                call()
            assert f"malformed {path} body" in info.value.message
        with pytest.raises(BackendUnavailable) as nested:
            client._get("/nested")
        assert "engine overloaded" in nested.value.message
        with pytest.raises(OpsError) as flat:
            client._get("/flat")
        assert "flat message" in flat.value.message
    assert all("authorization" not in request.headers for request in seen)

    def version(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json={"version": "0.19.1"})

    with _mock_client(version, api_key="k3y") as keyed:
        assert keyed.version() == "0.19.1"
        assert keyed._http.headers["authorization"] == "Bearer k3y"


def test_client_disconnect_mid_stream_counts_as_abort() -> None:
    with make_sim(itl_s=0.05) as simulator, VllmClient(simulator.url) as client:
        before = client.metrics().requests_finished["abort"]
        body = {"model": MODEL, "messages": [{"role": "user", "content": "hi"}], "stream": True}
        with httpx.stream("POST", simulator.url + "/v1/chat/completions", json=body) as response:
            lines = response.iter_lines()
            next(lines)
            next(lines)
        deadline = time.monotonic() + 5
        while client.metrics().requests_finished["abort"] == before and time.monotonic() < deadline:
            time.sleep(0.05)
        after = client.metrics()
    assert after.requests_finished["abort"] == before + 1
    assert after.running == 0


def test_prompts_are_redacted_before_they_reach_the_model(gemma: GemmaClient) -> None:
    # The simulator counts the prompt with its chat template: the four-word password arrives masked whole,
    # exactly as many tokens as the masked form sent as it is.
    secret = 'PASSWORD="correct horse battery staple"'
    result = gemma.stream([{"role": "user", "content": secret}], max_tokens=2)
    masked = gemma.stream([{"role": "user", "content": 'PASSWORD="[REDACTED:password]"'}], max_tokens=2)
    assert result.prompt_tokens == masked.prompt_tokens


def test_kv_cache_usage_is_that_of_the_requests_running() -> None:
    """vLLM's usage counts the blocks running requests hold: one streamed request of a 700-word prompt holds
    ceil(tokens / 16) of the 16,384 blocks while it runs, and nothing once it ends."""
    with make_sim(itl_s=0.5) as simulator, VllmClient(simulator.url) as client:
        messages = [{"role": "user", "content": "word " * 700}]
        body = {"model": MODEL, "messages": messages, "stream": True, "max_tokens": 10}
        with httpx.stream("POST", simulator.url + "/v1/chat/completions", json=body) as response:
            lines = response.iter_lines()
            next(lines)
            next(lines)
            running = client.metrics()
            for _ in lines:
                pass
        after = client.metrics()
    held = -(-(count_chat_tokens(messages) + 1) // 16)  # the prompt and the first generated tokens
    assert running.running == 1
    assert running.kv_cache_usage is not None and held / 16384 <= running.kv_cache_usage <= (held + 1) / 16384
    assert (after.running, after.kv_cache_usage) == (0, 0.0)


def test_a_restarted_server_counts_from_zero_since_its_start() -> None:
    with make_sim() as simulator, VllmClient(simulator.url) as client:
        before = client.metrics()
        assert before.preemptions == 2 and (before.prompt_tokens or 0) > 0
        started = datetime.now(UTC).replace(microsecond=0)
        simulator.restart_process(started)
        after = client.metrics()
        assert after.started_at == started
        assert (after.preemptions, after.prompt_tokens, after.generation_tokens) == (0, 0, 0)
        assert after.ttft is not None and after.ttft.count == 0 and after.requests_finished["stop"] == 0
        with GemmaClient(simulator.url, model=MODEL) as gemma:
            gemma.probe()
        assert client.metrics().prompt_tokens == PING_TOKENS  # the restarted process's first request


def test_background_traffic_follows_the_clock_while_the_server_serves() -> None:
    now = [datetime(2026, 12, 6, 8, 0, tzinfo=UTC)]
    with make_sim(clock=lambda: now[0], background_rps=0.5) as simulator, VllmClient(simulator.url) as client:
        first = sum(client.metrics().requests_finished.values())
        now[0] += timedelta(minutes=10)
        second = client.metrics()
        assert sum(second.requests_finished.values()) == first + 300  # 600 s at 0.5 requests/s
        assert (second.running, second.kv_cache_usage) == (0, 0.0)  # finished: nothing held
        simulator.set_mode("wedged")  # a stuck engine serves nobody
        now[0] += timedelta(minutes=10)
        assert sum(client.metrics().requests_finished.values()) == first + 300
