"""Times and durations: the one formatter and parser of each form the bot reads and writes.

Times are RFC 3339 timestamps (https://www.rfc-editor.org/rfc/rfc3339#section-5.6): the Google APIs (TPU,
Cloud Logging: google.protobuf.Timestamp in JSON, https://protobuf.dev/reference/protobuf/google.protobuf/#timestamp),
docker's `inspect` and the bot's own alert keys write times this way; the bot writes them in UTC with the
"Z" suffix.

Durations come in three forms: the bot's own word ("30s", "10m", "4h", "2d": command arguments and the
command lines it suggests), google.protobuf.Duration in JSON ("14400s", "1.5s": the TPU API's
`maxRunDuration` and `validUntilDuration`, https://protobuf.dev/reference/protobuf/google.protobuf/#duration),
and whole minutes for messages ("11 min", "1 h 5 min").
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from functools import lru_cache
from typing import Any

from ops.linear import linear

__all__ = [
    "DURATION_PATTERN",
    "MAX_DURATION",
    "duration_word",
    "from_rfc3339",
    "iso_utc",
    "minutes_text",
    "parse_duration",
    "parse_protobuf_duration",
    "parse_rfc3339",
    "protobuf_duration",
    "rfc3339",
    "utc_text",
]

_RFC3339 = linear(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$")


def rfc3339(moment: datetime, *, micros: bool = False) -> str:
    """`moment` in UTC as RFC 3339 with "Z": "2026-12-03T09:27:06Z", or "2026-12-03T09:27:06.250000Z".

    Args:
        moment: the time; an aware datetime is converted to UTC, a naive one is read as local time
            (`datetime.astimezone`).
        micros: keep the microseconds (six digits), e.g. for a Cloud Logging filter bound.

    Returns:
        The timestamp text, to the second unless `micros`.
    """
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ" if micros else "%Y-%m-%dT%H:%M:%SZ")


def iso_utc(moment: datetime | None) -> str:
    """`rfc3339(moment)` to the second, "-" for None: the form of alert keys and watcher state."""
    return "-" if moment is None else rfc3339(moment)


def utc_text(moment: datetime | None, *, seconds: bool = False) -> str:
    """A time as people read it in every answer: "2026-11-29 14:05 UTC" (in UTC, to the minute; with
    `seconds`, "2026-11-29 14:05:09 UTC", for log lines and for two times that may share a minute), "-"
    when unknown. RFC 3339 (`rfc3339`) stays for what machines read (button values, pins, alert keys)."""
    if moment is None:
        return "-"
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC" if seconds else "%Y-%m-%d %H:%M UTC")


def shown_time(text: str, *, seconds: bool = False) -> str:
    """A time the bot stored as text (a confirmation's pin: `datetime.isoformat()`, to the microsecond) as
    people read it: `utc_text`; "?" for an empty one; the text itself when it is not a time."""
    moment = parse_rfc3339(text) if text else None
    return utc_text(moment, seconds=seconds) if moment else (text or "?")


@lru_cache(maxsize=16_384)
def parse_rfc3339(text: str) -> datetime | None:
    """An RFC 3339 timestamp as an aware UTC datetime; None when `text` is not one.

    Args:
        text: e.g. "2026-12-03T09:27:06Z", "2026-12-03T09:27:06.123456789+02:00" (surrounding spaces
            ignored); fractions past microseconds (docker's and Google's nanoseconds) are cut, not rounded.

    Returns:
        The time in UTC, or None for text of another shape or an impossible date ("2026-02-30T...").
        Cached: listings carry the same create times again each minute, and a datetime is immutable.
    """
    match = _RFC3339.match(text.strip()) if isinstance(text, str) else None
    if not match:
        return None
    base, fraction, offset = match.groups()
    fraction = f".{fraction[:6].ljust(6, '0')}" if fraction else ""
    try:
        return datetime.fromisoformat(base + fraction + ("+00:00" if offset == "Z" else offset)).astimezone(
            UTC
        )
    except ValueError:
        return None


def from_rfc3339(text: str) -> datetime:
    """`parse_rfc3339(text)` for text the bot wrote itself (alert keys, watcher state), where anything else is
    a fault.

    Raises:
        ValueError: `text` is not an RFC 3339 timestamp; the message quotes it and gives an example.
    """
    parsed = parse_rfc3339(text)
    if parsed is None:
        raise ValueError(f"{text!r} is not an RFC 3339 time (e.g. 2026-12-03T09:27:06Z)")
    return parsed


# -- durations -----------------------------------------------------------------------------------------------

DURATION_PATTERN = r"^(\d+)([smhd])$"
"""The word form: a whole number and one unit, s, m, h or d."""

MAX_DURATION = timedelta(days=365)
"""The longest duration any argument takes (a mute, a valid-until, a max run; each command may allow less):
bounded, so a typed number never overflows a timedelta or a date computed from it."""

_DURATION = linear(DURATION_PATTERN)
_UNITS = (("d", 86400), ("h", 3600), ("m", 60), ("s", 1))
_UNIT_SECONDS = dict(_UNITS)
_PROTOBUF = linear(r"^(-?\d+(?:\.\d+)?)s$")


def parse_duration(word: str) -> timedelta:
    """A duration such as 30s, 10m, 4h or 2d.

    Args:
        word: a whole number and a unit (s, m, h, d), no spaces; "0m" is a zero duration.

    Returns:
        The duration, at most MAX_DURATION (365 days).

    Raises:
        ValueError: not a number and a unit, or longer than MAX_DURATION (never OverflowError); the message
            names the word and an example.
    """
    match = _DURATION.match(word)
    if not match:
        raise ValueError(f"{word!r} is not a duration (e.g. 10m, 4h, 2d)")
    digits, unit = match.group(1), match.group(2)
    seconds = int(digits) * _UNIT_SECONDS[unit] if len(digits) <= 12 else None
    if seconds is None or seconds > MAX_DURATION.total_seconds():
        raise ValueError(f"{word!r} is too long (at most {MAX_DURATION.days}d)")
    return timedelta(seconds=seconds)


def duration_word(delta: timedelta) -> str:
    """`delta` in the word form `parse_duration` reads, in the largest whole unit: "4h", "90m", "0s".

    Fractions of a second are dropped; a negative duration keeps its sign ("-5m"), which `parse_duration`
    refuses.
    """
    seconds = int(delta.total_seconds())
    for unit, size in _UNITS:
        if seconds and seconds % size == 0:
            return f"{seconds // size}{unit}"
    return "0s"


def protobuf_duration(delta: timedelta) -> str:
    """A google.protobuf.Duration in JSON, whole seconds (rounded): timedelta(hours=4) -> "14400s"."""
    return f"{round(delta.total_seconds())}s"


def parse_protobuf_duration(value: Any) -> timedelta | None:
    """A google.protobuf.Duration JSON string ("14400s", "1.5s") as a timedelta; None if not a string of
    that form (a missing field, "4h", a number)."""
    if not isinstance(value, str):
        return None
    match = _PROTOBUF.match(value.strip())
    return timedelta(seconds=float(match.group(1))) if match else None


def minutes_text(delta: timedelta, *, floor: bool = False, seconds_under_a_minute: bool = False) -> str:
    """`delta` in whole minutes for a message: "11 min", "1 h 5 min"; a negative duration reads as zero.

    Args:
        delta: the duration.
        floor: cut to the minute (how long something has been so, never more); else round to the nearest.
        seconds_under_a_minute: write less than a minute in seconds ("40 s") instead of "0 min"/"1 min".
    """
    if seconds_under_a_minute and delta < timedelta(minutes=1):
        return f"{max(0, int(delta.total_seconds()))} s"
    seconds = max(0.0, delta.total_seconds())
    total = int(seconds // 60) if floor else round(seconds / 60)
    hours, minutes = divmod(total, 60)
    return f"{hours} h {minutes} min" if hours else f"{minutes} min"
