"""Compute Engine zone and region names: the one rule every module checks a zone against.

A zone id is `<region>-<letter>`, a region `<area>-<location><digits>`: "us-east5-a" is a zone of the region
"us-east5" (https://cloud.google.com/compute/docs/regions-zones#identifying_a_region_or_zone). The rule is
the id's shape, not a list: a zone Google adds later passes, and the API says whether it exists.
"""

from __future__ import annotations

from ops.errors import BadInput
from ops.linear import linear

__all__ = [
    "REGION_PATTERN",
    "ZONE_EXAMPLE",
    "ZONE_PATTERN",
    "check_zone",
    "is_region",
    "is_zone",
    "region_of",
]

REGION_PATTERN = r"[a-z]+-[a-z]+[0-9]+"
"""A region id without anchors ("us-east5"), to embed in a larger pattern."""

ZONE_PATTERN = rf"{REGION_PATTERN}-[a-z]"
"""A zone id without anchors ("us-east5-a"), to embed in a larger pattern."""

ZONE_EXAMPLE = "us-east5-a"
"""The zone the error messages give as an example."""

_ZONE = linear(rf"^(?P<region>{REGION_PATTERN})-[a-z]$")
_REGION = linear(rf"^{REGION_PATTERN}$")


def is_zone(word: object) -> bool:
    """Whether `word` is a string shaped like a zone id ("us-east5-a"); False for anything else."""
    return isinstance(word, str) and _ZONE.match(word) is not None


def is_region(word: object) -> bool:
    """Whether `word` is a string shaped like a region id ("us-east5"); False for a zone or anything else."""
    return isinstance(word, str) and _REGION.match(word) is not None


def check_zone(zone: object, *, backend: str = "") -> str:
    """`zone` itself when it is shaped like a zone id.

    Args:
        zone: the zone to check, e.g. "us-east5-a".
        backend: the backend named on the error ("tpu", "logging"), "" for none.

    Returns:
        `zone` unchanged.

    Raises:
        BadInput: `zone` is not a string of the form <area>-<location><digits>-<letter>.
    """
    if not is_zone(zone):
        raise BadInput(f"{zone!r} is not a zone", f"use a zone such as {ZONE_EXAMPLE}", backend=backend)
    assert isinstance(zone, str)
    return zone


def region_of(zone: str) -> str:
    """The region of a zone: "us-east5-a" -> "us-east5" (surrounding spaces ignored).

    Raises:
        BadInput: `zone` is not of the form <area>-<location><digits>-<letter>.
    """
    match = _ZONE.match(zone.strip()) if isinstance(zone, str) else None
    if not match:
        raise BadInput(f"malformed zone {zone!r}", f"expected e.g. {ZONE_EXAMPLE}")
    return str(match.group("region"))
