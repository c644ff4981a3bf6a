"""Does this zone fit the request? Classification of a failed queued-resource create.

`classify` tells a failure that is permanent for a (zone, accelerator type, provisioning model) (the zone
does not offer the type or the model, the zone does not exist, the project has no quota there at all) from
a transient one (stockout, quota in use, rate limit, timeout, 5xx) and from one it cannot place (unknown:
never retried as if transient, never remembered), from the fault catalogue's `create:` families (Google's
texts; the real ones are in sim/cases/tpu-create-*.txt) and then from the typed errors of `ops.errors` and
status codes. The Google error mapping (`ops.gcp.google.create_error`) uses it to
type a create error; the capacity search (`ops.tpu.capacity`) uses it to decide which zones to remember as
not offering the request.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from ops.diagnosis import families as faults
from ops.diagnosis.wordings import wording
from ops.errors import (
    AlreadyExists,
    BackendTimeout,
    BackendUnavailable,
    BadInput,
    Cancelled,
    CapacityUnavailable,
    OpsError,
    PermissionDenied,
    QuotaExceeded,
    UnsupportedInZone,
)

__all__ = ["Classification", "classify"]

# Fault texts (stockout, quota, accelerator type / provisioning model / zone not offered) are families of
# the fault catalogue (ops/diagnosis/faults.yaml, `create:` entries); what is left here reads status codes,
# whose
# wordings are the catalogue's `wordings:` too (create-timeout, create-server-error, ...).


@dataclass(frozen=True)
class Classification:
    """What a create failure means for the capacity search.

    Attributes:
        kind: "permanent" (retrying the same request will fail the same way), "transient" (another try,
            later or elsewhere, may work) or "unknown" (neither the catalogue nor the status code says:
            not retried as transient, not remembered; the user is shown Google's text).
        reason: short words for people and for the zone memory: "accelerator not offered", "flex-start not
            offered", "zone unknown", "no quota in zone", "stockout", "quota exceeded", "API rate limit",
            "timeout", "server error", "permission denied", "bad request", "already exists", "cancelled",
            "quota or rate limit" (an HTTP 429 whose text is not catalogued), "unknown error".
        scope: "zone" (about this zone, type and provisioning model) or "request" (about the request or the
            credentials: every zone would fail the same way, so a search stops).
    """

    kind: Literal["permanent", "transient", "unknown"]
    reason: str
    scope: Literal["zone", "request"] = "zone"

    @property
    def retryable(self) -> bool:
        """True when another try, later or in another zone, may work (transient only, never unknown)."""
        return self.kind == "transient"

    @property
    def remember(self) -> bool:
        """True when the zone memory should keep it: permanent for this zone, type and model."""
        return self.kind == "permanent" and self.scope == "zone"


def classify(error: BaseException | str) -> Classification:
    """Classify a create failure (an exception, typically an `ops.errors.OpsError`, or a raw text).

    The text is matched first against the fault catalogue's families with a `create:` entry
    (ops/diagnosis/faults.yaml): permanent for the zone: the accelerator type is not offered there, the
    provisioning
    model (e.g. flex-start) is not offered for the type there, the zone is unknown, the project has no
    quota there at all ("Limit: 0"); transient: stockout, quota in use, API rate limit. Then the typed errors
    and status codes: permanent for the zone: UnsupportedInZone. Transient: stockout (an operation's code 8,
    CapacityUnavailable), timeouts (BackendTimeout), 5xx and connection failures (BackendUnavailable),
    AlreadyExists, Cancelled. Permanent for the whole request: PermissionDenied, and a
    BadInput/INVALID_ARGUMENT whose text names no zone problem. Unknown: an HTTP 429 (QuotaExceeded) whose
    text no family knows ("quota or rate limit": a quota of 0 and a per-minute limit read alike there), and
    anything else unrecognised.

    Args:
        error: the exception, or the text of an error (e.g. a gcloud or Terraform output, a
            `failedData.error.message`).

    Returns:
        A Classification (kind, reason, scope).
    """
    text = error if isinstance(error, str) else (error.message if isinstance(error, OpsError) else str(error))
    known = _catalogued(text)
    if known is not None and (known.kind == "permanent" or not isinstance(error, PermissionDenied)):
        return known
    if isinstance(error, UnsupportedInZone):
        return Classification("permanent", "not offered in zone")
    if isinstance(error, CapacityUnavailable):
        return Classification("transient", "stockout")
    if isinstance(error, PermissionDenied):
        return Classification("permanent", "permission denied", "request")
    if isinstance(error, AlreadyExists):
        return Classification("transient", "already exists")
    if isinstance(error, Cancelled):
        return Classification("transient", "cancelled")

    def says(name: str) -> bool:
        return wording(name).search(text) is not None

    if isinstance(error, BackendTimeout) or says("create-timeout"):
        return Classification("transient", "timeout")
    if isinstance(error, BackendUnavailable) or says("create-server-error") or says("create-server-status"):
        return Classification("transient", "server error")
    if isinstance(error, BadInput) or (isinstance(error, str) and says("create-bad-request")):
        return Classification("permanent", "bad request", "request")
    if isinstance(error, QuotaExceeded) or says("create-rate-limited"):
        return Classification("unknown", "quota or rate limit")
    if says("create-resource-exhausted"):
        return Classification("transient", "stockout")
    return Classification("unknown", "unknown error")


def _catalogued(text: str) -> Classification | None:
    """The classification of the most severe, most specific catalogue family with a `create:` entry."""
    matches = faults.catalogue().match(text, only_create=True)
    if not matches:
        return None
    best = max(matches, key=lambda m: (m.family.create["kind"] == "permanent", m.family.specificity))
    create = best.family.create
    reason = faults.fill(create["reason"], faults.figures(best.values))
    scope: Literal["zone", "request"] = "request" if create.get("scope") == "request" else "zone"
    kind: Literal["permanent", "transient"] = "permanent" if create["kind"] == "permanent" else "transient"
    return Classification(kind, reason, scope)
