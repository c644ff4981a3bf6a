"""What every API of the Google simulator shares: Google's error envelope, timestamp and duration formats,
pageSize/pageToken paging and request-body parsing (SIMULATED server side of the REST conventions the
client libraries expect: https://cloud.google.com/apis/design/errors, https://google.aip.dev/158)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

# HTTP status -> google.rpc.Code name, as in Google's error envelope.
STATUS_NAMES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    409: "ALREADY_EXISTS",
    412: "FAILED_PRECONDITION",
    429: "RESOURCE_EXHAUSTED",
    499: "CANCELLED",
    500: "INTERNAL",
    501: "NOT_IMPLEMENTED",
    502: "UNAVAILABLE",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}

DEFAULT_PAGE_SIZE = 50


class ApiError(Exception):
    """An HTTP error the simulator answers with, in the Google error envelope."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        status_name: str | None = None,
        details: list[dict[str, Any]] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.status_name = status_name  # e.g. FAILED_PRECONDITION, sent with HTTP 400
        self.details = details  # google.rpc error details, e.g. an ErrorInfo


def error_envelope(
    status: int, message: str, status_name: str | None = None, details: list[dict[str, Any]] | None = None
) -> dict[str, Any]:
    """The JSON body Google sends with an HTTP error: {"error": {code, message, status[, details]}}."""
    name = status_name or STATUS_NAMES.get(status, "UNKNOWN")
    error: dict[str, Any] = {"code": status, "message": message, "status": name}
    if details:
        error["details"] = details
    return {"error": error}


def rfc3339(value: datetime) -> str:
    """Format a timestamp as Google does: UTC, "Z" suffix, fractional seconds."""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def duration_json(value: timedelta) -> str:
    """Format a google.protobuf.Duration as JSON: "14400s"."""
    seconds = value.total_seconds()
    return f"{int(seconds)}s" if seconds == int(seconds) else f"{seconds:.6f}s"


def paginate(items: list[Any], query: dict[str, str], default_size: int) -> tuple[list[Any], str | None]:
    """Slice `items` by the pageSize/pageToken query parameters; returns (page, nextPageToken or None).

    Raises:
        ApiError: 400 for a malformed pageSize or pageToken.
    """
    try:
        size = int(query.get("pageSize") or 0) or default_size
        offset = int(query.get("pageToken") or 0)
    except ValueError:
        raise ApiError(400, "Invalid page size or page token.") from None
    if size < 0 or offset < 0 or offset > len(items):
        raise ApiError(400, "Invalid page token.")
    end = offset + size
    return items[offset:end], (str(end) if end < len(items) else None)


def json_or_text(raw: bytes) -> Any:
    """A request body as JSON when it parses, else as text (for the recorded request bodies)."""
    try:
        return json.loads(raw)
    except ValueError:
        return raw.decode(errors="replace")


def json_body(raw: bytes) -> dict[str, Any]:
    """The request's JSON object (an empty body is {}). Raises ApiError 400 for anything else."""
    if not raw:
        return {}
    try:
        body = json.loads(raw)
    except ValueError:
        raise ApiError(400, "Invalid JSON payload received.") from None
    if not isinstance(body, dict):
        raise ApiError(400, "Invalid JSON payload received. Expected an object.")
    return body


def enum_name(value: Any, ints: dict[int, str]) -> str:
    """An enum field given as a name (google-api-python-client) or an int (GAPIC REST)."""
    if isinstance(value, bool):
        raise ApiError(400, f"Invalid enum value {value!r}.")
    if isinstance(value, int):
        if value not in ints:
            raise ApiError(400, f"Invalid enum value {value}.")
        return ints[value]
    return str(value)
