"""The one duration parser and its formatters (ops/times.py): each form, its bounds and round trips."""

from __future__ import annotations

from datetime import timedelta

import pytest

from ops.times import (
    MAX_DURATION,
    duration_word,
    minutes_text,
    parse_duration,
    parse_protobuf_duration,
    protobuf_duration,
)


@pytest.mark.parametrize(
    ("word", "expected"),
    [
        ("30s", timedelta(seconds=30)),
        ("10m", timedelta(minutes=10)),
        ("4h", timedelta(hours=4)),
        ("0m", timedelta()),
    ],
)
def test_parse_duration(word: str, expected: timedelta) -> None:
    assert parse_duration(word) == expected
    assert parse_duration(duration_word(expected)) == expected


@pytest.mark.parametrize("word", ["", "4", "h", "4 h", "1.5h", "-5m", "4w", "4H", "10m "])
def test_not_a_duration_names_the_word_and_an_example(word: str) -> None:
    with pytest.raises(ValueError, match="is not a duration") as err:
        parse_duration(word)
    assert repr(word) in str(err.value) and "4h" in str(err.value)


def test_longest_duration_and_no_overflow() -> None:
    assert parse_duration("365d") == MAX_DURATION
    for word in ["366d", "8761h", "9" * 40 + "d"]:
        with pytest.raises(ValueError, match="too long"):
            parse_duration(word)


def test_duration_word_takes_the_largest_whole_unit() -> None:
    assert [duration_word(timedelta(seconds=s)) for s in (14400, 5400, 90, 172800, 0)] == [
        "4h",
        "90m",
        "90s",
        "2d",
        "0s",
    ]
    assert duration_word(timedelta(minutes=-5)) == "-5m"


def test_protobuf_duration() -> None:
    assert protobuf_duration(timedelta(hours=4)) == "14400s"
    assert protobuf_duration(timedelta(seconds=1.6)) == "2s"
    assert parse_protobuf_duration("14400s") == timedelta(hours=4)
    assert parse_protobuf_duration(" 1.5s ") == timedelta(seconds=1.5)
    assert parse_protobuf_duration("-2s") == timedelta(seconds=-2)
    for bad in ["4h", "", None, 3600, "s", "1e3s"]:
        assert parse_protobuf_duration(bad) is None


def test_minutes_text_rounds_or_floors() -> None:
    assert minutes_text(timedelta(minutes=11, seconds=40)) == "12 min"
    assert minutes_text(timedelta(minutes=11, seconds=40), floor=True) == "11 min"
    assert minutes_text(timedelta(hours=1, minutes=5)) == "1 h 5 min"
    assert minutes_text(timedelta(minutes=-3)) == "0 min"
    assert minutes_text(timedelta(seconds=40), seconds_under_a_minute=True) == "40 s"
    assert minutes_text(timedelta(seconds=-4), seconds_under_a_minute=True) == "0 s"
    assert minutes_text(timedelta(seconds=40)) == "1 min"
