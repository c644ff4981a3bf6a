"""A command's last message kept true after the command ended: the lines about creates answered ambiguously
(their request may still appear) are edited to what reconciliation found ("`newx` in `us-east5-a` appeared
after the timeout and was deleted").

A handler marks each such line with `pending_block(request_id, text)` and calls `watch(ctx, reply)`: once the
runner has written the final message, its place and content are stored (`ops.store.followups`). `refresh` (run
by
reconciliation) edits every stored message whose pending requests are now settled in the state store, and
forgets it when none is left. It works from the stored records, not from events, so a request settled
before its message was stored, or while an edit failed, is shown at the next run.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime

from bot.commands.context import Context
from bot.slack.gateway import SlackDeliveryError, SlackGateway
from bot.slack.render import Block, Reply, blocks_reply, section, utc
from ops.store.followups import Followup, Followups
from ops.store.state import InflightRequest, Store

log = logging.getLogger(__name__)

PENDING = "pending-"  # block_id prefix of a line waiting for one request's outcome

_ICONS = {
    "deleted": ":wastebasket:",
    "adopted": ":inbox_tray:",
    "absent": ":white_circle:",
    "not ours": ":shield:",
}


def pending_block(request_id: str, text: str) -> Block:
    """A section about one request whose outcome is not known yet; `refresh` replaces its text."""
    block = section(f":grey_question: {text}")
    block["block_id"] = PENDING + request_id
    return block


def pending_ids(reply: Reply) -> list[str]:
    """The request ids of the pending lines of `reply`, in order."""
    return [
        str(block["block_id"]).removeprefix(PENDING)
        for block in reply.blocks
        if str(block.get("block_id", "")).startswith(PENDING)
    ]


def watch(ctx: Context, reply: Reply) -> None:
    """Keep `reply` (this command's final answer) for correction if it has pending lines: stored once the
    runner has written it, with the ts of the message that shows it (none: reconciliation posts instead).

    For a reply that would otherwise go through the slash command's response URL (not editable), the
    progress message is posted now so that the answer is a message the bot can edit.
    """
    progress = ctx.progress
    if progress is None or not pending_ids(reply):
        return
    if progress.ts is None:
        progress.update(reply)
    store = Followups(ctx.services.store)
    operation_id, channel, thread_ts = ctx.operation_id, progress.channel_id, progress.thread_ts
    now = ctx.services.now()

    def remember(ts: str | None) -> None:
        store.save(Followup(operation_id, channel, ts, thread_ts, _dump(reply), now))

    progress.when_finished(remember)


def refresh(store: Store, slack: SlackGateway, now: datetime) -> int:
    """Edit every stored message whose pending requests have settled; forget those with none left.

    Args:
        store: the state store (its in-flight records say what became of each request).
        slack: the gateway the edits go through.
        now: for the "Update HH:MM UTC" of each corrected line.

    Returns:
        How many messages were edited (or posted, when the original cannot be edited).
    """
    followups = Followups(store)
    edited = 0
    for operation_id in followups.operations():
        followup = followups.get(operation_id)
        if followup is None:
            continue
        reply = _load(followup.message)
        records = {r.request_id: r for r in store.inflight(open_only=False, operation_id=operation_id)}
        settled = [records[i] for i in pending_ids(reply) if i in records and _settled(records[i])]
        if settled:
            reply = _resolve(reply, settled, now)
            ts = _show(slack, followup, reply)
            if ts is None:
                continue  # not shown: tried again at the next run
            followups.rewrite(operation_id, _dump(reply), ts)
            edited += 1
        if not pending_ids(reply):
            followups.drop(operation_id)
    return edited


def _settled(record: InflightRequest) -> bool:
    return record.state in _ICONS


def _resolve(reply: Reply, settled: list[InflightRequest], now: datetime) -> Reply:
    """`reply` with the pending line of each settled request replaced by what became of it."""
    by_block = {PENDING + r.request_id: r for r in settled}
    blocks = []
    for block in reply.blocks:
        record = by_block.get(str(block.get("block_id", "")))
        if record is None:
            blocks.append(block)
            continue
        text = record.note or f"`{record.name}` in `{record.zone}`: {record.state}"
        blocks.append(section(f"{_ICONS[record.state]} _Update {utc(now)}:_ {text}."))
    return blocks_reply(blocks)


def _show(slack: SlackGateway, followup: Followup, reply: Reply) -> str | None:
    """Edit the message (or post the corrected reply when it has no ts); the ts showing it, None if Slack
    refused both."""
    try:
        if followup.ts is None:
            return slack.post(followup.channel_id, reply, followup.thread_ts)
        return slack.update(followup.channel_id, followup.ts, reply, thread_ts=followup.thread_ts)
    except SlackDeliveryError as exc:
        log.warning("followup of %s not shown: %s", followup.operation_id, exc.reason)
        return None


def _dump(reply: Reply) -> str:
    return json.dumps({"text": reply.text, "blocks": reply.blocks})


def _load(text: str) -> Reply:
    data = json.loads(text)
    return Reply(text=str(data.get("text", "")), blocks=list(data.get("blocks") or []))
