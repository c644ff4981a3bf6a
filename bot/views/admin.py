"""Admin answers: the audit trail (/tpu audit), the Hugging Face token form and its results (/tpu token)."""

from __future__ import annotations

from typing import Any

from slack_sdk.models.blocks import (
    InputBlock,
    MarkdownTextObject,
    PlainTextInputElement,
    PlainTextObject,
    SectionBlock,
)
from slack_sdk.models.views import View

from bot.slack.render import Reply, blocks_reply, code, context, header, mention, section, utc
from ops.store.state import AuditEntry

SECRET_FORM_ID = "hf_token_form"  # noqa: S105  (a Slack callback id, not a secret)
TOKEN_MAX_CHARS = 200  # the form's input; Hugging Face tokens are "hf_" and at most 100 more characters


def audit(entries: list[AuditEntry], *, reads: bool, scanned: int) -> Reply:
    """The audit lines, newest first, as a code block under a header.

    Args:
        entries: the lines to show (changes only unless `reads`).
        reads: whether read-only commands were asked for (`--reads`).
        scanned: how many lines were read to find them (0: the trail is empty).
    """
    if not entries:
        what = "The audit trail is empty." if reads or not scanned else "No change in the audit trail yet"
        more = "" if reads or not scanned else f" ({scanned} read line(s): `/tpu audit --reads`)."
        return blocks_reply([section(what + more)])
    lines = [
        f"{utc(e.at)} {e.user_id:<11} {e.channel_id:<11} {e.action:<17} /{e.command} -> {e.outcome}"
        + (f" ({e.duration_s:.1f} s)" if e.duration_s is not None else "")
        for e in entries
    ]
    title = f"Audit: last {len(entries)}" + ("" if reads else " changes")
    note = [] if reads else [context("Read-only commands are left out: `/tpu audit --reads` shows them too.")]
    return blocks_reply([header(title), section(code("\n".join(lines))), *note])


def token_modal(channel_id: str, secret: str, deployment: str = "") -> dict[str, Any]:
    """The modal (views.open payload) that takes a Hugging Face token in a single-line input. Its private
    metadata is "CHANNEL DEPLOYMENT": the submission is stored in the project of the deployment it was
    opened for (https://api.slack.com/reference/surfaces/views)."""
    view = View(
        type="modal",
        callback_id=SECRET_FORM_ID,
        private_metadata=f"{channel_id} {deployment}".strip(),
        title=PlainTextObject(text="Hugging Face token"),
        submit=PlainTextObject(text="Store"),
        close=PlainTextObject(text="Cancel"),
        blocks=[
            SectionBlock(
                text=MarkdownTextObject(
                    text=f"Stored as a new version of Secret Manager secret `{secret}`. "
                    "The TPU VM reads it there; it is never shown, logged or sent to the model."
                )
            ),
            InputBlock(
                block_id="token",
                label=PlainTextObject(text="Token (hf_...)"),
                element=PlainTextInputElement(action_id="value", max_length=TOKEN_MAX_CHARS),
            ),
        ],
    )
    return view.to_dict()


def form_opened() -> Reply:
    """`/tpu token`'s answer once the form is open."""
    return blocks_reply([section("Opened a form to paste the Hugging Face token (only you can see it).")])


def token_stored(user_id: str, version: str) -> Reply:
    """Who stored a new token and its Secret Manager version name (never the token)."""
    return blocks_reply(
        [section(f":white_check_mark: {mention(user_id)} stored a new Hugging Face token: `{version}`.")]
    )
