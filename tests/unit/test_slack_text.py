"""Pure parts of the gateway: escaping, the bot's own live mentions and links, safe cutting, fitting."""

from __future__ import annotations

import pytest

from bot.slack.gateway import prepare
from bot.slack.limits import MESSAGE_BLOCKS_LIMIT, SECTION_TEXT_LIMIT
from bot.slack.render import (
    Reply,
    channel_link,
    closing_marks,
    cut_text,
    escape,
    link,
    mention,
    section,
    text_reply,
    to_mrkdwn,
    to_plain,
)


def test_untrusted_text_is_escaped_once_and_bot_mentions_stay_live() -> None:
    docs = link("https://x.io/a", "A|B")
    text = f"{mention('U0ABC123')} in {channel_link('C0OPS0001')}: <!channel> a&b &lt;x&gt; {docs}"
    assert (
        to_mrkdwn(text)
        == "<@U0ABC123> in <#C0OPS0001>: &lt;!channel&gt; a&amp;b &lt;x&gt; <https://x.io/a|A¦B>"
    )
    assert escape(escape("<a & b>")) == escape("<a & b>") == "&lt;a &amp; b&gt;"


@pytest.mark.parametrize("bad", ["<!channel>", "U1 <!here>", "javascript:alert(1)"])
def test_mention_and_link_of_untrusted_values_are_text(bad: str) -> None:
    assert "<" not in to_mrkdwn(mention(bad)) and "<" not in to_mrkdwn(channel_link(bad))
    assert to_mrkdwn(link(bad, "x")).count("<") == 0


def test_a_forged_marker_never_turns_live() -> None:
    forged = "\ue000" + "0" * 16 + "!channel\ue001 and \ue000@U0EVIL\ue001"
    assert to_mrkdwn(forged) == "0000000000000000!channel and @U0EVIL"
    assert to_plain(mention("U0ABC123")) == "@U0ABC123"


@pytest.mark.parametrize("limit", range(20, 60))
def test_cutting_never_splits_an_entity_or_a_live_token(limit: int) -> None:
    wire = to_mrkdwn(f"{mention('U0ABC123')} &lt;!channel&gt; " * 5)
    cut = cut_text(wire, limit)
    assert len(cut) <= limit
    body = cut.removesuffix("…")
    assert body.count("<") == body.count(">")
    assert not body.rstrip().endswith(("&", "&l", "&lt", "&g", "&gt", "&a", "&am", "&amp"))


def test_cutting_closes_a_code_fence() -> None:
    cut = cut_text("```" + "x" * 100 + "```", 50)
    assert cut.count("```") == 2


def test_a_long_section_is_cut_and_the_whole_text_attached() -> None:
    text = "\n".join(f"line {i} <!here>" for i in range(600))
    prepared = prepare(text_reply(text), "logs.txt")
    assert all(len(b.get("text", {}).get("text", "")) <= SECTION_TEXT_LIMIT for b in prepared.blocks)
    assert sum(len(b.get("text", {}).get("text", "")) for b in prepared.blocks) <= 12000
    (attached,) = [f for f in prepared.files if f.filename == "logs.txt"]
    assert attached.content == text  # plain and whole: files are not parsed by Slack
    assert prepared.cut  # the note saying where the whole text is comes with its upload's outcome
    one = prepare(text_reply("x"))
    assert one.files == [] and one.blocks == [section("x")] and not one.cut


def test_too_many_blocks_are_cut_leaving_room_for_the_note() -> None:
    prepared = prepare(Reply(text="t", blocks=[section(str(i)) for i in range(80)]), "many.txt")
    assert len(prepared.blocks) == MESSAGE_BLOCKS_LIMIT - 1 and prepared.cut
    (attached,) = prepared.files
    assert attached.filename == "many.txt" and attached.content.endswith("78\n79")


@pytest.mark.parametrize(
    ("text", "closed"),
    [
        ("see `RuntimeError: Unable to initialize backend 'tpu': FAILED_PRECONDITION` " * 4, "`"),
        ("*Projected spend* flex-start, *up to $103.68 over four hours in " + "x" * 80, "*"),
        ("_note: the search covers " + "y " * 60, "_"),
        ("*bold and `code with max_model_len=16384 " + "z" * 80, "`*"),
        ("```" + "log line\n" * 30, "```"),
    ],
)
def test_a_cut_never_leaves_a_code_span_emphasis_or_fence_open(text: str, closed: str) -> None:
    cut = cut_text(text, 60)
    assert len(cut) <= 60 and cut.endswith("…" + closed)
    assert closing_marks(cut) == ""


@pytest.mark.parametrize(
    "text",
    ["max_model_len and tensor_parallel_size", "5 * 3 = 15", "a ~ b", "`x` and *y* and _z_", "*a*\n*b"],
)
def test_marks_that_open_nothing_are_not_closed(text: str) -> None:
    assert closing_marks(text) == ("*" if text.endswith("*b") else "")
