"""Slack refusals of the alert channel: which ones stop the sending (the gateway's `refusal_of`, on real
slack_sdk errors), what the catalogue says for each, and how the state store keeps them and the alerts held
back meanwhile."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from slack_sdk.errors import SlackApiError
from slack_sdk.web.slack_response import SlackResponse
from sqlalchemy import create_engine

from bot.shared.diagnosis import refusal_lines
from bot.slack.gateway import Refusal, SlackDeliveryError, refusal_of
from bot.slack.render import to_mrkdwn
from ops.alerts.ledger import AlertLedger, subject_alert
from ops.alerts.outbox import ALL_CHANNELS, UNDELIVERED, AlertOutbox
from ops.diagnosis.notices import refusal_finding
from tests.cases import case_text

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def _api_error(body: dict[str, object]) -> SlackApiError:
    """The SlackApiError slack_sdk raises for Slack's answer `body` to chat.postMessage."""
    response = SlackResponse(
        client=None,
        http_verb="POST",
        api_url="https://slack.com/api/chat.postMessage",
        req_args={},
        data=body,
        headers={},
        status_code=200,
    )
    return SlackApiError("The request to the Slack API failed.", response)


@pytest.mark.parametrize(
    ("code", "family"),
    [
        ("is_archived", "slack-channel-archived"),
        ("channel_not_found", "slack-channel-not-found"),
        ("not_in_channel", "slack-not-in-channel"),
        ("invalid_auth", "slack-token-invalid"),
        ("token_revoked", "slack-token-invalid"),
        ("account_inactive", "slack-token-invalid"),
    ],
)
def test_each_refusal_stops_sending_and_has_its_family(code: str, family: str) -> None:
    refusal = refusal_of(_api_error({"ok": False, "error": code}))
    assert refusal is not None and refusal.code == code
    assert refusal.whole_token == (family == "slack-token-invalid")
    finding = refusal_finding(refusal.slack_text)
    assert finding is not None and finding.family == family


def test_missing_scope_keeps_the_needed_and_provided_scopes() -> None:
    body = {"ok": False, "error": "missing_scope", "needed": "chat:write", "provided": "commands,files:write"}
    wrapped = refusal_of(SlackDeliveryError("missing_scope", "chat:write", "commands,files:write"))
    refusal = refusal_of(_api_error(body))
    assert refusal == wrapped == Refusal("missing_scope", "chat:write", "commands,files:write")
    assert refusal is not None and not refusal.whole_token
    finding = refusal_finding(refusal.slack_text)
    assert finding is not None and finding.family == "slack-missing-scope"
    assert "chat:write" in finding.fix and "reinstall the app" in finding.fix
    assert "commands,files:write" in finding.cause


@pytest.mark.parametrize("code", ["ratelimited", "msg_too_long", "invalid_blocks", "internal_error"])
def test_what_sending_again_can_fix_is_not_a_refusal(code: str) -> None:
    assert refusal_of(_api_error({"ok": False, "error": code})) is None
    assert refusal_of(SlackDeliveryError(code)) is None
    assert refusal_of(TimeoutError("read timed out")) is None


@pytest.mark.parametrize(
    ("case", "family"),
    [
        ("slack-postmessage-is-archived.txt", "slack-channel-archived"),
        ("slack-missing-scope-chat-write.txt", "slack-missing-scope"),
    ],
)
def test_the_handed_slack_answers_are_the_same_families(case: str, family: str) -> None:
    """The wire text of a Refusal is the form the real reports show (slack_sdk's printout)."""
    text = case_text(case)
    finding = refusal_finding(text)
    assert finding is not None and finding.family == family


def test_the_line_names_the_channel_the_cause_the_fix_and_what_is_held() -> None:
    outbox = AlertOutbox(create_engine("sqlite://"), "production")
    assert refusal_lines(outbox) == []
    outbox.record("C0ALERTS01", "is_archived", now=NOW)
    for key in ("first", "second"):
        outbox.hold(key, "C0ALERTS01", "vLLM is down", [], now=NOW)
    (line,) = [to_mrkdwn(each) for each in refusal_lines(outbox)]
    assert "Alerts cannot reach <#C0ALERTS01>" in line and "archived" in line
    assert "unarchive the channel" in line and "ALERT_CHANNEL" in line
    assert "2 alerts held back" in line
    outbox.clear("C0ALERTS01")
    outbox.delivered("first", "C0ALERTS01", "1.000001")
    outbox.delivered("second", "C0ALERTS01", "1.000002")
    outbox.record(ALL_CHANNELS, "token_revoked", now=NOW)
    (token,) = refusal_lines(outbox)
    assert "any channel" in token and "SLACK_BOT_TOKEN" in token and "held back" not in token


def test_the_outbox_keeps_refusals_per_deployment_and_channel() -> None:
    engine = create_engine("sqlite://")
    outbox, other = AlertOutbox(engine, "production"), AlertOutbox(engine, "staging")
    first = outbox.record("C0ALERTS01", "not_in_channel", now=NOW)
    again = outbox.record("C0ALERTS01", "is_archived", now=NOW + timedelta(minutes=5))
    assert (first.attempts, again.attempts, again.code, again.since) == (1, 2, "is_archived", NOW)
    assert other.problems() == [] and outbox.problem("C0OTHER001") is None
    outbox.record(ALL_CHANNELS, "invalid_auth", now=NOW)
    problem = outbox.problem("C0OTHER001")
    assert problem is not None and problem.code == "invalid_auth"  # the token's refusal holds everywhere
    assert outbox.clear(ALL_CHANNELS) and outbox.clear("C0ALERTS01") and not outbox.clear("C0ALERTS01")


def test_a_held_alert_stays_claimed_until_delivered() -> None:
    engine = create_engine("sqlite://")
    ledger, outbox = AlertLedger(engine, "production"), AlertOutbox(engine, "production")
    alert = subject_alert("vllm:http://10.0.0.5:8000|vllm_down|1", "vllm_down", "vllm:x", "vLLM is down")
    assert ledger.claim(alert, "sending", now=NOW)
    outbox.hold(alert.key, "C0ALERTS01", "vLLM is down", [{"type": "divider"}], now=NOW)
    ledger.release(alert.key)  # a failed post elsewhere must not free a held claim
    assert not ledger.claim(alert, "sending", now=NOW)  # the next tick does not send it again
    row = ledger.get(alert.key)
    assert row is not None and row.status == UNDELIVERED
    (held,) = outbox.held("C0ALERTS01")
    assert (held.key, held.blocks, held.at) == (alert.key, [{"type": "divider"}], NOW)
    outbox.delivered(alert.key, "C0ALERTS01", "1.000001")
    row = ledger.get(alert.key)
    assert row is not None and (row.status, row.ts) == ("sent", "1.000001") and outbox.held() == []
