"""Capacity as Slack blocks: the zones table (/tpu zones) and a capacity search's preview, progress and
outcome (/tpu find)."""

from __future__ import annotations

from collections.abc import Mapping

from bot.oncall.followup import pending_block
from bot.slack.render import Reply, blocks_reply, cancel_button, context, header, section

_STATE_ICONS = {
    "ACTIVE": ":large_green_circle:",
    "deleted": ":wastebasket:",
    "requesting": ":arrow_right:",
    "pending": ":white_circle:",
    "not": ":white_circle:",
    "cancelled": ":no_entry_sign:",
    "failed": ":red_circle:",
    "skipped": ":fast_forward:",
    "leftover": ":warning:",
    "unresolved": ":grey_question:",
}


def _icon(state: str) -> str:
    """An icon for a zone's search state: its first word decides; queue states get an hourglass."""
    return _STATE_ICONS.get(state.split(":")[0].split(" ")[0], ":hourglass:")


def zones_table(title: str, lines: list[str], quota_ids: tuple[str, str], note: str) -> Reply:
    """`/tpu zones`: a header `title`, one line per zone (mrkdwn), and the quota ids (standard, preemptible)
    the table was read from, with `note` (what it leaves out, "" when nothing)."""
    standard_id, preemptible_id = quota_ids
    return blocks_reply(
        [
            header(title),
            section("\n".join(lines)),
            context(
                "Quota ids "
                + f"`{standard_id}` / `{preemptible_id}`; flex-start and spot draw on preemptible quota, "
                "on-demand and reserved on the other. ✅ means nothing known refuses it, not that capacity "
                "is free." + note
            ),
        ]
    )


def find_preview(lines: list[str]) -> Reply:
    """`/tpu find`'s preview: what the search will request where, and its warnings, in one section."""
    return blocks_reply([section("\n".join(lines))])


def search_progress(title: str, states: Mapping[str, str], operation_id: str | None) -> Reply:
    """A running search: one line per zone with its state's icon, and a Cancel button for `operation_id`
    (None: the search ended, no button)."""
    lines = [f"{_icon(state)} `{zone}` {state}" for zone, state in states.items()]
    blocks = [header(title), section("\n".join(lines) or "starting…")]
    if operation_id is not None:
        blocks.append(cancel_button(operation_id))
    return blocks_reply(blocks)


def search_result(
    title: str, states: Mapping[str, str], outcome: str, unresolved: Mapping[str, str]
) -> Reply:
    """The ended search: the zones, the `outcome` in words, then one pending line per unresolved request
    (request id -> what is not known; `bot.oncall.followup.refresh` edits it later)."""
    reply = search_progress(title, states, None)
    pending = [pending_block(request_id, text) for request_id, text in unresolved.items()]
    return blocks_reply([reply.blocks[0], section(outcome), *pending, *reply.blocks[1:]])
