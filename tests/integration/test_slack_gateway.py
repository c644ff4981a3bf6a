"""The Slack gateway against the Slack simulator, through slack_sdk's real WebClient and WebhookClient.

1. Every kind of reply through every sender, with hostile text (mentions, links, tokens): no live mention or
   link reaches Slack but the ones the bot built, and no secret.
2. Every delivery failure ends with the user holding the whole answer (the handed cases in
   tests/fixtures/cases/slack-*.txt are parsed and replayed).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

import pytest

from bot.commands.context import Progress
from bot.oncall.scheduler import AlertScheduler
from bot.slack.gateway import Destination, SlackGateway, prepare
from bot.slack.limits import ACTIONS_ELEMENTS_LIMIT
from bot.slack.render import (
    Attachment,
    Reply,
    blocks_reply,
    cancel_button,
    code,
    confirm_buttons,
    context,
    error_reply,
    header,
    link,
    mention,
    section,
    text_reply,
)
from bot.slack.uploads import PARTS_LIMIT
from ops.alerts.ledger import Alert
from ops.store.state import Store
from sim.slack import Message, SlackSimulator, block_errors, unescape

CASES = Path(__file__).resolve().parents[1] / "fixtures" / "cases"
TOKEN = "xoxb-gateway-test-token"
CHANNEL = "C0GATEWAY1"
USER = "U0DEMOUSR1"

A36 = "aB3dE5fG7hI9jK1lM3nO5pQ7rS9tU1vW3xY5"
SECRETS = [
    "xoxb-1234567890-1234567890123-AbCdEfGhIjKlMnOp",
    "ghp_" + A36,
    "hunter2example",
    "AKIAIOSFODNN7EXAMPLE",
    "ya29.a0AfB_byC3xampleAccessTok3n",
    "s3cr3tPassw0rd",
]
HOSTILE = (
    "<!channel> <!here|here> <!everyone> <@U0EVIL0001> <#C0EVIL0001> <!subteam^S0EVIL|@oncall> "
    "<https://evil.example|Slack SSO login> <mailto:x@evil.example|mail> &lt;!channel&gt; a & b > c "
    f"token {SECRETS[0]} GITHUB_TOKEN={SECRETS[1]} password=hunter2example {SECRETS[3]} "
    f"Authorization: Bearer {SECRETS[4]} VLLM_BASE_URL=http://user:{SECRETS[5]}@10.0.0.2:8000"
)
# What the bot itself makes live in these replies.
BOT_BUILT = {f"@{USER}", "https://docs.slack.dev/|the docs"}


def _reply_kinds() -> dict[str, Callable[[str], Reply]]:
    return {
        "text": lambda h: text_reply(
            f"{mention(USER)} asked ({link('https://docs.slack.dev/', 'the docs')}): {h}"
        ),
        "blocks": lambda h: blocks_reply(
            [
                header(h),
                section(h),
                context(h),
                {
                    "type": "section",
                    "fields": [{"type": "mrkdwn", "text": h}, {"type": "plain_text", "text": h}],
                },
            ]
        ),
        "error": lambda h: error_reply(h, h),
        "code": lambda h: text_reply("Log:\n" + code(h)),
        "long": lambda h: text_reply("\n".join([h] * 120)),
        "many_blocks": lambda h: blocks_reply([section(h) for _ in range(70)]),
        "confirm": lambda h: Reply(
            text=f"Confirm: {h}", blocks=[section(h), confirm_buttons("tok123", h, expires_in="5m")]
        ),
        "progress": lambda h: Reply(text=h, blocks=[section(h), cancel_button("op1")]),
        "with_file": lambda h: Reply(
            text=h, blocks=[section(h)], files=[Attachment("log.txt", h * 3, "Log")]
        ),
    }


REPLY_KINDS = _reply_kinds()


@pytest.fixture(scope="module")
def slack() -> Iterator[SlackSimulator]:
    sim = SlackSimulator(TOKEN, channels=[CHANNEL]).start()
    yield sim
    sim.stop()


@pytest.fixture
def gateway(slack: SlackSimulator) -> SlackGateway:
    return SlackGateway.connect(TOKEN, slack.api_url)


def _alert_sender(tmp_path: Path) -> Callable[[SlackGateway, SlackSimulator, Reply], None]:
    def send(gateway: SlackGateway, slack: SlackSimulator, reply: Reply) -> None:
        services = SimpleNamespace(
            store=Store(f"sqlite:///{tmp_path / 'alerts.db'}"), now=lambda: datetime.now(UTC)
        )
        scheduler = AlertScheduler.build(cast(Any, services), gateway, CHANNEL, vllm_checks=False)
        alert = Alert(
            "k|vllm_down|", "vllm_down", "vllm:x", "", "", reply.text, text=reply.text, buttons=True
        )
        scheduler.delivery.post(alert, None, datetime.now(UTC))

    return send


def _progress(gateway: SlackGateway, slack: SlackSimulator, reply: Reply) -> None:
    progress = Progress(gateway, CHANNEL, None, min_interval_s=0)
    progress.update(reply)
    progress.finish(reply, user_id=USER)


def _update(gateway: SlackGateway, slack: SlackSimulator, reply: Reply) -> None:
    ts = gateway.post(CHANNEL, text_reply(":hourglass_flowing_sand: working"))
    gateway.update(CHANNEL, ts, reply)


def _response(**kw: Any) -> Callable[[SlackGateway, SlackSimulator, Reply], None]:
    def send(gateway: SlackGateway, slack: SlackSimulator, reply: Reply) -> None:
        gateway.deliver(reply, Destination(CHANNEL, USER, response_url=slack.response_url("hostile"), **kw))

    return send


SENDERS: dict[str, Callable[..., Any]] = {
    "post": lambda g, s, r: g.post(CHANNEL, r),
    "thread": lambda g, s, r: g.post(CHANNEL, r, thread_ts="1.000001"),
    "update": _update,
    "ephemeral": lambda g, s, r: g.ephemeral(CHANNEL, USER, r),
    "response_url": _response(),
    "response_url_replace": _response(replace=True),
    "response_url_ephemeral": _response(ephemeral=True),
    "progress": _progress,
    "alert": "alert",
    "app_home": lambda g, s, r: g.publish_home(USER, r.blocks),
    "modal": lambda g, s, r: g.open_modal(
        s.issue_trigger(),
        {"type": "modal", "title": {"type": "plain_text", "text": "Form"}, "blocks": r.blocks},
    ),
    "upload": lambda g, s, r: g.upload(CHANNEL, Attachment("answer.txt", r.text, "Answer")),
}


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def _wire_texts(messages: list[Message], views: list[dict[str, Any]]) -> list[str]:
    """Every text Slack would parse: message texts and every string in blocks and views."""
    texts: list[str] = []
    for m in messages:
        if m.kind != "file":
            texts.append(m.text)
            texts.extend(_strings(m.blocks))
    for view in views:
        texts.extend(_strings(view.get("blocks", [])))
    return texts


@pytest.mark.parametrize("kind", sorted(REPLY_KINDS))
@pytest.mark.parametrize("sender", sorted(SENDERS))
def test_hostile_text_never_turns_live_and_secrets_never_leave(
    slack: SlackSimulator, gateway: SlackGateway, tmp_path: Path, sender: str, kind: str
) -> None:
    start = len(slack.messages)
    slack.home_views.pop(USER, None)
    send = _alert_sender(tmp_path) if SENDERS[sender] == "alert" else SENDERS[sender]
    send(gateway, slack, REPLY_KINDS[kind](HOSTILE))
    messages = slack.messages[start:]
    views = [v for v in [slack.home_views.get(USER)] if v] + [m.view for m in messages if m.view]
    texts = _wire_texts(messages, views)
    files = [m.content.decode() for m in messages if m.kind == "file"]
    assert texts or files, "nothing was delivered"
    for text in texts:
        live = {token for token in re.findall(r"<([^<>]*)>", text)}
        assert live <= BOT_BUILT, f"live tokens the bot did not build: {live - BOT_BUILT}"
        assert "\ue000" not in text and "\ue001" not in text
    for text in texts + files:
        for secret in SECRETS:
            assert secret not in text
    for m in messages:  # a view holds up to 100 blocks, a message 50
        errors = block_errors(m.blocks[:50]) + (["over 100 blocks"] if len(m.blocks) > 100 else [])
        assert not errors if m.kind == "modal" else not block_errors(m.blocks)


def test_the_mentions_the_bot_builds_stay_live(slack: SlackSimulator, gateway: SlackGateway) -> None:
    gateway.post(CHANNEL, text_reply(f"Requested by {mention(USER)} in <@{USER}>"))
    message = slack.messages[-1]
    assert message.text == f"Requested by <@{USER}> in &lt;@{USER}&gt;"


# ---- delivery failures


def _whole_answer_held(messages: list[Message], answer: str) -> bool:
    """Whether the user can read all of `answer` in one message or one file among `messages`."""
    texts = [unescape(m.text) for m in messages] + [m.content.decode() for m in messages if m.kind == "file"]
    texts += [
        "\n".join(unescape(b["text"]["text"]) for b in m.blocks if b.get("type") == "section")
        for m in messages
    ]
    return any(answer in text for text in texts)


LONG_ANSWER = "\n".join(
    f"line {i:03d}: the queued resource gemma4-qr is ACTIVE in us-east5-a" for i in range(90)
)


def _case_errors(name: str) -> list[tuple[str, str]]:
    """(error, Web API method) pairs in a handed case file."""
    text = (CASES / name).read_text()
    return re.findall(r"'error': '(\w+)'\}\s+\(url: \.\.\./api/([\w.]+)\)", text)


def test_the_cases_are_parsed() -> None:
    assert _case_errors("slack-msg-too-long.txt") == [
        ("msg_too_long", "chat.update"),
        ("msg_blocks_too_long", "chat.postMessage"),
    ]


@pytest.mark.parametrize(("error", "method"), _case_errors("slack-msg-too-long.txt"))
def test_too_long_ends_with_a_short_message_and_the_whole_answer_as_a_file(
    slack: SlackSimulator, gateway: SlackGateway, error: str, method: str
) -> None:
    progress = Progress(gateway, CHANNEL, None, min_interval_s=0)
    if method == "chat.update":
        progress.update(Reply(text=":hourglass_flowing_sand: searching", blocks=[cancel_button("op")]))
    start = len(slack.messages)
    slack.fail_next(method, error=error, status=200)
    progress.finish(text_reply(LONG_ANSWER), user_id=USER)
    messages = slack.messages[start:]
    assert _whole_answer_held(messages, LONG_ANSWER)
    last_message = [m for m in slack.messages if m.kind in ("post", "update") and m.ts == progress.ts][-1]
    assert not last_message.in_progress, "the progress message stayed on pending"
    assert any(m.kind == "file" for m in messages)


@pytest.mark.parametrize("error", ["expired_url", "used_url"])
@pytest.mark.parametrize("ephemeral", [False, True])
def test_a_refused_response_url_falls_back_to_the_channel_or_an_ephemeral_message(
    slack: SlackSimulator, gateway: SlackGateway, error: str, ephemeral: bool
) -> None:
    case = (CASES / "slack-response-url-expired.txt").read_text()
    assert "404" in case and "expired_url" in case
    start = len(slack.messages)
    slack.fail_next("response", error=error, status=404)
    answer = f"Answer after {error}: vLLM is healthy"
    to = Destination(CHANNEL, USER, "1.000001", slack.response_url("gone"), ephemeral=ephemeral)
    gateway.deliver(text_reply(answer), to)
    messages = slack.messages[start:]
    assert _whole_answer_held(messages, answer)
    (message,) = messages
    assert message.kind == ("ephemeral" if ephemeral else "post")
    assert message.thread_ts == "1.000001"


def test_a_long_answer_through_an_expired_response_url_keeps_its_file(
    slack: SlackSimulator, gateway: SlackGateway
) -> None:
    start = len(slack.messages)
    slack.fail_next("response", error="expired_url", status=404)
    gateway.deliver(
        text_reply(LONG_ANSWER * 2), Destination(CHANNEL, USER, response_url=slack.response_url("x"))
    )
    assert _whole_answer_held(slack.messages[start:], LONG_ANSWER * 2)


def test_a_channel_the_bot_is_not_in_gets_an_ephemeral_answer(
    slack: SlackSimulator, gateway: SlackGateway
) -> None:
    start = len(slack.messages)
    slack.fail_next("chat.postMessage", error="not_in_channel", status=200)
    gateway.deliver(text_reply("the answer"), Destination(CHANNEL, USER))
    (message,) = slack.messages[start:]
    assert message.kind == "ephemeral" and "the answer" in message.text


def test_a_refused_edit_posts_the_final_state_and_closes_the_old_message(
    slack: SlackSimulator, gateway: SlackGateway
) -> None:
    progress = Progress(gateway, CHANNEL, None, min_interval_s=0)
    progress.update(Reply(text=":hourglass_flowing_sand: creating", blocks=[cancel_button("op")]))
    first_ts = progress.ts
    start = len(slack.messages)
    slack.fail_next("chat.update", error="cant_update_message", status=200)
    progress.finish(text_reply("created gemma4-qr"), user_id=USER)
    messages = slack.messages[start:]
    assert _whole_answer_held(messages, "created gemma4-qr")
    closed = [m for m in messages if m.kind == "update" and m.ts == first_ts]
    assert closed and not closed[-1].in_progress


def test_a_failed_upload_is_posted_as_text(slack: SlackSimulator, gateway: SlackGateway) -> None:
    start = len(slack.messages)
    slack.fail_next("files.getUploadURLExternal", error="not_allowed_token_type", status=200)
    gateway.upload(CHANNEL, Attachment("logs.txt", "line one\nline two", "Logs"), thread_ts="1.000002")
    (message,) = slack.messages[start:]
    assert "line one\nline two" in unescape(message.text) and message.thread_ts == "1.000002"


def test_ratelimited_is_retried_not_dropped(slack: SlackSimulator, gateway: SlackGateway) -> None:
    case = (CASES / "slack-ratelimited.txt").read_text()
    assert "'error': 'ratelimited'" in case and "chat.postMessage" in case
    start = len(slack.messages)
    slack.fail_next("chat.postMessage", error="ratelimited", status=429, retry_after=1)
    gateway.post(CHANNEL, text_reply("delivered after Retry-After"))
    (message,) = slack.messages[start:]
    assert message.text == "delivered after Retry-After"


def test_too_many_elements_are_never_sent(slack: SlackSimulator, gateway: SlackGateway) -> None:
    case = (CASES / "slack-invalid-blocks.txt").read_text()
    limit = int(re.search(r"no more than (\d+) items", case).group(1))  # type: ignore[union-attr]
    assert limit == ACTIONS_ELEMENTS_LIMIT
    buttons = {
        "type": "actions",
        "elements": [
            {
                "type": "button",
                "action_id": f"b{i}",
                "text": {"type": "plain_text", "text": f"{i}"},
                "value": "v",
            }
            for i in range(limit + 5)
        ],
    }
    prepared = prepare(Reply(text="choose", blocks=[section("choose"), buttons]))
    assert not block_errors(prepared.blocks)
    gateway.post(CHANNEL, Reply(text="choose", blocks=[section("choose"), buttons]))
    assert not block_errors(slack.messages[-1].blocks)


# ---- a cut answer's file: said only once uploaded


def _cut_answer() -> Reply:
    """An answer over Slack's block text limit: cut, its whole text a file."""
    return blocks_reply([section(f"deployment {i:02d} " + "x" * 400) for i in range(50)])


def _notes(message: Message) -> str:
    return "\n".join(
        str(e.get("text"))
        for b in message.blocks
        if b.get("type") == "context"
        for e in b.get("elements", [])
    )


@pytest.mark.parametrize("sender", ["post", "response_url", "progress"])
def test_a_cut_answer_names_its_file_only_after_the_upload(
    slack: SlackSimulator, gateway: SlackGateway, sender: str
) -> None:
    start = len(slack.messages)
    send = SENDERS[sender]
    send(gateway, slack, _cut_answer())
    messages = slack.messages[start:]
    files = [i for i, m in enumerate(messages) if m.kind == "file"]
    (answer,) = [i for i, m in enumerate(messages) if "the whole answer is in `answer.txt`" in _notes(m)]
    assert len(files) == 1, "one file holds the whole answer"
    assert files[0] < answer, "the note named the file before its upload was done"
    assert "deployment 49" in messages[files[0]].content.decode()


def test_a_cut_answer_whose_upload_failed_says_so_and_its_text_follows(
    slack: SlackSimulator, gateway: SlackGateway
) -> None:
    start = len(slack.messages)
    slack.fail_next("files.getUploadURLExternal", error="not_allowed_token_type", status=200)
    gateway.post(CHANNEL, _cut_answer())
    messages = slack.messages[start:]
    answer, *parts = messages
    assert "upload of the whole answer as `answer.txt` failed (Slack: `not_allowed_token_type`)" in (
        _notes(answer)
    )
    assert "it follows in parts" in _notes(answer) and len(parts) > 1
    assert not any(m.kind == "file" for m in messages)
    assert not any("the whole answer is in" in m.render() for m in messages)
    assert "deployment 49 " in unescape(parts[-1].text)


def test_an_intermediate_progress_state_that_is_cut_names_no_file(
    slack: SlackSimulator, gateway: SlackGateway
) -> None:
    start = len(slack.messages)
    Progress(gateway, CHANNEL, None, min_interval_s=0).update(_cut_answer())
    (message,) = slack.messages[start:]
    assert "Longer than Slack allows in one message; cut here." in _notes(message)


def test_a_cut_answer_whose_file_the_channel_refused_says_it_went_to_the_dm(
    slack: SlackSimulator, gateway: SlackGateway
) -> None:
    start = len(slack.messages)
    slack.fail_next("files.completeUploadExternal", error="not_in_channel", status=200)
    gateway.deliver(_cut_answer(), Destination(CHANNEL, USER))
    messages = slack.messages[start:]
    (file,) = [m for m in messages if m.kind == "file"]
    (answer,) = [m for m in messages if m.kind == "post"]
    assert file.channel == slack.dms[USER] and messages.index(file) < messages.index(answer)
    assert "the whole answer is in `answer.txt`, in our direct messages (refused here: `not_in_channel`)" in (
        _notes(answer)
    )


# ---- a private reply (ephemeral, an ephemeral response_url, a DM): nothing of it where others see it

SECRET = "project falcon's secret question"


def _private_progress(gateway: SlackGateway, slack: SlackSimulator, reply: Reply) -> None:
    progress = Progress(gateway, CHANNEL, "1.000003", min_interval_s=0)
    progress.update(Reply(text=":hourglass_flowing_sand: reading", blocks=[cancel_button("op")]))
    progress.finish(replace(reply, ephemeral=True), user_id=USER)


def _refused_then(method: str, error: str, status: int = 200) -> Callable[..., None]:
    def send(gateway: SlackGateway, slack: SlackSimulator, reply: Reply) -> None:
        slack.fail_next(method, error=error, status=status)
        gateway.deliver(
            reply, Destination(CHANNEL, USER, "1.000003", slack.response_url("private"), ephemeral=True)
        )

    return send


PRIVATE_SENDERS: dict[str, Callable[..., None]] = {
    "ephemeral_in_thread": lambda g, s, r: g.ephemeral(CHANNEL, USER, r, thread_ts="1.000003"),
    "response_url_ephemeral": _response(ephemeral=True),
    "response_url_expired": _refused_then("response", "expired_url", 404),
    "response_too_long": _refused_then("response", "msg_too_long", 400),
    "ephemeral_refused_so_dm": lambda g, s, r: (
        s.fail_next("chat.postEphemeral", error="channel_not_found", status=200),
        g.ephemeral(CHANNEL, USER, r, thread_ts="1.000003"),
    ),
    "ephemeral_too_long": lambda g, s, r: (
        s.fail_next("chat.postEphemeral", error="msg_too_long", status=200),
        g.ephemeral(CHANNEL, USER, r),
    ),
    "progress": _private_progress,
}
PRIVATE_REPLIES: dict[str, Callable[[], Reply]] = {
    "with_file": lambda: Reply(
        text="the ratings", blocks=[section("the ratings")], files=[Attachment("ratings.txt", SECRET, "")]
    ),
    "cut": lambda: blocks_reply([section(f"{SECRET} {i:02d} " + "x" * 400) for i in range(50)]),
}


def _seen_by_others(messages: list[Message], dm: str) -> list[str]:
    """What of `messages` someone other than USER can see: files outside USER's DM, and messages that are
    neither ephemeral nor in that DM (a DM post to USER's id lands there too)."""
    return [
        m.content.decode(errors="replace") if m.kind == "file" else m.render()
        for m in messages
        if m.channel not in (dm, USER) and (m.kind == "file" or not m.ephemeral)
    ]


@pytest.mark.parametrize("kind", sorted(PRIVATE_REPLIES))
@pytest.mark.parametrize("sender", sorted(PRIVATE_SENDERS))
def test_a_private_reply_puts_nothing_where_others_see_it(
    slack: SlackSimulator, gateway: SlackGateway, sender: str, kind: str
) -> None:
    start = len(slack.messages)
    PRIVATE_SENDERS[sender](gateway, slack, PRIVATE_REPLIES[kind]())
    messages = slack.messages[start:]
    dm = slack.dms[USER]
    assert not [text for text in _seen_by_others(messages, dm) if SECRET in unescape(text)]
    files = [m for m in messages if m.kind == "file"]
    assert files and {m.channel for m in files} == {dm}, "the file went to the user's DM"
    said = [m for m in messages if m.kind != "file" and "in our direct messages" in m.render().lower()]
    assert said and messages.index(files[0]) < messages.index(said[0]), "said where it went, once there"
    if kind == "cut":
        assert SECRET + " 49" in files[0].content.decode()


def test_a_private_reply_whose_dm_cannot_be_opened_follows_privately_in_parts(
    slack: SlackSimulator, gateway: SlackGateway
) -> None:
    start = len(slack.messages)
    slack.fail_next("conversations.open", error="missing_scope", status=200)
    gateway.ephemeral(CHANNEL, USER, PRIVATE_REPLIES["with_file"](), thread_ts="1.000003")
    messages = slack.messages[start:]
    assert not any(m.kind == "file" for m in messages)
    assert not _seen_by_others(messages, slack.dms.get(USER, "-"))
    assert any(SECRET in unescape(m.text) and m.ephemeral for m in messages), "the file's text, privately"


def test_a_private_answer_closes_the_shared_progress_message_without_it(
    slack: SlackSimulator, gateway: SlackGateway
) -> None:
    start = len(slack.messages)
    _private_progress(gateway, slack, text_reply(SECRET))
    messages = slack.messages[start:]
    (closed,) = [m for m in messages if m.kind == "update"]
    assert "shown only to the person who asked" in closed.render() and not closed.in_progress
    (answer,) = [m for m in messages if SECRET in unescape(m.text)]
    assert answer.kind == "ephemeral" and answer.thread_ts == "1.000003"


def test_a_file_longer_than_the_parts_limit_names_the_parts_left(
    slack: SlackSimulator, gateway: SlackGateway
) -> None:
    start = len(slack.messages)
    slack.fail_next("files.getUploadURLExternal", error="not_allowed_token_type", status=200)
    lines = "\n".join(f"line {i:05d} " + "y" * 60 for i in range(3000))  # about 80 parts
    gateway.upload(CHANNEL, Attachment("big.txt", lines, "Big"))
    *parts, last = slack.messages[start:]
    assert len(parts) == PARTS_LIMIT and all(m.thread_ts == parts[0].ts for m in parts[1:])
    assert all(unescape(m.text).rstrip("`").endswith("\n") for m in parts), "cut at line ends"
    total = int(re.search(r"\(1/(\d+)\)", parts[0].text).group(1))  # type: ignore[union-attr]
    assert f"Parts {PARTS_LIMIT + 1}-{total} of `big.txt` were not posted (at most {PARTS_LIMIT}" in last.text
    assert "run the command again for the whole answer" in last.text and last.thread_ts == parts[0].ts


# ---- a progress message's final reply: each file once, the progress message always in a final state


def _final_states(messages: list[Message]) -> dict[str, Message]:
    """ts -> the last state of each bot message posted among `messages` (a post, its edits, its delete)."""
    posted = {m.ts for m in messages if m.kind == "post"}
    return {m.ts: m for m in messages if m.ts in posted and m.kind in ("post", "update", "delete")}


def _finish_with_a_file(
    gateway: SlackGateway, slack: SlackSimulator, faults: list[tuple[str, str, int]]
) -> Any:
    progress = Progress(gateway, CHANNEL, None, min_interval_s=0)
    progress.update(Reply(text=":hourglass_flowing_sand: benchmarking", blocks=[cancel_button("op")]))
    start = len(slack.messages) - 1
    for method, error, count in faults:
        slack.fail_next(method, error=error, status=200, count=count)
    reply = Reply(
        text="bench done",
        blocks=[section("bench done")],
        files=[Attachment("bench.txt", "p95 1.2 s", "Bench")],
    )
    progress.finish(reply, user_id=USER)
    return progress, slack.messages[start:]


# Each case's faults are all used up by the finish (the simulator is shared by the module's tests).
@pytest.mark.parametrize(
    ("faults", "answered_as"),
    [
        ([("chat.update", "cant_update_message", 2), ("chat.postMessage", "internal_error", 1)], "post"),
        ([("chat.update", "cant_update_message", 1)], "post"),
        ([("chat.update", "cant_update_message", 1), ("chat.postMessage", "internal_error", 2)], "ephemeral"),
        ([("chat.update", "cant_update_message", 2), ("chat.postMessage", "not_in_channel", 1)], "ephemeral"),
    ],
)
def test_a_progress_message_ends_final_and_its_files_go_up_once(
    slack: SlackSimulator, gateway: SlackGateway, faults: list[tuple[str, str, int]], answered_as: str
) -> None:
    progress, messages = _finish_with_a_file(gateway, slack, faults)
    files = [m for m in messages if m.kind == "file"]
    assert [m.filename for m in files] == ["bench.txt"], "the file is uploaded once"
    (answer,) = [m for m in messages if "bench done" in m.text]
    assert answer.kind == answered_as and messages.index(files[0]) < messages.index(answer)
    states = _final_states(messages)
    assert states and not [m for m in states.values() if m.in_progress], "a progress message left pending"
    if answered_as == "ephemeral":
        closed = states[progress.ts]
        assert closed.kind == "delete" or "went to the person who asked" in closed.render()


def test_a_final_reply_slack_refuses_everywhere_still_closes_the_progress_message(
    slack: SlackSimulator, gateway: SlackGateway
) -> None:
    faults = [("chat.postMessage", "internal_error", 3), ("chat.postEphemeral", "internal_error", 1)]
    progress, messages = _finish_with_a_file(
        gateway, slack, [("chat.update", "cant_update_message", 1), *faults]
    )
    (closed,) = [m for m in messages if m.kind == "update"]
    assert closed.ts == progress.ts and "Slack refused the result; run the command again" in closed.render()
