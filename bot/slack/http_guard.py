"""The WSGI gate in front of Bolt on `/slack/events`: a request is authenticated before any of it is parsed.

Bolt's WSGI adapter (`slack_bolt.adapter.wsgi.SlackRequestHandler`) builds a `BoltRequest` first, and that
parses the body (`json.loads` of anything starting with `{`, of a form's `payload` field) before its
`RequestVerification` middleware checks the signature; a bad signature is then logged at INFO with the whole
body. So an unsigned request could cost a JSON parse, raise (HTTP 500: a non-numeric timestamp, a form body
starting with `{`, JSON nested past the recursion limit) and put megabytes into the log.

`SlackGate` does the check first, with only the two headers and the raw bytes:

1. the method is POST (405), `X-Slack-Request-Timestamp` is a whole number within five minutes of now and
   `X-Slack-Signature` is `v0=` + 64 hex digits (401), the body length is given and at most MAX_BODY_BYTES
   (411, 413);
2. the body is read (its declared length, no more) and its signature checked: HMAC-SHA256 of
   `v0:{timestamp}:{body}` with the signing secret, compared in constant time
   (https://docs.slack.dev/authentication/verifying-requests-from-slack/). The bytes themselves are signed,
   so nothing is decoded before this (slack_sdk's `SignatureVerifier` decodes them as UTF-8 first);
3. only then the shape Bolt will parse: a form or JSON content type (415), UTF-8 (400), a JSON object (or a
   form whose `payload` is one) nested at most MAX_JSON_DEPTH deep (400).

A refused request costs at most one read of its body and one HMAC; its log line gives the status, the
reason, the size and (when read) a SHA-256 prefix of the body, never the body; a flood of them is one line
per kind of refusal every REFUSAL_LOG_EVERY_S, counting the others. An accepted one is handed to
the wrapped app with its body put back, and Bolt verifies it again.
"""

from __future__ import annotations

import hashlib
import hmac
import io
import ipaddress
import json
import logging
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any
from urllib.parse import parse_qsl

log = logging.getLogger(__name__)

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]

# waitress refuses a larger body from its Content-Length before reading it (bot.slack.app.HttpServer); Slack's
# largest payloads (a modal's state) are far smaller.
MAX_BODY_BYTES = 1_000_000
# Slack's payloads nest about ten deep (a view's blocks and state); deeper JSON is no Slack request, and past
# the interpreter's recursion limit it would raise wherever it is walked.
MAX_JSON_DEPTH = 64
# "If the request timestamp is more than five minutes from local time, it could be a replay attack"
# (https://docs.slack.dev/authentication/verifying-requests-from-slack/).
MAX_SIGNATURE_AGE_S = 300
# A kind of refusal (status and reason) is logged at most once in this many seconds, with a count of the
# others: a flood of hostile requests must not become a flood of log lines.
REFUSAL_LOG_EVERY_S = 10.0
_HEX = frozenset("0123456789abcdef")
_CONTENT_TYPES = ("application/x-www-form-urlencoded", "application/json")


class Refused(Exception):
    """A request the gate answers itself: `status` ("401 Unauthorized") and a one-line `reason`."""

    def __init__(self, status: str, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class SlackGate:
    """WSGI middleware: refuses, with a 4xx and a one-line reason, every request to `app` that is not a
    Slack request signed with `signing_secret` (see the module docstring for the order of the checks).

    Args:
        app: the WSGI app of Bolt (`SlackRequestHandler`), called only for accepted requests.
        signing_secret: the app's signing secret; empty refuses every request.
        clock: seconds since the epoch (tests move it).
    """

    def __init__(self, app: WsgiApp, signing_secret: str, *, clock: Callable[[], float] = time.time) -> None:
        self._app = app
        self._secret = signing_secret.encode()
        self._clock = clock

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        try:
            body = self._signed_body(environ)
            _check_shape(environ, body)
        except Refused as refused:
            return plain(start_response, refused.status, refused.reason)
        environ["wsgi.input"] = io.BytesIO(body)
        environ["CONTENT_LENGTH"] = str(len(body))
        return self._app(environ, start_response)

    def _signed_body(self, environ: dict[str, Any]) -> bytes:
        """The body of a request signed with the secret, read only once the headers allow it.

        Raises:
            Refused: 405, 401, 411, 413 or 400 (a body shorter than its length).
        """
        if environ.get("REQUEST_METHOD") != "POST":
            raise Refused("405 Method Not Allowed", "POST only")
        timestamp = str(environ.get("HTTP_X_SLACK_REQUEST_TIMESTAMP", ""))
        signature = str(environ.get("HTTP_X_SLACK_SIGNATURE", ""))
        if not (0 < len(timestamp) <= 12 and timestamp.isascii() and timestamp.isdigit()):
            raise _unsigned("missing or malformed X-Slack-Request-Timestamp", environ)
        if not (len(signature) == 67 and signature.startswith("v0=") and set(signature[3:]) <= _HEX):
            raise _unsigned("missing or malformed X-Slack-Signature", environ)
        if abs(self._clock() - int(timestamp)) > MAX_SIGNATURE_AGE_S:
            raise _unsigned("X-Slack-Request-Timestamp is more than five minutes from now", environ)
        if not self._secret:
            raise _unsigned("no signing secret is configured", environ)
        declared = str(environ.get("CONTENT_LENGTH") or "")
        if not (declared.isascii() and declared.isdigit()):
            raise _refused("411 Length Required", "Content-Length missing or malformed", environ)
        length = int(declared)
        if length > MAX_BODY_BYTES:
            raise _refused("413 Payload Too Large", "body too large", environ)
        body = environ["wsgi.input"].read(length) if length else b""
        if len(body) != length:
            raise _refused("400 Bad Request", "body shorter than its Content-Length", environ, body)
        signed = b"v0:" + timestamp.encode() + b":" + body
        expected = "v0=" + hmac.new(self._secret, signed, hashlib.sha256).hexdigest()
        if not hmac.compare_digest(expected, signature):
            raise _unsigned("signature does not match", environ, body)
        return body


def _check_shape(environ: dict[str, Any], body: bytes) -> None:
    """Refuse a signed body Bolt could not parse: the wrong content type, not UTF-8, not a JSON object (or a
    form whose `payload` is not one), JSON nested deeper than MAX_JSON_DEPTH, a form starting with `{`
    (Bolt reads any body starting with `{` as JSON).

    Raises:
        Refused: 415 or 400.
    """
    content_type = str(environ.get("CONTENT_TYPE", "")).split(";", 1)[0].strip().lower()
    if content_type not in _CONTENT_TYPES:
        raise _refused("415 Unsupported Media Type", "a Slack request is a form or JSON", environ, body)
    try:
        text = body.decode()
        if content_type == "application/json":
            payload: Any = json.loads(text)
        elif text.startswith("{"):
            raise ValueError("a form body starting with {")
        else:
            # Bolt reads a form as its `payload` field when "payload" appears anywhere in the body.
            fields = dict(parse_qsl(text, keep_blank_values=True)) if "payload" in text else {}
            payload = fields.get("payload", {})
            if isinstance(payload, str):
                payload = json.loads(payload)
    except (ValueError, RecursionError):
        raise _refused("400 Bad Request", "body is not a Slack request", environ, body) from None
    if not isinstance(payload, dict) or _depth(payload) > MAX_JSON_DEPTH:
        raise _refused("400 Bad Request", "body is not a Slack request", environ, body)


def _depth(value: Any) -> int:
    """How deep containers nest in a parsed JSON value (an object holding a list: 2), without recursion."""
    deepest = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            deepest = max(deepest, depth)
            if depth <= MAX_JSON_DEPTH:  # deeper is refused anyway: walk no further
                children = item.values() if isinstance(item, dict) else item
                stack.extend((child, depth + 1) for child in children)
    return deepest


def _unsigned(reason: str, environ: dict[str, Any], body: bytes | None = None) -> Refused:
    return _refused("401 Unauthorized", reason, environ, body)


def _refused(status: str, reason: str, environ: dict[str, Any], body: bytes | None = None) -> Refused:
    """The Refused to raise, logged (`_REFUSALS`) as status, reason, size and a hash of the body, never the
    body itself (it may be megabytes, and it is the sender's text)."""
    code = status.split()[0]
    skipped = _REFUSALS.skipped_before(code, reason)
    if skipped is not None:
        size = len(body) if body is not None else str(environ.get("CONTENT_LENGTH") or "?")[:20]
        digest = f", sha256 {hashlib.sha256(body).hexdigest()[:16]}" if body else ""
        more = f"; {skipped} more like it in the last {REFUSAL_LOG_EVERY_S:.0f} s" if skipped else ""
        log.info("refused %s on /slack/events: %s (%s bytes%s)%s", code, reason, size, digest, more)
    return Refused(status, reason)


class RefusalLog:
    """When to log a kind of refusal: the first one, then one every `every_s`, each with the count of those
    not logged since (the kinds are this module's fixed reasons, so the table stays small)."""

    def __init__(
        self, every_s: float = REFUSAL_LOG_EVERY_S, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._every_s = every_s
        self._clock = clock
        self._lock = threading.Lock()
        self._kinds: dict[tuple[str, str], tuple[float, int]] = {}

    def skipped_before(self, status: str, reason: str) -> int | None:
        """None when this refusal is not to be logged, else how many of its kind were not since the last."""
        now = self._clock()
        with self._lock:
            logged_at, skipped = self._kinds.get((status, reason), (float("-inf"), 0))
            if now - logged_at < self._every_s:
                self._kinds[(status, reason)] = (logged_at, skipped + 1)
                return None
            self._kinds[(status, reason)] = (now, 0)
            return skipped


_REFUSALS = RefusalLog()


def plain(start_response: Callable[..., Any], status: str, text: str) -> list[bytes]:
    """A text/plain response of one line."""
    start_response(status, [("Content-Type", "text/plain; charset=utf-8")])
    return [text.encode() + b"\n"]


def metrics_refusal(environ: dict[str, Any], token: str | None) -> Refused | None:
    """Who may read `/metrics`: with a token configured (METRICS_TOKEN), a request carrying
    `Authorization: Bearer <token>` (compared in constant time); without one, only a client on the loopback
    interface (a scraper beside the bot, e.g. a sidecar), since the exposition tells command names, error
    counts and backends to anyone who asks.

    Returns:
        None when allowed, else the Refused (401 without the right token, 403 from another address).
    """
    if token:
        given = str(environ.get("HTTP_AUTHORIZATION", ""))
        scheme, _, credentials = given.partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(credentials.strip().encode(), token.encode()):
            return None
        return Refused("401 Unauthorized", "/metrics needs Authorization: Bearer <METRICS_TOKEN>")
    if _is_loopback(str(environ.get("REMOTE_ADDR", ""))):
        return None
    return Refused("403 Forbidden", "/metrics is served only on loopback unless METRICS_TOKEN is set")


def _is_loopback(address: str) -> bool:
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return False
    mapped = getattr(ip, "ipv4_mapped", None)
    return bool(ip.is_loopback or (mapped is not None and mapped.is_loopback))
