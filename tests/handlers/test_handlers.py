"""Handlers through the Runner against the simulators, without Slack's HTTP transport (see conftest.py)."""

from __future__ import annotations

from typing import Any

from sim.console import DEMO_USER
from sim.demo import Demo
from tests.handlers.conftest import Handlers


def _tool_results(world: Demo) -> list[str]:
    """What the chat's tools returned to the model, in the order the vLLM simulator received them."""
    messages: list[Any] = [m for r in world.vllm.chat_requests for m in r["messages"]]
    return list(dict.fromkeys(str(m["content"]) for m in messages if m.get("role") == "tool"))


def test_tpu_status_shows_every_source(handlers: Handlers) -> None:
    text = handlers.run("tpu status")
    assert "*gemma4-qr* (primary) · `us-east5-a` · :large_green_circle: ACTIVE (by USER)" in text
    assert "node `gemma4-qr-node` :large_green_circle: READY" in text
    assert "/health ready" in text and "`google/gemma-4-31B-it` (max_model_len 16384)" in text
    assert "Deployment `production`" in text  # the demo channel is bound to production


def test_tpu_list_names_every_queued_resource(handlers: Handlers) -> None:
    text = handlers.run("tpu list")
    for name in ("gemma4-qr", "gemma4-standby", "gemma4-old"):
        assert f"*{name}*" in text
    assert "gemma4-old" not in handlers.run("tpu list --zone us-east5-a")


def test_vllm_status_reads_the_container_over_ssh(handlers: Handlers) -> None:
    text = handlers.run("vllm status")
    assert "serving: running" in text and "image `vllm/vllm-tpu:gemma4`" in text


def test_logs_analyze_names_the_known_failures(handlers: Handlers) -> None:
    text = handlers.run("logs analyze --since 1h")
    assert "*Top error kinds*" in text and "*Gemma's analysis*" in text
    assert "kv-cache-insufficient" in text and "tpu-hbm-oom-program-load" in text


def test_a_change_in_a_channel_of_no_deployment_is_refused(handlers: Handlers, demo: Demo) -> None:
    text = handlers.run("tpu delete gemma4-qr", channel="C0ELSEWHR1")
    assert "bound to no deployment: which one?" in text and "Confirm" not in text
    assert demo.gcp.world.queued_resources[("us-east5-a", "gemma4-qr")].state == "ACTIVE"


def test_chat_answers_through_a_registry_tool(handlers: Handlers, demo: Demo) -> None:
    text = handlers.run("gemma chat what are the details of gemma4-old?")
    assert "read: the state and error of `gemma4-old`" in text and "used tools" not in text
    described = [r for r in _tool_results(demo) if "gemma4-old" in r]
    assert described and "There is no more capacity" in described[-1]


def test_chat_logs_tool_reads_errors_only(handlers: Handlers, demo: Demo) -> None:
    text = handlers.run("gemma chat any errors in the logs?")
    # the footer says what was read in words; the tool result carries no hint for a person typing commands
    assert "read: the recent errors on node `gemma4-qr-node`" in text and "used tools" not in text
    assert not any("--query" in r or "Deployment `" in r for r in _tool_results(demo))
    filters = [b["filter"] for _, path, b in demo.gcp.request_bodies if path.startswith("/v2/entries:list")]
    assert any("severity>=ERROR" in f for f in filters)


def test_chat_reads_the_commands_run_in_its_own_channel_only(handlers: Handlers) -> None:
    handlers.run("tpu delete gemma4-qr", channel="C0ELSEWHR1")  # refused elsewhere: not a fact here
    question = "gemma chat why was the delete refused?"
    assert "*Earlier in this conversation*" not in handlers.run(question)
    handlers.run("tpu delete gemma4-qr", user="U0VIEWER01")  # refused here: a viewer
    text = handlers.run(question)
    assert "*Earlier in this conversation*" in text
    assert (
        "`/tpu delete gemma4-qr` by <@U0VIEWER01>" in text
        and "refused: `tpu delete` needs the admin role" in text
    )


def test_the_tools_runner_refuses_a_command_that_changes_anything(handlers: Handlers, demo: Demo) -> None:
    runner, registry = demo.bot.runner, demo.bot.registry
    reply = runner.run_read_only(registry.parse("tpu delete gemma4-qr"), DEMO_USER)
    assert "is not read-only" in reply.text
    assert demo.gcp.world.queued_resources[("us-east5-a", "gemma4-qr")].state == "ACTIVE"


def test_a_crashed_container_is_diagnosed(world: Demo) -> None:
    world.host.crash(world.settings.vllm_container, "vllm-kv-cache-insufficient.log")
    text = Handlers(world).run("vllm status")
    assert "exited" in text and "KV cache" in text and "5632" in text


def test_the_probe_is_a_timed_one_token_completion(handlers: Handlers, demo: Demo) -> None:
    before = list(demo.vllm.chat_requests)
    probe = demo.bot.services.probe()
    assert probe.model == demo.settings.vllm_model and probe.latency_s >= 0
    sent = list(demo.vllm.chat_requests)[len(before) :]
    assert [r["max_tokens"] for r in sent] == [1]
    assert "one-token chat completion from" in handlers.run("vllm health")


def test_a_mention_that_asks_nothing_reads_nothing(handlers: Handlers, demo: Demo) -> None:
    """'thanks', 'click': a short answer saying what can be asked, without reading the TPU API, Cloud
    Logging, vLLM or the model."""
    listed, asked = len(demo.gcp.requests), len(demo.vllm.chat_requests)
    for text in ("gemma chat thanks", "gemma chat click"):
        reply = handlers.run(text)
        assert reply.startswith("Ask me about the deployment, e.g. `@gemma-bot is gemma4-qr healthy?`"), reply
        assert "`/tpu help` lists the commands." in reply and "*Facts*" not in reply
    assert len(demo.gcp.requests) == listed and len(demo.vllm.chat_requests) == asked
