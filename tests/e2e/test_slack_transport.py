"""The HTTP transport: Slack's request signing, recorded payload shapes, roles, and rate limits."""

from __future__ import annotations

import json
import time
from pathlib import Path
from urllib.parse import parse_qsl, urlencode

import httpx
import pytest

from sim.demo import Demo

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
    demo.slack.join(payload["event"]["channel"])  # Slack sends app_mention only from channels the bot is in
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


def test_echoed_input_cannot_ping_the_channel(demo: Demo) -> None:
    _, answered = demo.user.run("@gemma-bot tpu describe &lt;!channel&gt;")
    assert answered
    reply = demo.slack.messages[-1]
    assert "<!channel>" not in reply.text and "&lt;!channel&gt;" in reply.text
    demo.user.run("@gemma-bot help &lt;!here&gt;")
    assert "<!here>" not in demo.slack.messages[-1].text


def test_huge_mention_still_gets_an_answer(demo: Demo) -> None:
    out, answered = demo.user.run("@gemma-bot " + "y" * 100_000)
    assert answered and "too long" in "\n".join(out)


def test_retried_event_is_answered_once(demo: Demo) -> None:
    ts = f"{int(time.time())}.777777"
    body = demo.user.mention_body("vllm endpoint", ts)
    for retry in (None, "1", "2"):
        headers_extra = {} if retry is None else {"X-Slack-Retry-Num": retry}
        assert demo.user.post_signed(body, "application/json", extra_headers=headers_extra).status_code == 200
    assert demo.slack.wait_for(lambda m: m.thread_ts == ts, timeout=20) is not None
    time.sleep(1.0)
    assert sum(1 for m in demo.slack.messages if m.thread_ts == ts) == 1


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        ("not json", "application/json"),
        ("[1, 2]", "application/json"),
        ("payload={bad", "application/x-www-form-urlencoded"),
    ],
)
def test_malformed_signed_bodies_get_400(demo: Demo, body: str, content_type: str) -> None:
    assert demo.user.post_signed(body, content_type).status_code == 400


def test_non_numeric_timestamp_is_401(demo: Demo) -> None:
    response = httpx.post(
        demo.server.url + "/slack/events",
        content="token=x",
        headers={"X-Slack-Request-Timestamp": "abc", "X-Slack-Signature": "v0=00"},
    )
    assert response.status_code == 401


def test_mention_with_non_text_is_answered(demo: Demo) -> None:
    payload = json.loads(demo.user.mention_body("x", "1.000001"))
    payload["event"]["text"] = None
    payload["event"]["ts"] = ts = f"{int(time.time())}.888888"
    assert demo.user.post_signed(json.dumps(payload), "application/json").status_code == 200
    assert demo.slack.wait_for(lambda m: m.thread_ts == ts, timeout=20) is not None


def test_app_home_shows_the_dashboard_and_open_alerts(demo: Demo) -> None:
    payload = json.loads(demo.user.mention_body("x", "1.000002"))
    payload["event"] = {
        "type": "app_home_opened",
        "user": demo.user.user_id,
        "channel": "D0DEMO0001",
        "tab": "home",
        "event_ts": f"{time.time():.6f}",
    }
    payload["event_id"] = "EvHOME0001"
    assert demo.user.post_signed(json.dumps(payload), "application/json").status_code == 200
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and demo.user.user_id not in demo.slack.home_views:
        time.sleep(0.1)
    view = demo.slack.home_views[demo.user.user_id]
    text = json.dumps(view)
    # The demo has two deployments, so Home shows the fleet (one deployment: the `/tpu status` dashboard).
    assert view["type"] == "home" and "Fleet: 2 deployments" in text and "Open alerts" in text
    assert "*production*" in text and "*staging*" in text
    assert len(view["blocks"]) <= 100
