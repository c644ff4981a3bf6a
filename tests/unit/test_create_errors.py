"""Create errors through the fault catalogue: what retrying cannot fix is permanent for the zone and
remembered, what the catalogue does not know is never counted as transient, the hint is the family's fix."""

from __future__ import annotations

import json

import httplib2
import pytest
from googleapiclient.errors import HttpError

from ops.diagnosis.zonefit import Classification, classify
from ops.errors import QuotaExceeded, UnsupportedInZone
from ops.gcp.google import create_error, operation_error

WHAT = "TPU API v2alpha1 queuedResources.create europe-west4-a/gemma4-eu"


def _http(status: int, message: str) -> HttpError:
    body = json.dumps({"error": {"code": status, "message": message}}).encode()
    return HttpError(httplib2.Response({"status": status}), body, uri="https://tpu.googleapis.com/v2alpha1/x")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        # The simulator's wording, Google's "exhausted" wording (marin-community/marin#87) with a limit of 0,
        # and the region quota of 0 (marin-community/marin#1612); preemptible quotas have their own family.
        (
            "HTTP 429: Quota 'TPUV6EPreemptiblePerProjectPerZoneForTPUAPI' exhausted. Limit 0 in zone "
            "europe-west4-a.",
            "no preemptible quota",
        ),
        (
            "Quota 'TPUV5sPreemptibleLitepodPerProjectPerRegionForTPUAPI' exhausted. Limit 0 in region "
            "us-west4",
            "no preemptible quota",
        ),
        (
            "HTTP 429: Quota limit 'TPUV6EPreemptiblePerProjectPerRegionForTPUAPI' has been exceeded. "
            "Limit: 0 in region us-east5.",
            "no preemptible quota",
        ),
        (
            "HTTP 429: Quota 'TPUV6EPerProjectPerZoneForTPUAPI' exhausted. Limit 0 in zone z.",
            "no quota in zone",
        ),
    ],
)
def test_a_quota_of_zero_is_permanent_for_the_zone_and_remembered(text: str, reason: str) -> None:
    verdict = classify(text)
    assert verdict == Classification("permanent", reason, "zone")
    assert verdict.remember and not verdict.retryable


def test_a_quota_in_use_and_a_rate_limit_are_transient() -> None:
    used = classify(
        "HTTP 429: Quota 'TPUV6EPreemptiblePerProjectPerZoneForTPUAPI' exhausted. Limit 64 in zone z."
    )
    assert used == Classification("transient", "quota exceeded", "zone") and used.retryable
    rate = classify("HTTP 429: Maximum number of CreateNode requests per minute exceeded")
    assert rate == Classification("transient", "API rate limit", "zone") and not rate.remember


@pytest.mark.parametrize("text", ["HTTP 429: Too Many Requests", "something nobody has seen"])
def test_what_the_catalogue_does_not_know_is_neither_transient_nor_remembered(text: str) -> None:
    verdict = classify(text)
    assert verdict.kind == "unknown" and not verdict.retryable and not verdict.remember


def test_a_429_of_quota_zero_becomes_a_zone_refusal_with_the_family_s_fix() -> None:
    error = create_error(
        _http(
            429,
            "Quota 'TPUV6EPreemptiblePerProjectPerZoneForTPUAPI' exhausted. Limit 0 in zone europe-west4-a.",
        ),
        WHAT,
    )
    assert isinstance(error, UnsupportedInZone)
    assert (
        "IAM & Admin > Quotas" in error.hint and "TPUV6EPreemptiblePerProjectPerZoneForTPUAPI" in error.hint
    )
    assert "retry" not in error.hint and "FAILED" not in error.hint  # nothing to free, nothing to wait for


def test_a_429_keeps_its_family_s_fix_and_an_unknown_one_is_not_told_to_retry() -> None:
    used = create_error(
        _http(429, "Quota 'TPUV6EPerProjectPerZoneForTPUAPI' exhausted. Limit 64 in zone z."), WHAT
    )
    assert isinstance(used, QuotaExceeded) and "request more quota" in used.hint
    rate = create_error(_http(429, "Maximum number of CreateNode requests per minute"), WHAT)
    assert isinstance(rate, QuotaExceeded) and "again in a minute" in rate.hint
    unknown = create_error(_http(429, "Resource has been exhausted (e.g. check quota)."), WHAT)
    assert isinstance(unknown, QuotaExceeded) and "does not know" in unknown.hint
    assert not unknown.hint.startswith("retry")


def test_an_operation_s_quota_of_zero_is_a_zone_refusal() -> None:
    error = operation_error(
        {
            "code": 8,
            "message": "Quota 'TPUV6EPreemptiblePerProjectPerZoneForTPUAPI' exceeded. Limit: 0 in zone z",
        },
        "TPU operation create x",
    )
    assert isinstance(error, UnsupportedInZone) and "IAM & Admin > Quotas" in error.hint
