"""Plumbing against a REAL OpenAI-compatible server we did not write: llama.cpp's server
(llama-cpp-python[server]) serving SmolLM2-135M-Instruct with a 2048-token context (tests/llama_server.py;
installed by .ci/install-llama-server). Asserts on plumbing only, never on the model's wording.

Findings about this server (llama-cpp-python 0.3.36) that the code handles:
- it ignores `stream_options.include_usage`: a stream carries no usage chunk (non-streamed answers do);
- a STREAMED request whose prompt exceeds the context gets HTTP 200 and an empty event stream, while the same
  request without streaming gets HTTP 400 "This model's maximum context length is 2048 tokens, ...";
- it accepts `tools` with `tool_choice: "auto"` and may answer with plain text.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import openai
import pytest

from llm.agent import SUGGEST_TOOL, Tool, answer
from llm.client import NO_USAGE_NOTE, GemmaClient
from llm.logsum import analyze, build_prompt, summarize
from ops.gcp.cloudlogs import LogEntry, entry_from_api
from sim.gcp.loggen import generate_logs
from tests.llama_server import LlamaServer, llama_server

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
HF = "hf_" + "aBcDeFgHiJkLmNoPqRsTuVwXyZ01234567"
SLACK = "xoxb-" + "1234567890-1234567890123-AbCdEfGhIjKlMnOpQrStUvWx"
pytestmark = pytest.mark.timeout(240)


@pytest.fixture(scope="module")
def server() -> Iterator[LlamaServer]:
    with llama_server() as running:
        yield running


def recorded(client: GemmaClient) -> list[dict[str, Any]]:
    """Record every chat request body the client sends (an httpx event hook on its connection pool)."""
    sent: list[dict[str, Any]] = []

    def hook(request: httpx.Request) -> None:
        if request.url.path.endswith("/chat/completions"):
            sent.append(json.loads(request.read()))

    client._openai._client.event_hooks = {"request": [hook], "response": []}
    return sent


def log_entries() -> list[LogEntry]:
    spec = {
        "noise": {"count": 600},
        "cases": [
            {"file": "vllm-kv-cache-insufficient.log", "count": 5},
            {"file": "vllm-tpu-device-busy.log", "count": 5},
            {"file": "vllm-hf-gated-repo-401.log", "count": 3},
        ],
    }
    entries = [entry_from_api(b) for b in generate_logs(spec, project="p", start=NOW)]
    rng = random.Random(3)
    words = ["engine", "worker", "cache", "memory", "request", "model", "token", "device", "buffer", "queue"]
    for i in range(120):  # many distinct error templates, so a generous budget overflows 2048 real tokens
        lead = "".join(chr(97 + (i // 26**k) % 26) for k in range(3))
        text = f"{lead}: " + " ".join(rng.choice(words) for _ in range(10 + i % 13))
        entries.append(LogEntry(NOW - timedelta(minutes=i), "ERROR", text, node_id="gemma4-qr-node"))
    entries.append(
        LogEntry(NOW, "CRITICAL", f"docker login failed HF_TOKEN={HF} SLACK_BOT_TOKEN={SLACK}", node_id="n")
    )
    return entries


def test_probe_and_stream_plumbing(server: LlamaServer) -> None:
    with GemmaClient(server.url, model=server.model, timeout_s=120) as client:
        probe = client.probe()
        assert probe.model == server.model
        assert probe.prompt_tokens and probe.prompt_tokens > 0 and probe.completion_tokens == 1
        result = client.stream([{"role": "user", "content": "Say hello."}], max_tokens=8, temperature=0.0)
    assert result.finish_reason in ("stop", "length") and result.total_s > 0
    if result.prompt_tokens is None:  # llama-cpp-python ignores stream_options.include_usage
        assert result.note == NO_USAGE_NOTE and result.tpot_s is None and result.output_tokens_per_s is None
    else:
        assert result.completion_tokens and result.completion_tokens <= 8


def test_logsum_retries_once_against_the_real_context_limit(server: LlamaServer) -> None:
    entries = log_entries()
    too_big = build_prompt(summarize(entries), 3000)
    raw = httpx.post(
        server.url + "/v1/chat/completions",
        json={"model": server.model, "messages": list(too_big.messages), "max_tokens": 32},
        trust_env=False,
        timeout=120,
    )
    assert raw.status_code == 400 and "maximum context length is 2048" in raw.text  # the REAL limit
    with GemmaClient(server.url, model=server.model, timeout_s=120) as client:
        sent = recorded(client)
        result = analyze(entries, client, server.n_ctx, answer_tokens=32, budget_tokens=3000, temperature=0.0)
    assert result.attempts == 2 and result.budget_tokens == 1500, result
    assert result.model_error is None and "retried" in result.note
    assert result.prompt_tokens_estimate is not None and result.prompt_tokens_estimate <= 1500
    # 2 prompts; the second is re-sent once when the server reset the connection after the dropped stream.
    assert len(sent) in (2, 3) and all(body["stream"] for body in sent)
    assert len(json.dumps(sent[-1])) < len(json.dumps(sent[0]))
    # Redaction of what was actually sent over the wire.
    wire = json.dumps(sent)
    assert HF not in wire and SLACK not in wire and "[REDACTED:hf_token]" in wire


TOOLS = {
    "status": Tool(
        "status",
        "TPU and vLLM status",
        {"type": "object", "properties": {}},
        lambda: f"gemma4-qr ACTIVE, vLLM ready (token {HF})",
    ),
    "list": Tool(
        "list", "queued resources", {"type": "object", "properties": {}}, lambda: "gemma4-qr ACTIVE"
    ),
}


def test_agent_tool_plumbing(server: LlamaServer) -> None:
    sent: list[dict[str, Any]] = []

    def hook(request: httpx.Request) -> None:
        if request.url.path.endswith("/chat/completions"):
            sent.append(json.loads(request.read()))

    http = httpx.Client(event_hooks={"request": [hook]}, trust_env=False, timeout=120)
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="EMPTY", max_retries=0, http_client=http)
    result = answer(
        "What is the status of the TPU?",
        [f"my slack token is {SLACK}"],
        client,
        TOOLS,
        max_rounds=2,
        max_tokens=32,
        temperature=0.0,
    )
    assert 1 <= result.rounds <= 3 and len(sent) == result.rounds
    assert sent[0]["tool_choice"] == "auto" if result.used_tools else "tools" not in sent[-1]
    assert all(c.name in {*TOOLS, SUGGEST_TOOL} or not c.ok for c in result.tool_calls_made)
    assert result.suggested_command is None
    wire = json.dumps(sent)
    assert SLACK not in wire and HF not in wire
    # The model id came from the server's /v1/models.
    assert all(body["model"] == server.model for body in sent)
