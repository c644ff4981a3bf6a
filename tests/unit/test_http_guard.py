"""The HTTP gate in front of Bolt (`bot.slack.app.SlackGate`): the signature is checked from two headers and
the raw bytes before anything is parsed; malformed requests get a 4xx; refusals are logged as size and hash,
never the body; /metrics access."""

from __future__ import annotations

import hashlib
import hmac
import io
import json
import logging
import time
from collections.abc import Callable, Iterable
from typing import Any

import pytest
from slack_sdk.signature import SignatureVerifier

from bot.slack import app as slack_app
from bot.slack.app import MAX_BODY_BYTES, MAX_JSON_DEPTH, RefusalLog, SlackGate, metrics_refusal

SECRET = "8f742231b10e8888abcd99yyyzzz85a5"
NOW = 1_800_000_000.0
FORM = b"command=%2Ftpu&text=list&trigger_id=1.2.3"


class Unreadable(io.BytesIO):
    """A request body that must not be read (the gate refused on the headers)."""

    def read(self, size: int | None = -1) -> bytes:
        raise AssertionError("the body was read")


def _call(environ: dict[str, Any]) -> tuple[str, bytes, list[dict[str, Any]]]:
    passed: list[dict[str, Any]] = []

    def app(env: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        passed.append({"body": env["wsgi.input"].read(), "length": env["CONTENT_LENGTH"]})
        start_response("200 OK", [])
        return [b"ok"]

    statuses: list[str] = []
    body = b"".join(SlackGate(app, SECRET, clock=lambda: NOW)(environ, lambda s, h: statuses.append(s)))
    return statuses[0], body, passed


def _request(
    body: bytes,
    *,
    content_type: str = "application/x-www-form-urlencoded",
    timestamp: str | None = None,
    signature: str | None = None,
    method: str = "POST",
    length: str | None = None,
    stream: io.BytesIO | None = None,
) -> dict[str, Any]:
    ts = timestamp if timestamp is not None else str(int(NOW))
    if signature is None:
        signature = _sign(SECRET, ts, body)
    return {
        "REQUEST_METHOD": method,
        "CONTENT_TYPE": content_type,
        "CONTENT_LENGTH": str(len(body)) if length is None else length,
        "HTTP_X_SLACK_REQUEST_TIMESTAMP": ts,
        "HTTP_X_SLACK_SIGNATURE": signature,
        "wsgi.input": stream if stream is not None else io.BytesIO(body),
    }


def _sign(secret: str, timestamp: str, body: bytes) -> str:
    """Slack's v0 signature of the raw bytes (slack_sdk's generator decodes them first, so it cannot sign
    a body that is not UTF-8)."""
    digest = hmac.new(secret.encode(), b"v0:" + timestamp.encode() + b":" + body, hashlib.sha256)
    return "v0=" + digest.hexdigest()


def test_the_signature_is_slack_sdks() -> None:
    assert _sign(SECRET, "1531420618", FORM) == SignatureVerifier(SECRET).generate_signature(
        timestamp="1531420618", body=FORM
    )


def _nested(depth: int) -> bytes:
    return ('{"a":' * depth + "1" + "}" * depth).encode()


def test_a_signed_form_passes_with_its_body_put_back() -> None:
    status, _, passed = _call(_request(FORM))
    assert status == "200 OK"
    assert passed == [{"body": FORM, "length": str(len(FORM))}]


@pytest.mark.parametrize(
    ("changes", "status"),
    [
        ({"timestamp": "12abc"}, "401"),
        ({"timestamp": ""}, "401"),
        ({"timestamp": "٣٣٣٣٣٣٣٣٣٣"}, "401"),  # digits to str.isdigit, not to int() in every locale
        ({"timestamp": "9" * 40}, "401"),
        ({"timestamp": str(int(NOW) - 301)}, "401"),
        ({"signature": ""}, "401"),
        ({"signature": "v0=" + "z" * 64}, "401"),
        ({"signature": "v1=" + "0" * 64}, "401"),
        ({"method": "GET"}, "405"),
        ({"length": "12x"}, "411"),
        ({"length": str(MAX_BODY_BYTES + 1)}, "413"),
    ],
)
def test_malformed_headers_are_refused_without_reading_the_body(changes: dict[str, str], status: str) -> None:
    environ = _request(FORM, stream=Unreadable(), **changes)
    got, text, passed = _call(environ)
    assert got.startswith(status) and passed == [] and text.strip()


def test_a_wrong_signature_is_refused_and_logged_as_size_and_hash(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(slack_app, "_REFUSALS", RefusalLog())
    body = json.dumps(
        {"text": "x\n2026-01-01 00:00:00,000 INFO bot.oncall.checks: audit action=auto-recover"}
    ).encode()
    with caplog.at_level(logging.INFO, logger="bot.slack.app"):
        status, _, passed = _call(_request(body, content_type="application/json", signature="v0=" + "0" * 64))
    assert status.startswith("401") and passed == []
    (record,) = caplog.records
    assert "audit" not in record.getMessage() and "sha256" in record.getMessage()
    assert f"{len(body)} bytes" in record.getMessage()


@pytest.mark.parametrize(
    ("body", "content_type", "status"),
    [
        (b"{not a form}", "application/x-www-form-urlencoded", "400"),  # Bolt would read it as JSON: a 500
        (b"payload=%7Bnot+json", "application/x-www-form-urlencoded", "400"),
        (b"payload=%5B1%5D", "application/x-www-form-urlencoded", "400"),  # a JSON list, not an object
        (b"[1, 2]", "application/json", "400"),
        (_nested(MAX_JSON_DEPTH + 1), "application/json", "400"),
        (_nested(100_000), "application/json", "400"),  # past the interpreter's recursion limit
        (b"\xff\xfe", "application/json", "400"),
        (b"text=x", "text/plain", "415"),
        (b"text=x", "", "415"),
    ],
)
def test_a_signed_body_bolt_could_not_parse_is_refused(body: bytes, content_type: str, status: str) -> None:
    got, _, passed = _call(_request(body, content_type=content_type))
    assert got.startswith(status) and passed == []


def test_nesting_up_to_the_limit_passes() -> None:
    status, _, passed = _call(_request(_nested(MAX_JSON_DEPTH - 1), content_type="application/json"))
    assert status == "200 OK" and passed


def test_a_body_shorter_than_its_length_is_refused() -> None:
    status, _, _ = _call(_request(FORM, length=str(len(FORM) + 10)))
    assert status.startswith("400")


def test_no_signing_secret_refuses_everything() -> None:
    body = FORM
    ts = str(int(time.time()))
    environ = _request(body, timestamp=ts, signature=_sign("x", ts, body))
    statuses: list[str] = []
    SlackGate(lambda e, s: [b""], "")(environ, lambda s, h: statuses.append(s))
    assert statuses[0].startswith("401")


@pytest.mark.parametrize(
    ("token", "environ", "status"),
    [
        (None, {"REMOTE_ADDR": "127.0.0.1"}, None),
        (None, {"REMOTE_ADDR": "::1"}, None),
        (None, {"REMOTE_ADDR": "::ffff:127.0.0.1"}, None),
        (None, {"REMOTE_ADDR": "10.0.0.5"}, "403"),
        (None, {"REMOTE_ADDR": "10.0.0.5", "HTTP_X_FORWARDED_FOR": "127.0.0.1"}, "403"),
        (None, {}, "403"),
        ("s3cret-token", {"REMOTE_ADDR": "127.0.0.1"}, "401"),
        ("s3cret-token", {"REMOTE_ADDR": "10.0.0.5", "HTTP_AUTHORIZATION": "Bearer wrong"}, "401"),
        ("s3cret-token", {"REMOTE_ADDR": "10.0.0.5", "HTTP_AUTHORIZATION": "Bearer s3cret-token"}, None),
        ("s3cret-token", {"REMOTE_ADDR": "10.0.0.5", "HTTP_AUTHORIZATION": "bearer s3cret-token"}, None),
    ],
)
def test_metrics_need_the_token_or_loopback(
    token: str | None, environ: dict[str, str], status: str | None
) -> None:
    refused = metrics_refusal(environ, token)
    assert (refused.status.split()[0] if refused else None) == status


def test_a_flood_of_refusals_is_one_line_per_kind_every_ten_seconds() -> None:
    now = [0.0]
    refusals = RefusalLog(every_s=10.0, clock=lambda: now[0])
    assert refusals.skipped_before("401", "signature does not match") == 0
    assert [refusals.skipped_before("401", "signature does not match") for _ in range(500)] == [None] * 500
    assert refusals.skipped_before("413", "body too large") == 0  # another kind: its own line
    now[0] = 10.0
    assert refusals.skipped_before("401", "signature does not match") == 500
