"""The one zone and region rule (ops/tpu/model.py): shapes accepted and refused, and the errors' wording."""

from __future__ import annotations

import pytest

from ops.errors import BadInput
from ops.tpu.model import check_zone, is_region, is_zone, region_of


@pytest.mark.parametrize("zone", ["us-east5-a", "asia-northeast1-b", "europe-west4-c", "me-central2-b"])
def test_zones_accepted(zone: str) -> None:
    assert is_zone(zone) and not is_region(zone)
    assert check_zone(zone) == zone


@pytest.mark.parametrize(
    "word",
    ["us-east5", "us-east5-ab", "US-EAST5-A", "", "east", "us-east5-a\n", " us-east5-a", "$(id)", None, 5],
)
def test_not_zones_refused_with_an_example(word: object) -> None:
    assert not is_zone(word)
    with pytest.raises(BadInput) as err:
        check_zone(word, backend="tpu")
    assert repr(word) in err.value.message and "us-east5-a" in err.value.hint
    assert err.value.backend == "tpu"


def test_regions() -> None:
    assert is_region("us-east5") and is_region("asia-northeast1")
    assert not is_region("us-east5-a") and not is_region("us") and not is_region(None)


def test_region_of() -> None:
    assert region_of("us-east5-a") == "us-east5"
    assert region_of("asia-northeast1-b") == "asia-northeast1"
    assert region_of(" us-east5-a ") == "us-east5"
    for bad in ["us-east5", "us-east5-ab", "", "$(id)"]:
        with pytest.raises(BadInput, match="malformed zone"):
            region_of(bad)
