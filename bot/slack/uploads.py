"""The files of one reply on their way to Slack (`Files`), for `bot.slack.gateway`, which every Slack call
goes through: uploaded before the message that names them, each once whichever way the message then goes,
and never where a reply meant for one person would show them to others.

Where a file goes:

- a reply for everyone: the channel (its thread); refused there (the bot not invited) or failed there,
  the user's DM with the bot (`conversations.open`, scope `im:write`), with an ephemeral note saying so;
- a private reply (`Destination.ephemeral`: an ephemeral message or response_url, and every fallback of
  one): only the user's DM, and the message's note says so;
- nowhere it could be uploaded: its text in parts cut at line ends, in a thread of their own (or privately),
  while Slack takes them and at most PARTS_LIMIT; what is left is named with a command that asks for what
  fits (`Destination.narrower`).
"""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import TYPE_CHECKING

from bot.slack.limits import SECTION_TEXT_LIMIT
from bot.slack.membership import guidance, sent_to_dm
from bot.slack.refusals import NOT_HERE, SlackDeliveryError
from bot.slack.render import Attachment, Block, Reply, channel_link, code, text_reply

if TYPE_CHECKING:
    from bot.slack.gateway import Destination, Prepared, SlackGateway

log = logging.getLogger(__name__)

# Where a private reply's file is, said in its note: only the user sees that conversation.
PRIVATE_FILE = "this answer is only for you: its files never go where others see them"
# A failed upload is posted as at most this many messages of text: a minute of Slack's message rate in one
# conversation ("1 per second per channel, short bursts allowed",
# docs.slack.dev/reference/methods/chat.postMessage#rate-limiting), enough for about 800 of /logs' entries
# with every line whole (the demo's); beyond, the last message names the parts not posted.
PARTS_LIMIT = 60


def at_line_ends(text: str, size: int) -> list[str]:
    """`text` in parts of at most `size` characters, each cut after a line end where one is in reach."""
    parts: list[str] = []
    while len(text) > size:
        end = text.rfind("\n", 0, size) + 1 or size
        parts.append(text[:end])
        text = text[end:]
    return [*parts, text] if text or not parts else parts


class Files:
    """The files of one delivery, uploaded before the message that goes with them (each once, whichever
    way the message then goes), so the note of a message says what became of them.

    Args:
        gateway: the gateway uploading (its uploads; its deliveries for notes and parts). to: where the
            files go (its channel and thread; its user for the DM; `ephemeral`: only to that DM).
            attach: False for an intermediate progress state, which uploads nothing.
    """

    def __init__(self, gateway: SlackGateway, to: Destination, *, attach: bool = True) -> None:
        self._gateway, self._to, self._attach = gateway, to, attach
        # file -> ("here" | "dm" | "private" | "" failed, Slack's error)
        self._done: dict[Attachment, tuple[str, str]] = {}

    def upload(self, attachments: list[Attachment]) -> None:
        """Upload each of `attachments` not uploaded yet: to the channel, else (refused or failed there)
        the user's DM; a private reply's only ever to the user's DM. A failure is kept for `noted` and
        `post_failed`."""
        gateway = self._gateway
        for attachment in [a for a in attachments if self._attach and a not in self._done]:
            if self._to.ephemeral:
                error = gateway.upload_to_dm(attachment, self._to.user) if self._to.user else "no_user"
                self._done[attachment] = ("", error) if error else ("private", "")
                continue
            try:
                gateway.upload_file(attachment, self._to.channel, self._to.thread_ts)
                self._done[attachment] = ("here", "")
            except SlackDeliveryError as exc:
                if self._to.user and self._to_dm(attachment, exc.reason):
                    self._done[attachment] = ("dm", exc.reason)
                else:
                    log.warning("upload of %s failed (%s)", attachment.filename, exc.reason)
                    self._done[attachment] = ("", exc.reason)

    def noted(self, prepared: Prepared) -> Prepared:
        """`prepared` with a last block saying where its files are: when it was cut, where the whole answer
        is (the file as uploaded, or that its upload failed and its text follows in parts; with `attach`
        False, only that it was cut); for a private reply, which files went to the user's DM."""
        whole = next((f for f in prepared.files if f.holds(prepared.full)), None) if prepared.cut else None
        lines = []
        if prepared.cut:
            name = f"`{whole.filename}`" if whole else ""
            where, error = self._done.get(whole, ("-", "")) if whole else ("-", "")
            why = "refused here" if error in NOT_HERE else "the upload here failed"
            outcome = {
                "-": "cut here.",
                "here": f"the whole answer is in {name}.",
                "dm": f"the whole answer is in {name}, in our direct messages ({why}: `{error}`).",
                "private": f"the whole answer is in {name}, in our direct messages ({PRIVATE_FILE}).",
                "": f"the upload of the whole answer as {name} failed (Slack: `{error}`): "
                "it follows in parts.",
            }[where]
            lines.append(f":page_facing_up: Longer than Slack allows in one message; {outcome}")
        private = [
            f"`{f.filename}`"
            for f in prepared.files
            if f != whole and self._done.get(f, ("-", ""))[0] == "private"
        ]
        if private:
            lines.append(f":page_facing_up: In our direct messages: {', '.join(private)} ({PRIVATE_FILE}).")
        if not lines:
            return prepared
        note: Block = {"type": "context", "elements": [{"type": "mrkdwn", "text": "\n".join(lines)}]}
        return replace(prepared, blocks=[*prepared.blocks, note])

    def post_failed(self, *, raise_errors: bool = False) -> None:
        """Post the text of every file whose upload failed in parts, after the message that says so.

        Raises:
            SlackDeliveryError: with `raise_errors`, when not even the first part could be posted.
        """
        for attachment, (where, error) in self._done.items():
            if where:
                continue
            try:
                self._in_parts(attachment, error)
            except SlackDeliveryError as again:
                log.error("could not deliver %s: %s", attachment.filename, again.reason)
                if raise_errors:
                    raise

    def _to_dm(self, attachment: Attachment, error: str) -> bool:
        """Upload a file the channel refused or failed to take (`error`) to the user's DM with the bot, then
        tell them so, ephemerally where they asked (through the response_url while it works). False when
        the DM could not be opened or the upload failed there too."""
        to = self._to
        if self._gateway.upload_to_dm(attachment, to.user):
            return False
        log.info("%s refused %s (%s); uploaded to %s's DM", to.channel, attachment.filename, error, to.user)
        if error in NOT_HERE:
            said = sent_to_dm(to.channel, attachment.filename, error)
        else:
            said = (
                f":warning: The upload of `{attachment.filename}` in {channel_link(to.channel)} failed "
                f"(Slack: `{error}`), so I sent the file to our direct messages instead."
            )
        try:
            self._gateway.deliver_or_raise(text_reply(said), replace(to, replace=False, ephemeral=True))
        except SlackDeliveryError as exc:
            log.warning("could not say where %s went: %s", attachment.filename, exc.reason)
        return True

    def _in_parts(self, attachment: Attachment, error: str) -> None:
        """Post the text of a file whose upload failed (Slack's `error`) in parts cut at line ends, in the
        thread: a reply in the channel itself starts one with its first part, so the parts do not flood the
        channel. When the channel refused the bot (NOT_HERE) they go privately to the user (through the
        response_url while it works), the first saying how to invite the bot. Parts are posted while Slack
        takes them (its 429s are waited out by the retry handlers), at most PARTS_LIMIT; when some are left,
        a last message says which and how to ask for what fits (`Destination.narrower`).

        Raises:
            SlackDeliveryError: not even the first part could be posted.
        """
        to = self._to
        content = attachment.content
        text = content if isinstance(content, str) else f"({len(content):,} bytes of binary data not shown)"
        parts = at_line_ends(text, SECTION_TEXT_LIMIT - 200)
        not_here = error in NOT_HERE and bool(to.user)
        if not_here:
            where = replace(to, replace=False, ephemeral=True)
        else:
            where = replace(to, response_url=None, replace=False)
        posted, stopped = 0, f"at most {PARTS_LIMIT} parts are posted"
        for number, part in enumerate(parts[:PARTS_LIMIT], 1):
            body = f"`{attachment.filename}` ({number}/{len(parts)})\n{code(part)}"
            blocks: list[Block] = [{"type": "section", "text": {"type": "mrkdwn", "text": body}}]
            if not_here and number == 1:
                notice = guidance(to.channel, [f"the file `{attachment.filename}`"])
                blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": notice}})
            try:
                ts = self._gateway.deliver_or_raise(Reply(text=body, blocks=blocks), where)
            except SlackDeliveryError as exc:
                if number == 1:
                    raise
                stopped = f"Slack stopped taking them: `{exc.reason}`"
                break
            posted = number
            if ts and where.thread_ts is None and not where.ephemeral:
                where = replace(where, thread_ts=ts)
        if posted == len(parts):
            return
        narrower = to.narrower(posted / len(parts)) if to.narrower else None
        how = f"`{narrower}` asks for an answer of the size that got through; " if narrower else ""
        said = (
            f":warning: Parts {posted + 1}-{len(parts)} of `{attachment.filename}` were not posted "
            f"({stopped}). {how}run the command again for the whole answer once Slack takes the file (its "
            f"upload failed: `{error}`)."
        )
        try:
            self._gateway.deliver_or_raise(text_reply(said), where)
        except SlackDeliveryError as exc:
            log.error("could not say what is missing of %s: %s", attachment.filename, exc.reason)
