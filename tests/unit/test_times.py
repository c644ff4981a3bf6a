"""The one RFC 3339 formatter and parser (ops/times.py): UTC conversion, fractions, offsets, bad text."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from ops.times import from_rfc3339, iso_utc, parse_rfc3339, rfc3339, shown_time

_MOMENT = datetime(2026, 12, 3, 9, 27, 6, 250_000, tzinfo=UTC)


def test_formats_in_utc_to_the_second_or_microsecond() -> None:
    assert rfc3339(_MOMENT) == "2026-12-03T09:27:06Z"
    assert rfc3339(_MOMENT, micros=True) == "2026-12-03T09:27:06.250000Z"
    assert rfc3339(_MOMENT.astimezone(timezone(timedelta(hours=-5)))) == "2026-12-03T09:27:06Z"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-12-03T09:27:06Z", _MOMENT.replace(microsecond=0)),
        ("2026-12-03T09:27:06.25Z", _MOMENT),
        ("2026-12-03T09:27:06.250000999Z", _MOMENT),  # nanoseconds are cut, not rounded
        ("2026-12-03T11:27:06.25+02:00", _MOMENT),
        ("  2026-12-03T09:27:06.25Z ", _MOMENT),
    ],
)
def test_parses_to_aware_utc(text: str, expected: datetime) -> None:
    parsed = parse_rfc3339(text)
    assert parsed == expected and parsed is not None and parsed.tzinfo == UTC


@pytest.mark.parametrize(
    "text", ["", "2026-12-03", "2026-12-03 09:27:06Z", "2026-12-03T09:27:06", "2026-02-30T00:00:00Z", "now"]
)
def test_other_text_is_none(text: str) -> None:
    assert parse_rfc3339(text) is None


def test_round_trip() -> None:
    assert parse_rfc3339(rfc3339(_MOMENT, micros=True)) == _MOMENT


def test_iso_utc_names_a_missing_time() -> None:
    assert iso_utc(None) == "-" and iso_utc(_MOMENT) == "2026-12-03T09:27:06Z"


def test_from_rfc3339_refuses_what_is_not_a_stamp() -> None:
    assert from_rfc3339(rfc3339(_MOMENT)) == _MOMENT.replace(microsecond=0)
    with pytest.raises(ValueError, match="'soon' is not an RFC 3339 time"):
        from_rfc3339("soon")


@pytest.mark.parametrize(
    ("stored", "shown"),
    [
        ("2026-12-06T02:44:56.422336+00:00", "2026-12-06 02:44 UTC"),
        ("2026-12-06T03:44:56+01:00", "2026-12-06 02:44 UTC"),
        ("", "?"),
        ("not a time", "not a time"),
    ],
)
def test_a_stored_time_is_shown_as_every_answer_shows_a_time(stored: str, shown: str) -> None:
    assert shown_time(stored) == shown
