"""A zero or negative `--since` or `--chart` span is refused with a clear line, never silently replaced by the
default or read as an empty chart."""

from __future__ import annotations

from datetime import timedelta

import pytest

import bot.handlers  # noqa: F401  (importing it declares every command on the registry)
from bot.commands.registry import UsageError, registry, window


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("logs analyze --since 0m", "'0m' is an empty window"),
        ("logs analyze --since=0s", "'0s' is an empty window"),
        ("logs analyze --since 0d", "'0d' is an empty window"),
        ("logs analyze --since -5m", "'-5m' is a negative window"),
        ("logs analyze --since=-1h", "'-1h' is a negative window"),
        ("logs --since 0h", "'0h' is an empty window"),
        ("logs analyze --since soon", "is not a duration"),
    ],
)
def test_an_empty_or_negative_window_is_refused(text: str, problem: str) -> None:
    with pytest.raises(UsageError) as caught:
        registry.parse(text)
    assert problem in caught.value.problem and "/logs" in caught.value.usage


@pytest.mark.parametrize(("word", "span"), [("1s", timedelta(seconds=1)), ("90m", timedelta(minutes=90))])
def test_a_positive_window_is_kept(word: str, span: timedelta) -> None:
    assert window(word) == span
    assert registry.parse(f"logs analyze --since {word}").args["since"] == span


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("vllm metrics --chart 0m", "'0m' is an empty window"),
        ("vllm metrics --chart -1h", "'-1h' is a negative window"),
    ],
)
def test_an_empty_chart_span_is_refused(text: str, problem: str) -> None:
    with pytest.raises(UsageError) as caught:
        registry.parse(text)
    assert problem in caught.value.problem and "/vllm metrics" in caught.value.usage
