"""The HTTP transport: Slack's request signing, recorded payload shapes, roles, and rate limits."""

from __future__ import annotations

import json
import time
from pathlib import Path
from urllib.parse import parse_qsl, urlencode

import httpx
import pytest

from bot.demo import Demo

FIXTURES = Path(__file__).parent.parent / "fixtures" / "slack"


def _fixture_slash(demo: Demo, text: str, response_id: str) -> str:
    form = dict(parse_qsl((FIXTURES / "slash_command.form").read_text()))
    form.update(text=text, response_url=demo.slack.response_url(response_id))
    return urlencode(form)


def test_recorded_slash_command_payload_is_answered(demo: Demo) -> None:
    response = demo.user.post_signed(
        _fixture_slash(demo, "list --zone us-east5-a", "fx1"), "application/x-www-form-urlencoded"
    )
    assert response.status_code == 200
    reply = demo.slack.wait_for(lambda m: m.response_id == "fx1", timeout=20)
    assert reply is not None and "gemma4-qr" in reply.text


def test_recorded_app_mention_payload_is_answered(demo: Demo) -> None:
    payload = json.loads((FIXTURES / "app_mention.json").read_text())
    ts = f"{int(time.time())}.424242"
    payload["event"].update(text="<@U0LAN0Z89> vllm endpoint", ts=ts)
    response = demo.user.post_signed(json.dumps(payload), "application/json")
    assert response.status_code == 200
    reply = demo.slack.wait_for(lambda m: m.thread_ts == ts, timeout=20)
    assert reply is not None and "vLLM endpoint" in reply.text
    assert reply.channel == payload["event"]["channel"]


@pytest.mark.parametrize("case", ["unsigned", "wrong-signature", "stale"])
def test_bad_signatures_get_401(demo: Demo, case: str) -> None:
    body = _fixture_slash(demo, "list", "never")
    url = demo.server.url + "/slack/events"
    content_type = "application/x-www-form-urlencoded"
    if case == "unsigned":
        response = httpx.post(url, content=body, headers={"Content-Type": content_type})
    elif case == "wrong-signature":
        ts = str(int(time.time()))
        response = httpx.post(
            url,
            content=body,
            headers={
                "Content-Type": content_type,
                "X-Slack-Request-Timestamp": ts,
                "X-Slack-Signature": "v0=" + "0" * 64,
            },
        )
    else:
        response = demo.user.post_signed(body, content_type, timestamp=int(time.time()) - 301)
    assert response.status_code == 401
    time.sleep(0.3)
    assert not any(m.response_id == "never" for m in demo.slack.messages)


def test_healthz(demo: Demo) -> None:
    assert httpx.get(demo.server.url + "/healthz").status_code == 200


def test_rate_limited_reply_is_delivered_after_retry_after(demo: Demo) -> None:
    demo.slack.fail_next("response", status=429, retry_after=1)
    started = time.monotonic()
    out, answered = demo.user.run("/vllm endpoint", timeout=20)
    assert answered, out
    assert time.monotonic() - started >= 1.0


def test_roles_limit_who_may_read() -> None:
    with Demo(viewers=["U0SOMEONE1"], admins=[]) as restricted:
        out, answered = restricted.user.run("/tpu list", timeout=20)
        assert answered
        text = "\n".join(out)
        assert "needs the viewer role" in text and "gemma4-qr" not in text
    with Demo(viewers=["S0VIEWERS1"], admins=[]) as by_group:
        by_group.slack.usergroups["S0VIEWERS1"] = [by_group.user.user_id]
        out, _ = by_group.user.run("/tpu list", timeout=20)
        assert "gemma4-qr" in "\n".join(out)
