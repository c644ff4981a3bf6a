"""A long answer whose file Slack does not take still reaches the user whole, through the real bot, slack_sdk
and the Slack simulator: a failed upload goes to the user's DM; an upload failed everywhere follows in parts
in a thread; when Slack stops taking the parts, a last message names the missing ones and a narrower
command the registry parses. A progress message whose final edit Slack refuses uploads its file once and
never stays pending."""

from __future__ import annotations

import re
import threading

import bot.handlers  # noqa: F401  (declares every command on the registry)
from bot.commands.registry import registry
from bot.views.logs import LISTING_FILE
from sim.console import DEMO_USER
from sim.demo import Demo
from sim.slack import Message, unescape

LOGS = "/logs --since 2h --limit 1000"  # about 165 KB, every line whole: more parts than are posted
SHORTER_LOGS = "/logs --since 2h --limit 800"  # about 130 KB: some fifty parts of a message, all posted
# The listing's whole answer, every line whole, is the file /logs attaches (`bot.views.logs`).
PART = re.compile(rf"`{re.escape(LISTING_FILE)}` \((\d+)/(\d+)\)")


def _logs(world: Demo, line: str = LOGS) -> tuple[str, list[Message]]:
    start = len(world.slack.messages)
    out, answered = world.user.run(line, timeout=120)
    assert answered, out
    return "\n".join(out), world.slack.messages[start:]


def _parts(messages: list[Message]) -> dict[int, tuple[int, Message]]:
    """Part number -> (parts in all, message) of the posted parts of the listing's file."""
    found = {}
    for m in messages:
        got = PART.match(unescape(m.text))
        if got:
            found[int(got.group(1))] = (int(got.group(2)), m)
    return found


def test_a_failed_upload_goes_to_the_users_dm(world: Demo) -> None:
    world.slack.fail_next("files.getUploadURLExternal", error="internal_error", status=200)
    text, messages = _logs(world)
    (file,) = [m for m in messages if m.kind == "file"]
    assert file.channel == world.slack.dms[DEMO_USER] and file.filename == LISTING_FILE
    assert f"the whole answer is in `{LISTING_FILE}`, in our direct messages (the upload here failed" in text
    assert "so I sent the file to our direct messages instead" in text
    assert not _parts(messages)


def test_an_upload_failed_everywhere_follows_whole_in_one_thread(world: Demo) -> None:
    world.slack.fail_next("files.getUploadURLExternal", error="internal_error", status=200, count=2)
    text, messages = _logs(world, SHORTER_LOGS)
    assert "it follows in parts" in text and not [m for m in messages if m.kind == "file"]
    parts = _parts(messages)
    total = next(iter(parts.values()))[0]
    assert total > 40 and sorted(parts) == list(range(1, total + 1)), "every part is posted"
    first = parts[1][1]
    assert first.thread_ts is None and all(m.thread_ts == first.ts for _, m in list(parts.values())[1:])
    assert "not posted" not in text
    entries = int(re.search(r"\*(\d+) entries\*", text).group(1))  # type: ignore[union-attr]
    held = "".join(unescape(m.text) for _, m in parts.values())
    assert len(re.findall(r"(?:^|`)\d\d-\d\d \d\d:\d\d:\d\d ", held, re.M)) == entries, "every line"


def test_parts_slack_stops_taking_are_named_with_a_narrower_command(world: Demo) -> None:
    world.slack.fail_next("files.getUploadURLExternal", error="internal_error", status=200, count=2)
    world.slack.fail_next("chat.postMessage", error="internal_error", status=200, after=5)
    text, messages = _logs(world)
    parts = _parts(messages)
    total = parts[1][0]
    assert sorted(parts) == [1, 2, 3, 4, 5]
    stopped = r"were not posted \(Slack stopped taking them: `internal_error`\)"
    missing = rf"Parts 6-(\d+) of `{re.escape(LISTING_FILE)}` {stopped}"
    said = re.search(missing + r"\. `([^`]+)` asks for an answer of the size that got through", text)
    assert said is not None, text[-600:]
    assert int(said.group(1)) == total
    narrower = said.group(2)
    assert narrower == f"/logs --since 2h --limit {1000 * 5 // total}"
    assert registry.parse(narrower).args["limit"] == 1000 * 5 // total


def test_a_progress_message_whose_edit_is_refused_ends_final_with_each_file_once(world: Demo) -> None:
    start = len(world.slack.messages)
    world.host.set_command_delay(1.5)
    runner = threading.Thread(target=lambda: world.user.run("/vllm bench --prompts 20", timeout=120))
    runner.start()
    assert world.slack.wait_for(lambda m: m.kind == "post", timeout=30, start=start) is not None
    world.slack.fail_next("chat.update", error="cant_update_message", status=200, count=5)
    world.slack.fail_next("chat.postMessage", error="internal_error", status=200)
    runner.join(120)
    messages = world.slack.messages[start:]
    names = [m.filename for m in messages if m.kind == "file"]
    assert names == ["bench-serve.txt"], names
    posted = {m.ts for m in messages if m.kind == "post"}
    last = {m.ts: m for m in messages if m.ts in posted and m.kind in ("post", "update", "delete")}
    assert not [m.render() for m in last.values() if m.in_progress], "a progress message left pending"
    assert any("Successful requests" in m.render() for m in last.values())
