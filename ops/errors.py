"""Typed errors raised by `ops` and `llm`.

Every error carries a one-line `message` (what failed) and a `hint` (what to try). The Slack layer shows
both and never a traceback. Subclasses let callers (and the capacity search) tell transient failures from
permanent ones without parsing text.
"""

from __future__ import annotations


class OpsError(Exception):
    """Base class: an operation failed in a way the user should be told about.

    Args:
        message: one line naming what failed, e.g. "TPU API: 503 Service Unavailable".
        hint: one line on what to try next, e.g. "retry in a minute".
        backend: the backend involved ("tpu", "vllm", "ssh", "slack", "logging", ...), or "" if none.
    """

    def __init__(self, message: str, hint: str = "", *, backend: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.backend = backend

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


class BadInput(OpsError):
    """The request itself is wrong (unknown name format, out-of-range value)."""


class NotFound(OpsError):
    """The named resource does not exist."""


class PermissionDenied(OpsError):
    """The backend refused the credentials (HTTP 401/403), or the user lacks the role."""


class QuotaExceeded(OpsError):
    """A quota or rate limit was hit (HTTP 429, RESOURCE_EXHAUSTED on quota). Transient."""


class CapacityUnavailable(OpsError):
    """The zone has no capacity right now (stockout). Transient: another zone or later may work."""


class UnsupportedInZone(OpsError):
    """The zone does not offer this accelerator type or provisioning model. Permanent for that zone."""


class BackendUnavailable(OpsError):
    """The backend could not be reached or answered 5xx (connection refused, 503)."""


class BackendTimeout(OpsError):
    """The backend did not answer within the configured timeout."""


class AlreadyExists(OpsError):
    """A resource with that name already exists (HTTP 409): reported, never duplicated."""


class Cancelled(OpsError):
    """The user cancelled the operation."""
