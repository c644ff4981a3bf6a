"""How the planned log read sizes its sample (`ops.gcp.logplan.probe_estimate`): the probe's estimate follows
the window's size past the 1,000,000 entries where a 0.001 probe overflows its page, so the sample read
stays about `rest_entries` (20,000) whatever the window holds."""

from __future__ import annotations

import pytest

from ops.gcp.cloudlogs import PAGE_SIZE
from ops.gcp.logplan import PROBE_FRACTION, PROBE_REFINE, probe_estimate


def sample_size(window: int, rest_entries: int = 20_000, max_probes: int = 3) -> float:
    """The entries a sample sized from the probes would read, the probes seeing their expected counts."""
    fraction, estimate, probes = PROBE_FRACTION, None, 0
    while estimate is None:
        probes += 1
        expected = window * fraction
        found, overflowed = min(int(expected), PAGE_SIZE), expected > PAGE_SIZE
        estimate = probe_estimate(found, overflowed, fraction, last=probes >= max_probes)
        fraction /= PROBE_REFINE
    return window * min(1.0, rest_entries / estimate)


@pytest.mark.parametrize("window", [100_000, 999_000, 3_000_000, 10_000_000, 50_000_000])
def test_the_sample_is_about_rest_entries_at_any_size(window: int) -> None:
    assert sample_size(window) == pytest.approx(20_000, rel=0.02)


def test_an_overflowed_probe_asks_for_a_finer_one_until_the_last() -> None:
    assert probe_estimate(PAGE_SIZE, True, 0.001, last=False) is None
    assert probe_estimate(PAGE_SIZE, True, 0.001, last=True) == 2 * PAGE_SIZE / 0.001
    assert probe_estimate(0, False, 0.001, last=False) == 1 / 0.001
