"""What the bot does with requests it has no listener for, and with a file a channel refuses.

- An unknown slash command gets a one-line answer; an unhandled request a one-line INFO log, never Bolt's
  WARNING with a Python suggestion (`@app.command("/foo")`).
- A chart in a channel the bot is not a member of is uploaded to the user's DM with the bot (the DM id from
  `conversations.open`: `files.completeUploadExternal` refuses a user id), and the ephemeral note says so.
"""

from __future__ import annotations

import json
import logging
import time
from datetime import UTC, datetime

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from sim.console import DEMO_USER
from sim.demo import Demo
from sim.slack import SlackSimulator


def test_unknown_slash_command_gets_one_short_line(demo: Demo, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    out, answered = demo.user.run("/foo bar")
    assert answered and out == ["[HTTP 200] `/foo` is not a command of this bot; try `/tpu help`."]
    assert any(
        r.name == "bot.slack.listeners" and r.levelno == logging.INFO and "/foo" in r.getMessage()
        for r in caplog.records
    )
    assert not any("@app." in r.getMessage() for r in caplog.records)
    listing, answered = demo.user.run("/tpu help")  # the real commands still reach their listeners
    assert answered and "/tpu list" in "\n".join(listing)


def test_an_unhandled_event_is_one_info_line(demo: Demo, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    body = json.loads(demo.user.mention_body("hi", f"{time.time():.6f}"))
    body["event"] = {"type": "reaction_added", "user": DEMO_USER, "reaction": "eyes"}
    response = demo.user.post_signed(json.dumps(body), "application/json")
    assert response.status_code == 404
    lines = [r for r in caplog.records if r.name == "bot.slack.listeners"]
    assert [r.levelno for r in lines] == [logging.INFO] and "reaction_added" in lines[0].getMessage()
    assert not any(r.levelno >= logging.WARNING and r.name.startswith("slack_bolt") for r in caplog.records)


def test_a_chart_the_channel_refuses_goes_to_the_users_dm(demo: Demo) -> None:
    demo.user.run("channel C0NOTJOIND")
    out, answered = demo.user.run("/vllm metrics --chart 1h")
    text = "\n".join(out)
    assert answered, text
    dm = demo.slack.dms[DEMO_USER]
    files = [m for m in demo.slack.messages if m.kind == "file"]
    assert [m.channel for m in files] == [dm] and files[0].content.startswith(b"\x89PNG")
    assert f"(in your DM with the app) [file {files[0].filename}:" in text
    assert f"so I sent the file `{files[0].filename}` to our direct messages instead" in text
    assert "/invite @gemma-bot" in text and "binary data not shown" not in text
    assert ("files.completeUploadExternal", "C0NOTJOIND", "not_in_channel") in demo.slack.refused


def test_simulated_slack_refuses_a_user_id_as_upload_channel_and_opens_dms() -> None:
    slack = SlackSimulator("xoxb-test").start()
    try:
        client = WebClient(token="xoxb-test", base_url=slack.api_url)
        with pytest.raises(SlackApiError) as refused:
            client.files_upload_v2(channel=DEMO_USER, content="hello", filename="a.txt")
        assert refused.value.response["error"] == "invalid_arguments"
        dm = client.conversations_open(users=DEMO_USER)["channel"]["id"]
        assert client.conversations_open(users=DEMO_USER)["channel"]["id"] == dm
        client.files_upload_v2(channel=dm, content="hello", filename="a.txt")
        assert [(m.kind, m.channel, m.content) for m in slack.messages] == [("file", dm, b"hello")]
        with pytest.raises(SlackApiError) as missing:
            client.api_call("conversations.open", params={})
        assert missing.value.response["error"] == "users_list_not_supplied"
    finally:
        slack.stop()


def test_an_admins_private_feedback_of_every_channel_is_never_uploaded_publicly(world: Demo) -> None:
    store = world.bot.runner._services.store
    now = datetime.now(UTC)
    for i in range(20):  # 20 ratings: too long for one message, so the whole text becomes a file
        answer_id = store.save_answer(
            f"secret question {i} about project falcon " + "x" * 120, "google/gemma-4-31B-it",
            ["describe gemma4-qr"], user_id="U0OTHER001", channel_id="G0PRIVATE1", now=now,
        )  # fmt: skip
        store.rate_answer(answer_id, "helpful", user_id="U0OTHER001", channel_id=None, now=now)
    start = len(world.slack.messages)
    out, answered = world.user.run("/gemma feedback")  # the demo user is an admin: every channel's
    text = "\n".join(out)
    assert answered and "shown only to you" in text, text
    dm = world.slack.dms[DEMO_USER]
    files = [m for m in world.slack.messages[start:] if m.kind == "file"]
    assert files and all(m.channel == dm for m in files), [(m.filename, m.channel) for m in files]
    assert any(b"secret question 19" in m.content for m in files), "the whole answer is in the DM"
    assert f"the whole answer is in `{files[0].filename}`, in our direct messages" in text
    shown = [m for m in world.slack.messages[start:] if m.kind != "file" and m.channel != dm]
    assert all(m.ephemeral for m in shown if "secret question" in m.render()), "only the admin saw it"
