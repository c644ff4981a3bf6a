"""`/fleet` as Slack blocks: a header, each deployment's lines (`bot.shared.fleet_status.deployment_blocks`)
with
the channels bound to it, the total cost line, and when it was read."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime

from bot.shared.fleet_status import Snapshot, deployment_blocks
from bot.slack.render import (
    Block,
    Reply,
    blocks_reply,
    channel_link,
    context,
    divider,
    header,
    plural,
    section,
    utc,
)


def fleet_view(snaps: list[Snapshot], now: datetime, channels: Mapping[str, str], total: str) -> Reply:
    """Every deployment in one message.

    Args:
        snaps: one snapshot per deployment. now: when they were read.
        channels: Slack channel id -> the deployment bound to it. total: the cost total line (mrkdwn).
    """
    blocks: list[Block] = [header(f"Fleet: {plural(len(snaps), 'deployment')}")]
    for snap in snaps:
        blocks += deployment_blocks(snap)
        bound = [channel_link(channel) for channel, name in channels.items() if name == snap.name]
        if bound:
            blocks.append(context("Bound to " + ", ".join(bound)))
        blocks.append(divider())
    blocks.append(section(total))
    blocks.append(context(utc(now)))
    return blocks_reply(blocks)
