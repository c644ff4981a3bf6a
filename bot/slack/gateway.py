"""The one way out to Slack: every Web API call and every `response_url` POST of the bot goes through here.

Senders (the runner, progress messages, streaming edits, alerts, App Home, modals) hand the gateway a
`Reply` and where it goes; the gateway

1. redacts every text and file (`llm.redact`),
2. escapes untrusted text: `&`, `<`, `>` become entities in every mrkdwn text and the top-level `text`, so
   only the mentions and links the bot built itself (`bot.slack.render.mention`, `channel_link`, `link`) are
   live
   (docs.slack.dev/messaging/formatting-message-text#escaping),
3. fits Slack's limits (`bot.slack.limits`) on the escaped text: characters per section, context, field and
   header text, fields, buttons and blocks per message or view, block text per message and the fallback
   `text`; what is cut is attached whole as a text file,
4. falls back when delivery fails, so the user always holds the whole answer:
   - a `response_url` Slack refuses (`expired_url` after 30 minutes, `used_url` after five uses, or any
     other refusal) -> the same reply posted in the channel or thread (an ephemeral reply stays ephemeral);
   - `msg_too_long`, `msg_blocks_too_long`, `invalid_blocks` -> a short message plus the full text as a file;
   - a reply's files are uploaded before the message that goes with them, so a note about the whole answer's
     file says what became of it: in the channel, in the user's DM, or that the upload failed and its text
     follows in parts (never that a file is there before its upload succeeded);
   - a channel the bot cannot post in (`not_in_channel`, `channel_not_found`) -> an ephemeral message, then a
     direct message to the user;
   - a file the channel refuses (the same errors) or fails to take -> uploaded to the user's DM with the
     bot, with an ephemeral note saying where it went; a reply meant for one person (`Destination.ephemeral`:
     an ephemeral message or response_url, and every fallback of one) -> its files only ever to that DM;
     a file uploaded nowhere -> its text in parts, in a thread, with a command that asks for what fits when
     Slack stops taking them (`bot.slack.uploads`, which holds a reply's files);
   - a progress message's final edit that fails -> the final state posted as a new message (a second post
     after an error the retry handlers leave, then ephemerally to the user), its files uploaded once
     whichever way it goes (`finish`); the progress message is then edited to say where the result went,
     or deleted when Slack refuses the edit, never left on an intermediate state.

Refusals that sending again cannot fix (`refusal_of`: the channel archived, unknown or not joined, a scope
the token lacks, the token itself refused) are told apart by `bot.slack.refusals`, with the `needed` and
`provided` scopes Slack adds to `missing_scope`, so the alert job stops sending and says why.

Rate limits (HTTP 429 with Retry-After), connection errors and 5xx are retried by slack_sdk's retry handlers.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.http_retry.builtin_handlers import (
    ConnectionErrorRetryHandler,
    RateLimitErrorRetryHandler,
    ServerErrorRetryHandler,
)
from slack_sdk.http_retry.handler import RetryHandler
from slack_sdk.webhook import WebhookClient

from bot.slack.limits import (
    ACTIONS_ELEMENTS_LIMIT,
    CONTEXT_ELEMENTS_LIMIT,
    FALLBACK_TEXT_LIMIT,
    FIELD_TEXT_LIMIT,
    FIELDS_LIMIT,
    HEADER_TEXT_LIMIT,
    MESSAGE_BLOCK_TEXT_LIMIT,
    MESSAGE_BLOCKS_LIMIT,
    SECTION_TEXT_LIMIT,
    VIEW_BLOCKS_LIMIT,
)
from bot.slack.membership import guidance
from bot.slack.refusals import (
    NOT_HERE,
    TOO_LONG,
    Refusal,
    SlackDeliveryError,
    error_of,
    refusal_of,
    refused,
)
from bot.slack.render import (
    Attachment,
    Block,
    Reply,
    cut_text,
    escape,
    to_mrkdwn,
    to_plain,
)
from bot.slack.uploads import Files
from llm.redact import redact

log = logging.getLogger(__name__)

# The last state of a progress message whose final reply went elsewhere: a new message below it, the user
# only (the channel refused it), or nowhere.
MOVED_ON = ":arrow_down: Finished; the result is in the next message."
SENT_PRIVATELY = ":white_check_mark: Finished; the result went to the person who asked only."
NOT_DELIVERED = ":warning: Finished, but Slack refused the result; run the command again."
# The short message that replaces one Slack refused as too long.
SHORT_TEXT_LIMIT = 1500
# conversations.replies: 200 a page is Slack's recommendation ("no more than 200 results at a time",
# docs.slack.dev/apis/web-api/pagination); 10 pages reach the newest end of any thread but a runaway one.
HISTORY_PAGE_SIZE = 200
HISTORY_PAGES = 10


@dataclass(frozen=True)
class Destination:
    """Where a reply goes.

    Attributes:
        channel: channel id (C.../G.../D...).
        user: the user it answers (for an ephemeral message or a direct-message fallback).
        thread_ts: the thread, or None for the channel itself.
        response_url: a slash command's or click's response_url (tried first), or None.
        replace: the response_url replaces the message the click was on.
        ephemeral: only `user` sees it.
        narrower: for a reply Slack took only part of, a command line asking for that `share` (0-1) of it
            (one the registry parses: `bot.commands.runner`), or None.
    """

    channel: str
    user: str = ""
    thread_ts: str | None = None
    response_url: str | None = None
    replace: bool = False
    ephemeral: bool = False
    narrower: Callable[[float], str | None] | None = None


@dataclass
class Prepared:
    """A reply made ready for Slack: wire `text` and `blocks` (redacted, escaped, within the limits), the
    `files` to upload (redacted, plain), and `full`: the whole answer as plain text (for a fallback file).
    `cut`: Slack's limits cut the blocks, so one of `files` holds `full` and a last block, added once that
    file's upload is done (`Files.noted`), says where the whole answer is."""

    text: str
    blocks: list[Block]
    files: list[Attachment] = field(default_factory=list)
    full: str = ""
    filename: str = "answer.txt"
    cut: bool = False

    def with_full_file(self) -> list[Attachment]:
        """The files, plus the full answer as a file unless one of them already holds it."""
        if any(f.holds(self.full) for f in self.files):
            return list(self.files)
        return [*self.files, Attachment(self.filename, self.full, "Full answer")]


def retry_handlers() -> list[RetryHandler]:
    """Retries for every Slack call: connection errors, 429 (honours Retry-After), 5xx."""
    return [
        ConnectionErrorRetryHandler(max_retry_count=2),
        RateLimitErrorRetryHandler(max_retry_count=5),
        ServerErrorRetryHandler(max_retry_count=2),
    ]


# ---- preparing text (pure)


def prepare(
    reply: Reply, filename: str = "answer.txt", *, blocks_limit: int = MESSAGE_BLOCKS_LIMIT
) -> Prepared:
    """Redact, escape and fit `reply` for a message (or a view, with `blocks_limit=100`).

    Returns:
        A Prepared reply; when something was cut, a note says so and `files` holds the whole text.
    """
    full = redact(to_plain(_full_text(reply)))
    files = [
        replace(f, content=redact(to_plain(f.content)) if isinstance(f.content, str) else f.content)
        for f in reply.files
    ]
    blocks: list[Block] = []
    total = 0
    cut = False
    for block in reply.blocks:
        wire, was_cut = _fit_block(_wire_value(block))
        cut = cut or was_cut
        size = len(_block_text(wire))
        if len(blocks) >= blocks_limit - 1 or total + size > MESSAGE_BLOCK_TEXT_LIMIT - 200:
            cut = True
            break
        blocks.append(wire)
        total += size
    text = to_mrkdwn(redact(reply.text))
    if len(text) > FALLBACK_TEXT_LIMIT:
        text = cut_text(text, FALLBACK_TEXT_LIMIT - 40) + "\n… (cut: the full text is attached)"
        if not reply.blocks:  # the text is the message itself
            cut = True
            blocks = [
                {"type": "section", "text": {"type": "mrkdwn", "text": cut_text(text, SECTION_TEXT_LIMIT)}}
            ]
    prepared = Prepared(text=text or " ", blocks=blocks, files=files, full=full, filename=filename)
    if cut:
        prepared.cut = True
        prepared.files = prepared.with_full_file()
    return prepared


def short_version(prepared: Prepared) -> Prepared:
    """What to send when Slack refused `prepared` as too long: its beginning, its buttons, and the full text
    as a file (the note saying where it is comes with the upload's outcome: `Files.noted`)."""
    head = cut_text(to_mrkdwn(prepared.full), SHORT_TEXT_LIMIT)
    buttons = [
        b
        for b in prepared.blocks
        if b.get("type") == "actions" and len(b.get("elements", [])) <= ACTIONS_ELEMENTS_LIMIT
    ]
    blocks = [{"type": "section", "text": {"type": "mrkdwn", "text": head or " "}}, *buttons[-1:]]
    return Prepared(
        text=cut_text(head, SHORT_TEXT_LIMIT), blocks=blocks, files=prepared.with_full_file(),
        full=prepared.full, filename=prepared.filename, cut=True,
    )  # fmt: skip


def _full_text(reply: Reply) -> str:
    """The whole answer as text: the fallback text, or the blocks' texts when they say more."""
    from_blocks = "\n".join(t for t in (_block_text(b) for b in reply.blocks) if t)
    return from_blocks if len(from_blocks) > len(reply.text) else reply.text


def _wire_value(value: Any) -> Any:
    """A block (or any part of one) with every text object redacted and escaped for its type."""
    if isinstance(value, list):
        return [_wire_value(item) for item in value]
    if not isinstance(value, dict):
        return value
    kind = value.get("type")
    out = {key: _wire_value(item) for key, item in value.items() if key != "text"}
    if "text" in value:
        text = value["text"]
        if not isinstance(text, str):
            out["text"] = _wire_value(text)
        elif kind == "plain_text":  # not parsed for mentions, but escaped as Slack asks for all text
            out["text"] = escape(redact(to_plain(text))) or " "
        else:  # mrkdwn text objects and `markdown` blocks
            out["text"] = to_mrkdwn(redact(text))
    return out


def _fit_block(block: Block) -> tuple[Block, bool]:
    """The block within its own limits, and whether anything was cut."""
    cut = False
    kind = block.get("type")
    text = block.get("text")
    if isinstance(text, dict) and isinstance(text.get("text"), str):
        limit = HEADER_TEXT_LIMIT if kind == "header" else SECTION_TEXT_LIMIT
        if len(text["text"]) > limit:
            block = {**block, "text": {**text, "text": cut_text(text["text"], limit)}}
            cut = True
    if kind == "section" and block.get("fields"):
        fields = block["fields"][:FIELDS_LIMIT]
        cut = cut or len(block["fields"]) > FIELDS_LIMIT
        fitted = []
        for f in fields:
            if len(f.get("text", "")) > FIELD_TEXT_LIMIT:
                f = {**f, "text": cut_text(f["text"], FIELD_TEXT_LIMIT)}
                cut = True
            fitted.append(f)
        block = {**block, "fields": fitted}
    if kind == "context":
        elements = block.get("elements", [])[:CONTEXT_ELEMENTS_LIMIT]
        cut = cut or len(block.get("elements", [])) > CONTEXT_ELEMENTS_LIMIT
        fitted = []
        for e in elements:
            if isinstance(e.get("text"), str) and len(e["text"]) > SECTION_TEXT_LIMIT:
                e = {**e, "text": cut_text(e["text"], SECTION_TEXT_LIMIT)}
                cut = True
            fitted.append(e)
        block = {**block, "elements": fitted}
    if kind == "actions" and len(block.get("elements", [])) > ACTIONS_ELEMENTS_LIMIT:
        block = {**block, "elements": block["elements"][:ACTIONS_ELEMENTS_LIMIT]}
        cut = True
    return block, cut


def _block_text(block: Block) -> str:
    parts: list[str] = []
    text = block.get("text")
    if isinstance(text, dict):
        parts.append(str(text.get("text", "")))
    elif isinstance(text, str):
        parts.append(text)
    for element in block.get("elements", []) + block.get("fields", []):
        if isinstance(element, dict):
            inner = element.get("text")
            parts.append(str(inner.get("text", "")) if isinstance(inner, dict) else str(inner or ""))
    return "".join(parts)


# ---- the gateway


class SlackGateway:
    """Every outbound Slack call of the bot.

    Args:
        client: a slack_sdk WebClient (the bot token); `SlackGateway.connect` builds one with retries.
    """

    def __init__(self, client: WebClient) -> None:
        self.client = client

    @classmethod
    def connect(cls, token: str, base_url: str = "https://slack.com/api/") -> SlackGateway:
        """A gateway with its own WebClient for `token` at `base_url` (retrying 429s, 5xx, connection
        errors)."""
        return cls(WebClient(token=token, base_url=base_url, retry_handlers=retry_handlers()))

    # ---- messages

    def post(
        self,
        channel: str,
        reply: Reply,
        thread_ts: str | None = None,
        *,
        filename: str = "answer.txt",
        with_files: bool = True,
    ) -> str:
        """Post `reply` in `channel` (in the thread `thread_ts`), its files uploaded first. Returns the
        message ts.

        `with_files=False` (an intermediate progress state) uploads nothing.

        Raises:
            SlackDeliveryError: Slack refused the message even in its short form.
        """
        files = Files(self, Destination(channel, thread_ts=thread_ts), attach=with_files)
        ts = self._post(channel, prepare(reply, filename), thread_ts, files)
        files.post_failed()
        return ts

    def update(
        self,
        channel: str,
        ts: str,
        reply: Reply,
        *,
        thread_ts: str | None = None,
        filename: str = "answer.txt",
        with_files: bool = True,
    ) -> str:
        """Replace the message `ts` with `reply` (its files uploaded first, to `thread_ts`). Returns the ts
        now showing it: `ts`, or a new message's when the edit was refused and the reply was posted instead.

        Raises:
            SlackDeliveryError: neither the edit nor a new post went through.
        """
        prepared = prepare(reply, filename)
        files = Files(self, Destination(channel, thread_ts=thread_ts), attach=with_files)
        try:
            self._update(channel, ts, prepared, files)
        except SlackDeliveryError as exc:
            log.warning("chat.update of %s refused (%s); posting the reply instead", ts, exc.reason)
            new_ts = self._post(channel, prepared, thread_ts, files)
            self._close(channel, ts, MOVED_ON)
            files.post_failed()
            return new_ts
        files.post_failed()
        return ts

    def finish(
        self, ts: str | None, reply: Reply, to: Destination, *, filename: str = "answer.txt"
    ) -> str | None:
        """Show the final `reply` of the progress message `ts` (None: not posted yet) in `to.channel` (in
        `to.thread_ts`): an edit of it, else a new message (posted twice at most), else an ephemeral or
        direct message to `to.user`. Its files go up once, whichever way it goes; `ts`, when the reply went
        elsewhere, is closed (`_close`), never left on an intermediate state.

        Returns:
            The ts of the channel message showing `reply`, None when it went another way or nowhere
            (logged).
        """
        prepared = prepare(reply, filename)
        files = Files(self, to)
        shown: str | None = None
        delivered = False
        if ts is not None:
            try:
                self._update(to.channel, ts, prepared, files)
                shown, delivered = ts, True
            except SlackDeliveryError as exc:
                log.warning("chat.update of %s refused (%s); posting the reply instead", ts, exc.reason)
        error = ""
        for _ in range(2):  # a second post gets past a failure the retry handlers leave (an HTTP 200 error)
            if delivered or error in NOT_HERE:
                break
            try:
                shown, delivered = self._post(to.channel, prepared, to.thread_ts, files), True
            except SlackDeliveryError as exc:
                error = exc.reason
                log.warning("final reply not posted in %s (%s)", to.channel, error)
        if not delivered and to.user:
            private = _with_invite_notice(prepared, to.channel) if error in NOT_HERE else prepared
            try:
                self._deliver(private, replace(to, ephemeral=True), files)
                delivered = True
            except SlackDeliveryError as exc:
                log.error("could not deliver the final reply to %s: %s", to.user, exc.reason)
        if ts is not None and shown != ts:
            closing = MOVED_ON if shown else SENT_PRIVATELY if delivered else NOT_DELIVERED
            self._close(to.channel, ts, closing)
        files.post_failed()
        return shown

    def ephemeral(self, channel: str, user: str, reply: Reply, thread_ts: str | None = None) -> None:
        """Show `reply` to `user` only (in `channel`), falling back to a direct message.

        Raises:
            SlackDeliveryError: neither went through.
        """
        self.deliver_or_raise(reply, Destination(channel, user, thread_ts, ephemeral=True))

    def deliver(self, reply: Reply, to: Destination, *, filename: str = "answer.txt") -> str | None:
        """Deliver `reply` with every fallback (module docstring). Never raises: a reply that cannot be
        delivered at all is logged. Returns the ts of the message when one was posted through the Web API."""
        try:
            return self.deliver_or_raise(reply, to, filename=filename)
        except SlackDeliveryError as exc:
            log.error("could not deliver a reply to %s (user %s): %s", to.channel, to.user, exc.reason)
            return None

    def deliver_or_raise(self, reply: Reply, to: Destination, *, filename: str = "answer.txt") -> str | None:
        """`deliver`, raising SlackDeliveryError when every way failed."""
        files = Files(self, to)
        ts = self._deliver(prepare(reply, filename), to, files)
        files.post_failed()
        return ts

    def upload(self, channel: str, attachment: Attachment, thread_ts: str | None = None) -> None:
        """Upload one file (redacted if text) to `channel`, in `thread_ts`; if the upload fails its text is
        posted in parts instead.

        Raises:
            SlackDeliveryError: neither worked.
        """
        content = attachment.content
        if isinstance(content, str):
            attachment = replace(attachment, content=redact(to_plain(content)))
        files = Files(self, Destination(channel, thread_ts=thread_ts))
        files.upload([attachment])
        files.post_failed(raise_errors=True)

    def upload_file(self, attachment: Attachment, channel: str, thread_ts: str | None = None) -> None:
        """Upload `attachment` to `channel` (a C/G/D id), in `thread_ts` (`files_upload_v2`), its text
        redacted; no fallback (`upload` has them).

        Raises:
            SlackDeliveryError: Slack refused it or the call failed (its error code, or the exception).
        """
        content = redact(attachment.content) if isinstance(attachment.content, str) else attachment.content
        try:
            self.client.files_upload_v2(
                channel=channel,
                thread_ts=thread_ts,
                filename=attachment.filename,
                title=attachment.title,
                **({"content": content} if isinstance(content, str) else {"file": content}),
            )
        except Exception as exc:
            raise SlackDeliveryError(error_of(exc)) from exc

    def upload_to_dm(self, attachment: Attachment, user: str) -> str:
        """Upload `attachment` to `user`'s DM with the bot (its id from `conversations.open`, which needs
        the manifest's `im:write` scope: `files.completeUploadExternal` refuses a user id), where only they
        see it. Returns "" once uploaded, else Slack's error (or the exception) of the open or the upload."""
        try:
            dm = str(self.client.conversations_open(users=user)["channel"]["id"])
            self.upload_file(attachment, dm)
        except (SlackApiError, SlackDeliveryError, KeyError, TypeError) as exc:
            reason = exc.reason if isinstance(exc, SlackDeliveryError) else error_of(exc)
            log.warning("could not upload %s to %s's DM: %s", attachment.filename, user, reason)
            return reason or "unknown_error"
        return ""

    # ---- surfaces other than messages

    def publish_home(self, user_id: str, blocks: list[Block]) -> None:
        """Publish the App Home tab of `user_id` (`views.publish`), blocks redacted, escaped, fitted to 100.

        Raises:
            SlackDeliveryError: Slack refused it.
        """
        prepared = prepare(Reply(text="", blocks=blocks), blocks_limit=VIEW_BLOCKS_LIMIT)
        try:
            self.client.views_publish(user_id=user_id, view={"type": "home", "blocks": prepared.blocks})
        except SlackApiError as exc:
            raise refused(exc) from exc

    def open_modal(self, trigger_id: str, view: dict[str, Any]) -> None:
        """Open a modal (`views.open`); its texts are redacted and escaped like a message's.

        Raises:
            SlackDeliveryError: Slack refused it (e.g. an expired trigger_id).
        """
        blocks = [_fit_block(_wire_value(b))[0] for b in view.get("blocks", [])][:VIEW_BLOCKS_LIMIT]
        wire = dict(view, blocks=blocks)
        try:
            self.client.views_open(trigger_id=trigger_id, view=wire)
        except SlackApiError as exc:
            raise refused(exc) from exc

    # ---- reading

    def thread_messages(self, channel: str, ts: str) -> list[dict[str, Any]]:
        """The messages of a thread (`conversations.replies`), oldest first, as last edited; every page is
        read (cursor pagination, up to HISTORY_PAGES) so the newest end is reached. [] when it cannot be
        read; what was read before a failure is kept."""
        messages: list[dict[str, Any]] = []
        cursor = ""
        try:
            for _ in range(HISTORY_PAGES):
                response = self.client.conversations_replies(
                    channel=channel, ts=ts, limit=HISTORY_PAGE_SIZE, cursor=cursor or None
                )
                messages += list(response.get("messages") or [])
                cursor = str((response.get("response_metadata") or {}).get("next_cursor") or "")
                if not response.get("has_more") or not cursor:
                    break
        except Exception as exc:
            log.warning("cannot read the thread: %s", error_of(exc))
        return messages

    def usergroup_members(self, usergroup: str) -> list[str]:
        """User ids in a user group (`usergroups.users.list`). Raises SlackApiError as the client does."""
        return list(self.client.usergroups_users_list(usergroup=usergroup).get("users", []))

    def auth_test(self) -> None:
        """Check the bot token (`auth.test`); raises SlackApiError when refused."""
        self.client.auth_test()

    def token_refusal(self) -> Refusal | None:
        """The Refusal of the bot token (`auth.test`), None when Slack accepts it.

        Raises:
            SlackApiError: any other failure (a rate limit or 5xx left after the retries).
        """
        try:
            self.client.auth_test()
        except SlackApiError as exc:
            refusal = refusal_of(exc)
            if refusal is None:
                raise
            return refusal
        return None

    # ---- internals

    def _deliver(self, prepared: Prepared, to: Destination, files: Files) -> str | None:
        """Send `prepared` the first way that works; returns the message ts of a Web API post."""
        if to.response_url:
            try:
                self._respond(to, prepared, files)
                return None
            except SlackDeliveryError as exc:
                log.warning("response_url refused (%s); answering in the channel instead", exc.reason)
        if not to.ephemeral:
            try:
                return self._post(to.channel, prepared, to.thread_ts, files)
            except SlackDeliveryError as exc:
                if exc.reason not in NOT_HERE or not to.user:
                    raise
                log.warning("cannot post in %s (%s); answering %s privately", to.channel, exc.reason, to.user)
                prepared = _with_invite_notice(prepared, to.channel)
        try:
            self._ephemeral(to, prepared, files)
            return None
        except SlackDeliveryError as exc:
            if not to.user:
                raise
            log.warning("ephemeral message refused (%s); sending %s a direct message", exc.reason, to.user)
        return self._post(to.user, prepared, None, files)

    def _respond(self, to: Destination, prepared: Prepared, files: Files) -> None:
        assert to.response_url is not None
        webhook = WebhookClient(to.response_url, retry_handlers=retry_handlers())

        def send(p: Prepared) -> None:
            if to.ephemeral:
                extra: dict[str, Any] = {"response_type": "ephemeral", "replace_original": False}
            elif to.replace:
                extra = {"replace_original": True}
            else:
                extra = {"response_type": "in_channel"}
            try:
                response = webhook.send(text=p.text, blocks=p.blocks, **extra)
            except Exception as exc:
                raise SlackDeliveryError(error_of(exc)) from exc
            if response.status_code != 200:
                raise SlackDeliveryError(_webhook_error(response.status_code, response.body))

        files.upload(prepared.files)
        try:
            send(files.noted(prepared))
            return
        except SlackDeliveryError as exc:
            if exc.reason not in TOO_LONG:
                raise
        short = short_version(prepared)
        files.upload(short.files)
        send(files.noted(short))

    def _post(self, channel: str, prepared: Prepared, thread_ts: str | None, files: Files) -> str:
        def send(p: Prepared) -> str:
            response = self.client.chat_postMessage(
                channel=channel, thread_ts=thread_ts, text=p.text, blocks=p.blocks
            )
            return str(response.get("ts") or "")

        return self._with_short_fallback(send, prepared, files)

    def _update(self, channel: str, ts: str, prepared: Prepared, files: Files) -> None:
        def send(p: Prepared) -> str:
            self.client.chat_update(channel=channel, ts=ts, text=p.text, blocks=p.blocks)
            return ts

        self._with_short_fallback(send, prepared, files)

    def _ephemeral(self, to: Destination, prepared: Prepared, files: Files) -> None:
        def send(p: Prepared) -> str:
            self.client.chat_postEphemeral(
                channel=to.channel, user=to.user, thread_ts=to.thread_ts, text=p.text, blocks=p.blocks
            )
            return ""

        self._with_short_fallback(send, prepared, files)

    def _with_short_fallback(self, send: Callable[[Prepared], str], prepared: Prepared, files: Files) -> str:
        """Upload `prepared`'s files, then `send(prepared)` with its note; if Slack finds it too long, `send`
        the short version (its file, uploaded first, holds the rest)."""
        files.upload(prepared.files)
        try:
            return send(files.noted(prepared))
        except SlackApiError as exc:
            if error_of(exc) not in TOO_LONG:
                raise refused(exc) from exc
            log.warning(
                "Slack refused a message as too long (%s); sending a short one and a file", error_of(exc)
            )
        short = short_version(prepared)
        files.upload(short.files)
        try:
            return send(files.noted(short))
        except SlackApiError as exc:
            raise refused(exc) from exc

    def _close(self, channel: str, ts: str, text: str) -> None:
        """Leave the bot's message `ts`, whose content now shows elsewhere, in a final state: edited to
        `text`, else (the edit refused, e.g. `cant_update_message`) deleted (`chat.delete`, allowed for the
        bot's own messages with `chat:write`), so it never stays on an intermediate state."""
        try:
            self.client.chat_update(channel=channel, ts=ts, text=text, blocks=[])
            return
        except SlackApiError as exc:
            log.warning("could not close message %s (%s); deleting it", ts, error_of(exc))
        try:
            self.client.chat_delete(channel=channel, ts=ts)
        except SlackApiError as exc:
            log.error("message %s stays as it was: %s", ts, error_of(exc))


def _with_invite_notice(prepared: Prepared, channel: str, lost: str = "the answer") -> Prepared:
    """`prepared` with a last block saying the channel refused the bot and how to invite it
    (`bot.slack.membership.guidance`), for the private answer that replaces the refused post."""
    notice = to_mrkdwn(guidance(channel, [lost]))
    block: Block = {"type": "section", "text": {"type": "mrkdwn", "text": notice}}
    return replace(prepared, blocks=[*prepared.blocks[: MESSAGE_BLOCKS_LIMIT - 1], block])


def _webhook_error(status: int, body: str) -> str:
    """The error code of a refused response_url POST: Slack answers plain text (`expired_url`) or JSON."""
    text = (body or "").strip()
    if text.startswith("{"):
        try:
            return str(json.loads(text).get("error") or f"HTTP {status}")
        except ValueError:
            pass
    return text.split()[0] if text else f"HTTP {status}"
