"""Facts first, the model second, and still useful when vLLM is down: @gemma-bot and /logs analyze through
the real Slack HTTP stack, with the vLLM simulator as the primary and a second simulator as the fallback."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sim.demo import Demo
from sim.vllm import VllmSimulator


def _say(demo: Demo, line: str, timeout: float = 60) -> str:
    out, answered = demo.user.run(line, timeout=timeout)
    assert answered, out
    return "\n".join(out)


@pytest.fixture()
def fallback_world() -> Iterator[tuple[Demo, VllmSimulator]]:
    """The demo with a second OpenAI-compatible server (another simulated model) as LLM_FALLBACK_BASE_URL."""
    with Demo() as probe_scenario:
        config = dict(probe_scenario.scenario["vllm"], model="fallback-gemma")
    with VllmSimulator(config) as fallback, Demo(llm_fallback_base_url=fallback.url) as demo:
        yield demo, fallback


def test_why_did_it_fail_shows_the_facts_next_to_the_answer(world: Demo) -> None:
    text = _say(world, "@gemma-bot why did gemma4-old fail?")
    facts = text.index("*Facts*")
    assert (
        "*FAILED*" in text and "europe-west4-a" in text and "no more capacity" in text and "stockout" in text
    )
    written = text.index("written by `google/gemma-4-31B-it` (primary vLLM)")
    assert facts < written
    assert "context 16384 tokens (max_model_len from /v1/models)" in text
    assert "based on: describe gemma4-old" in text and "subject from the question" in text


@pytest.mark.parametrize(
    "question", ["how much is it costing us right now?", "what did we spend so far?", "what's the bill?"]
)
def test_cost_questions_fetch_the_live_burn_whatever_the_wording(world: Demo, question: str) -> None:
    text = _say(world, f"@gemma-bot {question}")
    assert "_live burn_" in text


def test_a_failed_resource_error_is_its_state_not_a_log_failure(world: Demo) -> None:
    text = _say(world, "@gemma-bot what went wrong with gemma4-old?")
    assert "*`gemma4-old` is FAILED: its state and error (TPU API)*" in text
    assert "no ERROR entries" in text and "*Known failures in the log*" not in text
    assert "/tpu recover gemma4-old" in text and "valid-until" not in text


def test_the_facts_reach_the_model_as_data(world: Demo) -> None:
    _say(world, "@gemma-bot what is the state of gemma4-qr?")
    system = world.vllm.chat_requests[0]["messages"][0]["content"]
    assert "FACTS fetched by the bot" in system and "gemma4-qr" in system and "ACTIVE" in system


def test_a_known_failure_leads_and_reaches_the_model_first(world: Demo) -> None:
    text = _say(world, "@gemma-bot what went wrong on gemma4-qr in the last hour?")
    assert text.index("*Known failures in the log*") < text.index("*Facts*") < text.index("written by")
    assert "kv-cache-insufficient" in text and "errors in the last 1h on gemma4-qr-node" in text
    system = world.vllm.chat_requests[0]["messages"][0]["content"]
    assert system.index("known failures (the bot's catalogue)") < system.index("[describe gemma4-qr]")
    assert "kv-cache-insufficient" in system


def test_without_vllm_the_rules_still_answer(world: Demo) -> None:
    world.vllm.stop()
    analysis = _say(world, "/logs analyze --since 2h", timeout=120)
    assert "*Top error kinds*" in analysis
    assert "kv-cache-insufficient" in analysis and "tpu-device-busy" in analysis
    assert "Gemma unavailable: rules only" in analysis and "cannot connect" in analysis
    assert "LLM_FALLBACK_BASE_URL" in analysis
    chat = _say(world, "@gemma-bot why did gemma4-old fail?")
    assert "*FAILED*" in chat and "europe-west4-a" in chat
    assert "Gemma unavailable: rules only" in chat
    review = _say(world, "@gemma-bot please delete gemma4-old")
    assert "[Review /tpu delete gemma4-old]" in review


def test_the_fallback_answers_when_vllm_is_down_and_says_so(
    fallback_world: tuple[Demo, VllmSimulator],
) -> None:
    demo, fallback = fallback_world
    demo.vllm.stop()
    analysis = _say(demo, "/logs analyze --since 2h", timeout=120)
    assert "*Gemma's analysis*" in analysis and "kv-cache-insufficient" in analysis
    assert f"written by `fallback-gemma` (fallback) at `{fallback.url}`" in analysis
    assert "rules only" not in analysis
    chat = _say(demo, "@gemma-bot why did gemma4-old fail?")
    assert "written by `fallback-gemma` (fallback)" in chat and "*FAILED*" in chat
    assert fallback.requests_served >= 2


def test_a_failing_primary_hands_over_to_the_fallback(fallback_world: tuple[Demo, VllmSimulator]) -> None:
    demo, _ = fallback_world
    demo.vllm.set_mode("engine-dead")  # /v1/models still answers; completions get HTTP 500
    analysis = _say(demo, "/logs analyze --since 2h", timeout=120)
    assert "written by `fallback-gemma` (fallback)" in analysis


def test_answers_carry_feedback_buttons_listed_by_gemma_feedback(world: Demo) -> None:
    assert "No rated answers yet" in _say(world, "/gemma feedback")
    text = _say(world, "@gemma-bot why did gemma4-old fail?")
    assert "[Helpful]" in text and "[Not helpful]" in text
    assert "recorded as *not helpful*" in _say(world, "click Not helpful")
    listed = _say(world, "/gemma feedback")
    assert "0 of 1 rated answers helpful" in listed
    assert "why did gemma4-old fail?" in listed and "`google/gemma-4-31B-it`" in listed
    assert "describe gemma4-old" in listed


def test_no_feedback_buttons_without_a_model(world: Demo) -> None:
    world.vllm.stop()
    text = _say(world, "@gemma-bot why did gemma4-old fail?")
    assert "Gemma unavailable: rules only" in text and "[Helpful]" not in text
