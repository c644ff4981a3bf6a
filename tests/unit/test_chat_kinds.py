"""Question kinds the chat's facts-first retrieval recognises whatever the wording (cost), and the facts list
naming a family once."""

from __future__ import annotations

import pytest

from bot.chat.subjects import Known, resolve
from bot.shared.serving import counted_names

WORLD = Known({"gemma4-qr": ["gemma4-qr-node"], "gemma4-old": []}, "production", "gemma4-qr")


@pytest.mark.parametrize(
    "question",
    [
        "how much is it costing us right now?",
        "what is our burn rate?",
        "how much have we spent this week?",
        "what did gemma4-qr spend today",
        "what's the bill so far?",
        "is gemma4-qr expensive?",
        "price per hour of gemma4-qr?",
        "how many dollars did it burn",
        "$ so far?",
        "what are we paying for the TPUs",
        "how much does it run us per hour",
        "what are the charges for gemma4-old",
        "are we over budget?",
        "How Much did the TPU cost yesterday",
        "USD per day for this deployment?",
    ],
)
def test_cost_questions_are_recognised_by_kind(question: str) -> None:
    assert "cost" in resolve(question, [], WORLD).topics


@pytest.mark.parametrize(
    "question",
    [
        "how much memory is free on the TPU?",
        "how much KV cache is used?",
        "how much longer until gemma4-qr is ready?",
        "is vLLM healthy?",
        "what went wrong with gemma4-old?",
        "how many requests are waiting?",
    ],
)
def test_other_questions_do_not_fetch_the_cost(question: str) -> None:
    assert "cost" not in resolve(question, [], WORLD).topics


def test_a_family_with_several_findings_is_named_once() -> None:
    names = ["request-too-long", "kv-cache-insufficient", "request-too-long"]
    assert counted_names(names) == ["request-too-long (2 variants)", "kv-cache-insufficient"]
    assert counted_names(["tpu-device-busy"]) == ["tpu-device-busy"]
