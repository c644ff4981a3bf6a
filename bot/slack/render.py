"""Slack primitives: a Reply (Block Kit blocks plus a plain-text fallback) within Slack's limits, blocks,
buttons, times for people, and the only live mentions and links. What each command shows is in `bot.views`.

Slack's limits are in `bot.slack.limits`. Output that does not fit is cut by the Slack gateway
(`bot.slack.gateway.prepare`, with `cut_text`), the whole text uploaded as a file, never sent as an oversized
message.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from slack_sdk.models.blocks import (
    ActionsBlock,
    ButtonElement,
    ConfirmObject,
    ContextBlock,
    DividerBlock,
    HeaderBlock,
    MarkdownTextObject,
    PlainTextObject,
    SectionBlock,
)
from slack_sdk.models.blocks import Block as SdkBlock

from bot.slack.limits import (
    CONFIRM_TEXT_LIMIT,
    HEADER_TEXT_LIMIT,
    SECTION_TEXT_LIMIT,
)
from ops.linear import LinearMatch, linear
from ops.times import utc_text

Block = dict[str, Any]


@dataclass(frozen=True)
class Attachment:
    """A file to upload beside the message (to its thread): name, content (text, or bytes), title.

    `whole_answer`: the file holds the whole answer in a fuller form than the message (a listing's lines
    uncut), so that when Slack's limits cut the message, the Slack gateway names this file as where the
    whole answer is instead of uploading the message's text as another file.
    """

    filename: str
    content: str | bytes
    title: str
    whole_answer: bool = False

    def holds(self, full: str) -> bool:
        """Whether this file holds the whole answer whose text is `full`."""
        return self.whole_answer or (isinstance(self.content, str) and self.content == full)


@dataclass
class Reply:
    """What a command answers: a plain-text fallback, blocks, and files for the thread.

    A preview of a change may set `plan`: a fingerprint of exactly what it showed. It is kept with the
    confirmation, and the change refuses to run if the plan it would carry out differs. An `ephemeral`
    reply is shown to the requester only (help, for instance, is nothing the channel needs to read).
    """

    text: str
    blocks: list[Block] = field(default_factory=list)
    files: list[Attachment] = field(default_factory=list)
    plan: str = ""
    ephemeral: bool = False
    nothing_to_confirm: bool = False  # a change's preview found nothing to do: answered, no Confirm button


def blocks_reply(blocks: list[Block]) -> Reply:
    """A reply whose fallback text is the text of its blocks, one paragraph per block."""
    text = "\n\n".join(t for t in (_block_text(b) for b in blocks) if t)
    return Reply(text=text, blocks=blocks)


def as_block(model: SdkBlock) -> Block:
    """A slack_sdk block model as the JSON Slack receives
    (https://slack.dev/python-slack-sdk/api-docs/slack_sdk/models/blocks/).

    Serialized without slack_sdk's length checks: a section or context may hold more than Slack's 3,000
    characters until the Slack gateway cuts it (on the escaped text) and uploads the whole text as a file, so
    nothing is lost to an exception or silently.
    """
    return model.get_non_null_attributes()


def header(text: str) -> Block:
    """A header block: `text` as plain text, cut to 150 characters."""
    return as_block(HeaderBlock(text=PlainTextObject(text=_cut(text, HEADER_TEXT_LIMIT), emoji=True)))


def section(markdown: str) -> Block:
    """A mrkdwn section holding all of `markdown`: text over the 3,000-character limit is cut by the Slack
    gateway, which uploads the whole text as a file, so nothing is lost silently."""
    return as_block(SectionBlock(text=MarkdownTextObject(text=markdown)))


def context(markdown: str) -> Block:
    """A context line holding all of `markdown` (cut like `section`'s, with the whole text as a file)."""
    return as_block(ContextBlock(elements=[MarkdownTextObject(text=markdown)]))


def divider() -> Block:
    """A divider block."""
    return as_block(DividerBlock())


def code(text: str) -> str:
    """A preformatted block, its fences on lines of their own (Slack rendered a closing fence stuck to the
    last line of text wrongly); backtick runs inside are broken so they cannot end it early."""
    return "```\n" + text.replace("```", "`\u200b``") + "\n```"


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


_EMPHASIS = (
    "*_~"  # bold, italic, strike: https://api.slack.com/reference/surfaces/formatting#basic-formatting
)


def closing_marks(text: str) -> str:
    """The mrkdwn that closes what is left open at the end of `text`, innermost first: a code fence alone
    ("```"), else an inline code span ("`") and the bold, italic or strike marks opened at a word start.

    A cut (`cut_text`) appends these so that the rest of the message is
    not read as code or emphasis. Emphasis does not span lines in Slack, so a newline forgets it; a mark
    inside a word (`max_model_len`) or before a space opens nothing.
    """
    fence = code_span = False
    emphasis: list[str] = []
    i = 0
    while i < len(text):
        if text.startswith("```", i) and not code_span:
            fence, i = not fence, i + 3
            continue
        char = text[i]
        before = text[i - 1] if i else " "
        after = text[i + 1] if i + 1 < len(text) else " "
        if fence:
            pass
        elif char == "`":
            code_span = not code_span
        elif code_span:
            pass
        elif char == "\n":
            emphasis.clear()
        elif char in _EMPHASIS and char in emphasis and not before.isspace():
            del emphasis[emphasis.index(char) :]
        elif char in _EMPHASIS and (before.isspace() or before in "([{\"'") and not after.isspace():
            emphasis.append(char)
        i += 1
    if fence:
        return "```"
    return ("`" if code_span else "") + "".join(reversed(emphasis))


def cut_text(text: str, limit: int) -> str:
    """`text` (wire form) cut to at most `limit` characters without splitting an entity (`&lt;`) or a live
    token (`<@U123>`), with an ellipsis when cut and what was left open closed after it: a code fence, an
    inline code span, bold, italic or strike (`closing_marks`)."""
    if len(text) <= limit:
        return text
    cut = text[: max(limit - 12, 0)]
    amp = cut.rfind("&")
    if amp != -1 and ";" not in cut[amp:]:
        cut = cut[:amp]
    lt = cut.rfind("<")
    if lt != -1 and ">" not in cut[lt:]:
        cut = cut[:lt]
    marks = closing_marks(cut)
    if marks and marks != "```":  # a closing mark must follow a character, not a space
        cut = cut.rstrip()
    return cut + "…" + marks


def error_reply(message: str, hint: str = "") -> Reply:
    """A one-line failure: what failed, then what to try."""
    text = f":x: {message}" + (f"\n_{hint}_" if hint else "")
    return Reply(text=text, blocks=[section(text)])


def text_reply(markdown: str) -> Reply:
    """A reply made of markdown paragraphs, split into sections at blank lines where needed."""
    return Reply(text=markdown, blocks=[section(part) for part in split_sections(markdown)])


def split_sections(markdown: str, limit: int = SECTION_TEXT_LIMIT) -> list[str]:
    """Split text into chunks of at most `limit` characters, preferring line boundaries.

    Code fences are closed at a split and reopened in the next chunk so each chunk renders alone.
    """
    chunks: list[str] = []
    current = ""
    in_code = False
    for line in markdown.split("\n"):
        while len(line) > limit - 16:
            head, line = line[: limit - 16], line[limit - 16 :]
            if not in_code and (head.count("`") - 3 * head.count("```")) % 2:
                head, line = head + "`", "`" + line  # a code span open at the split: closed, opened again
            current, in_code = _flush_if_needed(chunks, current, head, in_code, limit)
            current += head + "\n"
        current, in_code = _flush_if_needed(chunks, current, line, in_code, limit)
        current += line + "\n"
        if line.count("```") % 2 == 1:
            in_code = not in_code
    if current.strip():
        chunks.append(current.rstrip("\n"))
    return chunks or [""]


def _flush_if_needed(
    chunks: list[str], current: str, line: str, in_code: bool, limit: int
) -> tuple[str, bool]:
    if len(current) + len(line) + 5 <= limit:
        return current, in_code
    chunks.append(current.rstrip("\n") + ("\n```" if in_code else ""))
    return ("```\n" if in_code else ""), in_code


def _block_text(block: Block) -> str:
    parts: list[str] = []
    text = block.get("text")
    if isinstance(text, dict):
        parts.append(str(text.get("text", "")))
    for element in block.get("elements", []) + block.get("fields", []):
        if isinstance(element, dict):
            inner = element.get("text")
            parts.append(str(inner.get("text", "")) if isinstance(inner, dict) else str(inner or ""))
    return "".join(parts)


def ago(moment: datetime | None, now: datetime | None = None) -> str:
    """'3h 05m ago' for a past moment, '-' when unknown."""
    if moment is None:
        return "-"
    return f"{human_duration((now or datetime.now(UTC)) - moment)} ago"


def human_duration(delta: timedelta | None) -> str:
    """A compact duration: '2d 3h', '3h 05m', '12m', '45s'; negative durations get a leading '-'."""
    if delta is None:
        return "-"
    seconds = int(delta.total_seconds())
    sign = "-" if seconds < 0 else ""
    seconds = abs(seconds)
    days, rem = divmod(seconds, 86400)
    hours, rem = divmod(rem, 3600)
    minutes, secs = divmod(rem, 60)
    if days:
        return f"{sign}{days}d {hours}h"
    if hours:
        return f"{sign}{hours}h {minutes:02d}m"
    if minutes:
        return f"{sign}{minutes}m"
    return f"{sign}{secs}s"


def plural(count: int, noun: str, many: str = "") -> str:
    """`count` and its noun in the right number: "1 zone", "2 zones", "0 zones"; `many` gives an irregular
    plural ("2 entries" from `plural(2, "entry", "entries")`)."""
    return f"{count} {noun if count == 1 else many or noun + 's'}"


def utc(moment: datetime | None) -> str:
    """'2026-11-29 14:05 UTC', or '-' when unknown (`ops.times.utc_text`, the one form of a time shown)."""
    return utc_text(moment)


def confirm_buttons(token: str, command: str, *, expires_in: str) -> Block:
    """Confirm (danger, with Slack's confirm dialog) and Cancel buttons for a pending change.

    Both carry the confirmation token as their value; the dialog repeats the exact command.
    """
    dialog = ConfirmObject(
        title=PlainTextObject(text="Run this change?"),
        text=MarkdownTextObject(
            text=_cut(f"`/{command}`\nThis changes real infrastructure.", CONFIRM_TEXT_LIMIT)
        ),
        confirm=PlainTextObject(text="Run it"),
        deny=PlainTextObject(text="Back"),
        style="danger",
    )
    confirm = ButtonElement(
        action_id="confirm_change",
        style="danger",
        text=PlainTextObject(text=f"Confirm (expires in {expires_in})"),
        value=token,
        confirm=dialog,
    )
    cancel = ButtonElement(action_id="cancel_change", text=PlainTextObject(text="Cancel"), value=token)
    return as_block(ActionsBlock(block_id="confirmation", elements=[confirm, cancel]))


def cancel_button(operation_id: str) -> Block:
    """A Cancel button for a running operation (capacity search, benchmark)."""
    button = ButtonElement(
        action_id="cancel_operation", style="danger", text=PlainTextObject(text="Cancel"), value=operation_id
    )
    return as_block(ActionsBlock(block_id="operation", elements=[button]))


# ---- live mentions and links
#
# Slack turns `<@U123>`, `<!channel>`, `<#C123>` and `<https://x|label>` into live mentions and links. Text
# from outside (model output, logs, error messages, typed values) must never do so, so the gateway escapes
# `&`, `<` and `>` in every mrkdwn text it sends (docs.slack.dev/messaging/formatting-message-text#escaping).
# The mentions and links the bot means are built with the functions below: they carry a marker with a
# per-process random nonce that untrusted text cannot forge, and the gateway turns only those into live
# syntax.

_MARK_OPEN, _MARK_CLOSE = "\ue000", "\ue001"
_NONCE = secrets.token_hex(8)
_MARK = linear(_MARK_OPEN + _NONCE + r"([^\x{E000}\x{E001}]*)" + _MARK_CLOSE)  # the nonce is hex
_ENTITY_AMP = linear(r"&(amp;|lt;|gt;)?")  # an `&` and, if it starts one, the entity
_SLACK_ID = linear(r"^[A-Z][A-Z0-9]{2,30}$")
_HTTP_URL = linear(r"^https?://[^\s|<>]+$")


def mention(user_id: str) -> str:
    """A live mention of the Slack user `user_id` (U.../W...); an id of another shape is shown as text."""
    if not _SLACK_ID.match(user_id):
        return escape(user_id)
    return f"{_MARK_OPEN}{_NONCE}@{user_id}{_MARK_CLOSE}"


def group_mention(usergroup_id: str) -> str:
    """A live mention of the Slack user group `usergroup_id` (S...), as `<!subteam^S...>`
    (docs.slack.dev/messaging/formatting-message-text#mentioning-groups)."""
    if not _SLACK_ID.match(usergroup_id):
        return escape(usergroup_id)
    return f"{_MARK_OPEN}{_NONCE}!subteam^{usergroup_id}{_MARK_CLOSE}"


def channel_link(channel_id: str) -> str:
    """A live link to the channel `channel_id` (C.../G...)."""
    if not _SLACK_ID.match(channel_id):
        return escape(channel_id)
    return f"{_MARK_OPEN}{_NONCE}#{channel_id}{_MARK_CLOSE}"


def link(url: str, label: str) -> str:
    """A live link to an http(s) `url` showing `label` (escaped); other URLs are shown as text."""
    if not _HTTP_URL.match(url):
        return escape(f"{label} ({url})")
    return f"{_MARK_OPEN}{_NONCE}{url}|{escape(label).replace('|', '¦')}{_MARK_CLOSE}"


def escape(text: str) -> str:
    """`&`, `<`, `>` as Slack's entities; an entity already escaped stays as it is (so escaping twice is
    harmless, and `&lt;!channel&gt;` can never turn live)."""
    return _ENTITY_AMP.sub(_escape_amp, text).replace("<", "&lt;").replace(">", "&gt;")


def _escape_amp(match: LinearMatch) -> str:
    return match.group(0) if match.group(1) else "&amp;"


def to_mrkdwn(text: str) -> str:
    """Text as sent to Slack in a mrkdwn field: everything escaped except the bot's own marked mentions and
    links, which become live. Stray marker characters are dropped."""
    out: list[str] = []
    pos = 0
    for match in _MARK.finditer(text):
        out.append(_unmarked(escape(text[pos : match.start()])))
        out.append(f"<{match.group(1)}>")
        pos = match.end()
    out.append(_unmarked(escape(text[pos:])))
    return "".join(out)


def to_plain(text: str) -> str:
    """Text for a plain_text field or a file: the bot's marks as readable text (`@U123`, `#C123`,
    `label (url)`), nothing escaped (Slack does not parse these)."""

    def readable(match: LinearMatch) -> str:
        payload = match.group(1)
        if "|" in payload:
            url, label = payload.split("|", 1)
            return f"{label} ({url})"
        return payload

    return _unmarked(_MARK.sub(readable, text))


def _unmarked(text: str) -> str:
    return text.replace(_MARK_OPEN, "").replace(_MARK_CLOSE, "")
