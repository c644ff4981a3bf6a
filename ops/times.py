"""RFC 3339 timestamps (https://www.rfc-editor.org/rfc/rfc3339#section-5.6): the one formatter and parser.

The Google APIs (TPU, Cloud Logging: google.protobuf.Timestamp in JSON,
https://protobuf.dev/reference/protobuf/google.protobuf/#timestamp), docker's `inspect` and the bot's own
alert keys write times this way; the bot writes them in UTC with the "Z" suffix.
"""

from __future__ import annotations

from datetime import UTC, datetime
from functools import lru_cache

from ops.linear import linear

__all__ = ["from_rfc3339", "iso_utc", "parse_rfc3339", "rfc3339"]

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
