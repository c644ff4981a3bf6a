"""Queued-resource and node changes as Slack blocks: the previews and results of /tpu create, delete,
reset, start, stop and ensure."""

from __future__ import annotations

from datetime import datetime

from bot.oncall.followup import pending_block
from bot.shared.tpu_requests import VLLM_LOAD
from bot.slack.render import Block, Reply, blocks_reply, context, header, section
from bot.views.tpu import resource_line
from ops.tpu.model import QueuedResourceInfo


def change(text: str) -> Reply:
    """A change's preview or result in one section: `text` (mrkdwn) says what it does or did."""
    return blocks_reply([section(text)])


def create_unseen(name: str, zone: str, answer: str, request_id: str, every: str, watch_for: str) -> Reply:
    """A create whose `answer` was ambiguous and whose resource was not there when read back: a pending
    line (edited by `bot.oncall.followup` when reconciliation finds it, looking every `every` for
    `watch_for`)."""
    return blocks_reply(
        [
            section(f":warning: The create of `{name}` answered: {answer}"),
            pending_block(
                request_id,
                f"`{name}` in `{zone}` was not there when read back, so it may still be made. "
                f"If it appears it carries this request's label `{request_id}` and is kept "
                f"(nothing else is touched); the bot looks every {every} for {watch_for} and says here "
                "what it found",
            ),
            context(f"Look with `/tpu describe {name} --zone {zone}` in a minute."),
        ]
    )


def created(qr: QueuedResourceInfo, now: datetime, ambiguous: str | None) -> Reply:
    """The created queued resource; `ambiguous`: what the create answered when it was not clear (the
    resource was read back by its label), None when it was."""
    note = (
        f"\n_The create answered {ambiguous}; read back, it carries this request's label._"
        if ambiguous is not None
        else ""
    )
    return blocks_reply(
        [
            section(
                f":white_check_mark: Created queued resource `{qr.name}`.\n" + resource_line(qr, now) + note
            ),
            context(f"Follow it with `/tpu describe {qr.name}`; vLLM needs {VLLM_LOAD} after ACTIVE."),
        ]
    )


def reset_requested(qr: QueuedResourceInfo, now: datetime) -> Reply:
    """The reset queued resource as read after the reset operation."""
    return change(":white_check_mark: Reset requested.\n" + resource_line(qr, now))


def ensure_preview(
    primary: str,
    delete: list[QueuedResourceInfo],
    create_zone: str | None,
    others: list[QueuedResourceInfo],
    now: datetime,
) -> Reply:
    """`/tpu ensure`'s preview: the FAILED or SUSPENDED resources to delete, the create of `primary` in
    `create_zone` (None: no create), and the live ones left alone; "nothing to do" (no Confirm button)
    when there is neither a delete nor a create."""
    if not delete and create_zone is None:  # an answer, not a refusal: nothing to confirm
        reply = change(
            f":white_check_mark: Nothing to do: `{primary}` is live and nothing is FAILED or SUSPENDED."
        )
        reply.nothing_to_confirm = True
        return reply
    blocks: list[Block] = [header(f"Ensure {primary}")]
    if delete:
        blocks.append(section("*Delete* (FAILED or SUSPENDED queued resources hold quota until deleted):"))
        blocks += [section(resource_line(qr, now)) for qr in delete]
    if create_zone is not None:
        blocks.append(
            section(f"*Create* `{primary}` in `{create_zone}` with the default settings (flex-start, 4 h).")
        )
    if others:
        names = ", ".join(f"`{qr.name}` ({qr.state})" for qr in others)
        blocks.append(
            context(f"Left alone (not the primary, still live; delete explicitly if redundant): {names}")
        )
    return blocks_reply(blocks)
