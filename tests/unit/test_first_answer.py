"""The one "first model that answers" loop (llm.client.first_answer): hand-over on failure or an unusable
answer, the failure lines, and that no server after the one that answered is asked. Pure logic: no request
is sent (the clients are never called)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from llm.client import ChosenModel, ContextSize, GemmaClient, first_answer
from ops.errors import BackendUnavailable


@pytest.fixture
def models() -> Iterator[list[ChosenModel]]:
    made = [
        ChosenModel(
            GemmaClient(f"http://127.0.0.1:9/{role}", model=f"m-{role}"), role, ContextSize(4096, "test")
        )
        for role in ("primary endpoint", "fallback")
    ]
    yield made
    for chosen in made:
        chosen.client.close()


def test_the_first_answer_is_taken_and_no_later_model_asked(models: list[ChosenModel]) -> None:
    asked: list[str] = []
    failures: list[str] = []
    got = first_answer(iter(models), lambda c: asked.append(c.role) or f"from {c.role}", failures)
    assert got == ("from primary endpoint", models[0]) and asked == ["primary endpoint"] and failures == []


def test_a_failure_or_an_unusable_answer_hands_over(models: list[ChosenModel]) -> None:
    def ask(chosen: ChosenModel) -> str:
        if chosen.role == "primary endpoint":
            raise BackendUnavailable("cannot connect to vLLM", "try /vllm health", backend="vllm")
        return ""

    failures: list[str] = []
    assert first_answer(models, ask, failures, unusable=lambda t: None if t else "it wrote nothing") is None
    assert failures == [
        "primary endpoint `m-primary endpoint`: cannot connect to vLLM",
        "fallback `m-fallback`: it wrote nothing",
    ]


def test_no_models_is_no_answer() -> None:
    failures = ["primary endpoint at http://h:8000: cannot connect"]
    assert first_answer([], lambda c: "never", failures) is None
    assert failures == ["primary endpoint at http://h:8000: cannot connect"]
