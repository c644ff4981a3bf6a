"""ops/ and llm/ handle the limits the simulators enforce: spot preemption as Google does it, prompt budgets
by the served model's tokenizer, and the SSH layer's docker/sudo permission errors. Real clients against
the simulators (tests/test_contract.py lists the limits)."""

from __future__ import annotations

import copy
import json
import random
import string
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import openai
import pytest

from llm.agent import Tool, answer
from llm.client import PromptCounter, estimate_chat_tokens
from ops.alerts.ledger import evaluate, identity, observe
from ops.errors import BadInput, NotFound, PermissionDenied
from ops.store.state import Store
from ops.tpu.api import TpuOps
from ops.vllm.container import VllmContainer
from ops.vllm.endpoint import EndpointResolver
from ops.vllm.ssh import RemoteHost
from sim.gcp import GcpSimulator
from sim.host import HostSimulator, generate_ed25519_key
from sim.vllm import VllmSimulator
from sim.vllm.tokens import count_chat_tokens
from tests.integration.test_capacity import CAPACITY, search
from tests.integration.test_capacity import scenario as capacity_scenario
from tests.integration.test_gcp_sim import default_scenario

NOW = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
MODEL = "google/gemma-4-31B-it"
PREEMPTIBLE = "TPUV6EPreemptiblePerProjectPerZoneForTPUAPI"  # flex-start draws on it


# ---- spot preemption ---------------------------------------------------------------------------------------


@pytest.fixture
def gcp() -> Iterator[GcpSimulator]:
    scenario = copy.deepcopy(default_scenario())
    scenario["google"]["zones"]["us-west4-a"] = {"accelerator_types": ["v6e-8"]}
    scenario["google"]["queued_resources"].append(
        {
            "name": "spot-qr",
            "zone": "us-west4-a",
            "state": "ACTIVE",
            "provisioning_model": "SPOT",
            "created": "-10m",
            "preempt_after": "5m",
            "node": {"id": "spot-qr-node", "external_ip": "203.0.113.9"},
        }
    )
    with GcpSimulator(scenario, now=lambda: NOW) as server:
        yield server


def test_preemption_as_google_does_it_alerts_and_drops_the_endpoint(gcp: GcpSimulator) -> None:
    tpu = TpuOps(gcp.project, api_endpoint=gcp.url, num_retries=0, timeout_s=5.0)
    resolver = EndpointResolver(None, tpu, ["us-west4-a"], 8000, primary="spot-qr", ttl_s=0)
    before = tpu.get_queued_resource("spot-qr", ["us-west4-a"])
    assert resolver.resolve().url == "http://203.0.113.9:8000"
    gcp.advance(10 * 60)  # SUSPENDING, then SUSPENDED: the node is gone, no PREEMPTED node is ever listed
    after = tpu.get_queued_resource("spot-qr", ["us-west4-a"])
    assert after.state == "SUSPENDED" and after.nodes == () and after.preempted
    alerts = evaluate([after], NOW, previous={identity(before): observe(before)})
    assert [a.kind for a in alerts if a.kind == "preempted"] == ["preempted"]
    assert "spot-qr-node" in next(a.title for a in alerts if a.kind == "preempted")
    again = evaluate([after], NOW, previous={identity(after): observe(after)})
    assert not [a for a in again if a.kind == "preempted"]  # once, not on every tick
    with pytest.raises(NotFound):
        resolver.resolve()
    tpu.close()


# ---- prompt budgets ----------------------------------------------------------------------------------------


@pytest.fixture
def vllm() -> Iterator[VllmSimulator]:
    sim = VllmSimulator({"latency_s": 0.0, "itl_s": 0.0, "max_model_len": 2048}).start()
    yield sim
    sim.stop()


def test_counter_uses_the_servers_tokenizer_and_falls_back_conservatively(vllm: VllmSimulator) -> None:
    messages = [{"role": "user", "content": "node 12 failed at 03:14:07 with exit 137 (OOM?)"}]
    tools = [{"type": "function", "function": {"name": "logs", "parameters": {"type": "object"}}}]
    counter = PromptCounter(vllm.url, MODEL)
    exact = counter.count(messages, tools)
    assert exact.exact and exact.tokens == count_chat_tokens(messages, tools) and exact.max_model_len == 2048
    vllm.fail_next("/tokenize", 404)
    estimated = counter.count(messages, tools)
    assert not estimated.exact and estimated.tokens >= exact.tokens
    assert not counter.count(messages).exact  # remembered: no /tokenize on this server


def test_estimate_is_never_below_the_tokenizer() -> None:
    rng = random.Random(18)
    alphabet = string.ascii_letters + string.digits + string.punctuation + "  \n"
    for _ in range(300):
        text = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 400)))
        messages = [{"role": "system", "content": "s"}, {"role": "user", "content": text}]
        tools = [{"name": text[:30]}] if rng.random() < 0.5 else None
        assert estimate_chat_tokens(messages, tools) >= count_chat_tokens(messages, tools), text


def test_agent_fits_a_long_thread_into_the_context(vllm: VllmSimulator) -> None:
    # 300 messages of ~150 tokens each (digits and punctuation count): far beyond 2048 tokens
    history = [f"message {i}: " + f"step {i} at 10:{i % 60:02d}:00 -> exit {i * 7}; " * 6 for i in range(300)]
    history[-1] = "the newest message names zebra-42"
    client = openai.OpenAI(base_url=vllm.url + "/v1", api_key="EMPTY", max_retries=0, timeout=10)
    with pytest.raises(BadInput, match="maximum context length"):
        answer("what happened?", history, client, {}, model=MODEL, max_tokens=256)
    result = answer(
        "what happened?",
        history,
        client,
        {},
        model=MODEL,
        max_tokens=256,
        counter=PromptCounter(vllm.url, MODEL),
    )
    assert result.text
    sent = [str(m.get("content")) for m in vllm.chat_requests[-1]["messages"]]
    assert "the newest message names zebra-42" in sent and history[0] not in sent
    client.close()


def test_agent_cuts_a_tool_result_to_the_tokens_left(vllm: VllmSimulator) -> None:
    # digits and punctuation: about 2,700 tokens in 4,000 characters, beyond a 2048-token context
    noisy = "12:34:56 exit 137; " * 1000
    logs = Tool("logs", "recent errors", {"type": "object", "properties": {}}, lambda: noisy)
    client = openai.OpenAI(base_url=vllm.url + "/v1", api_key="EMPTY", max_retries=0, timeout=10)
    result = answer(
        "show the error logs",
        [],
        client,
        {"logs": logs},
        model=MODEL,
        max_tokens=256,
        counter=PromptCounter(vllm.url, MODEL),
        context_tokens=2048,
    )
    assert result.text and [call.name for call in result.tool_calls_made] == ["logs"]
    assert result.tool_calls_made[0].result.endswith("[cut to fit the context]")
    last = vllm.chat_requests[-1]
    assert count_chat_tokens(last["messages"], last.get("tools")) + 256 <= 2048
    client.close()


# ---- SSH: docker socket and sudo ---------------------------------------------------------------------------


def _container(cfg: dict[str, Any], *, sudo: bool) -> tuple[HostSimulator, VllmContainer]:
    host = HostSimulator(
        {"containers": [{"name": "vllm", "state": "running", "started": "-1h", "restart_count": 3}], **cfg}
    ).start()
    key = generate_ed25519_key()
    host.authorize(key)
    remote = RemoteHost(
        host.host, host.port, user=host.user, pkey=key, pinned_host_keys=host.pinned_host_keys, sudo=sudo
    )
    return host, VllmContainer(remote, "vllm")


def test_ssh_layer_names_docker_socket_and_sudo_permission_errors() -> None:
    host, container = _container({"docker_group": False}, sudo=False)
    try:
        with pytest.raises(PermissionDenied) as info:
            container.status()
        assert "docker group" in info.value.hint
    finally:
        container.remote.close()
        host.stop()
    host, container = _container({"docker_group": False, "sudo": "password"}, sudo=True)
    try:
        with pytest.raises(PermissionDenied) as info:
            container.status()
        assert "passwordless sudo" in info.value.hint
    finally:
        container.remote.close()
        host.stop()


def test_ssh_layer_with_sudo_reads_status_logs_and_the_reset_restart_count() -> None:
    host, container = _container({"docker_group": False}, sudo=True)
    try:
        assert container.status().restart_count == 3
        assert "Application startup complete." in container.logs(tail=50)  # stdout, merged with 2>&1
        host.execute("sudo -n docker restart -- vllm")
        assert container.status().restart_count == 0  # what `docker restart` leaves, as on a real VM
        assert json.loads(host.execute("sudo -n docker inspect --type container -- vllm")[1])[0]["State"]
    finally:
        container.remote.close()
        host.stop()


# ---- the capacity search's quota path ---------------------------------------------------------------------


def test_capacity_search_moves_past_a_zone_without_preemptible_quota(tmp_path: Path) -> None:
    """A preemptible quota of 0 fails every flex-start request there until quota is granted: the search
    moves on and remembers the zone for the type and provisioning model (never "retry")."""
    world = capacity_scenario()
    world["google"]["zones"]["us-west4-a"] = {"accelerator_types": ["v6e-8"], "quota": {PREEMPTIBLE: 0}}
    with GcpSimulator(world) as gcp:
        tpu = TpuOps(gcp.project, api_endpoint=gcp.url, num_retries=0, timeout_s=5.0)
        store = Store(f"sqlite:///{tmp_path}/state.db")
        try:
            result, _ = search(tpu, store, ["us-west4-a", CAPACITY], parallel=1)
            assert result.winner is not None and result.winner.zone == CAPACITY
            assert result.zones["us-west4-a"].startswith("failed: no preemptible quota"), result.zones
            assert set(store.zone_failures("v6e-8", "flex-start")) == {"us-west4-a"}
        finally:
            store.close()
            tpu.close()
