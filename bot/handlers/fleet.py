"""`/fleet`: every deployment in one message (bot/deployments.py), gathered by `bot.fleet_status`.

Each deployment's sources (queued resources, vLLM /health and /metrics, open alerts) are fetched at the
same time as every other deployment's, so the message takes as long as its slowest source. A source that
fails shows one red line; the rest still show.
"""

from __future__ import annotations

from bot.commands import registry
from bot.context import Context
from bot.fleet_status import deployment_blocks, snapshots
from bot.render import Block, Reply, blocks_reply, channel_link, context, divider, header, utc


@registry.command("fleet", "Every deployment: queued resource, vLLM health and load, cost today, alerts")
def fleet(ctx: Context) -> Reply:
    """All deployments' sources fetched concurrently; each failing source is one red line."""
    deployments = ctx.fleet.services if ctx.fleet is not None else {ctx.deployment: ctx.services}
    now = ctx.services.now()
    snaps = snapshots(deployments, now)
    channels = ctx.fleet.channels if ctx.fleet is not None else {}
    blocks: list[Block] = [header(f"Fleet: {len(snaps)} deployment(s)")]
    for snap in snaps:
        blocks += deployment_blocks(snap, now)
        bound = [channel_link(channel) for channel, name in channels.items() if name == snap.name]
        if bound:
            blocks.append(context("Bound to " + ", ".join(bound)))
        blocks.append(divider())
    blocks.append(context(utc(now)))
    return blocks_reply(blocks)
