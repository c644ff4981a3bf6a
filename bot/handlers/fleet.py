"""`/fleet`: every deployment in one message (bot/deployments.py), gathered by `bot.shared.fleet_status`.

Each deployment's sources (queued resources, vLLM /health and /metrics, open alerts) are fetched at the
same time as every other deployment's, so the message takes as long as its slowest source. A source that
fails shows one red line; the rest still show.
"""

from __future__ import annotations

from bot.commands.context import Context
from bot.commands.registry import registry
from bot.shared.fleet_status import Snapshot, snapshots
from bot.slack.render import Reply
from bot.views.fleet import fleet_view


@registry.command("fleet", "Every deployment: queued resource, vLLM health and load, cost today, alerts")
def fleet(ctx: Context) -> Reply:
    """All deployments' sources fetched concurrently; each failing source is one red line."""
    deployments = ctx.fleet.services if ctx.fleet is not None else {ctx.deployment: ctx.services}
    now = ctx.services.now()
    snaps = snapshots(deployments, now)
    channels = ctx.fleet.channels if ctx.fleet is not None else {}
    return fleet_view(snaps, now, channels, _total_line(snaps))


def _total_line(snaps: list[Snapshot]) -> str:
    """Every deployment's cost summed: USD per hour and today (UTC), "at most" when some figure stands in
    for a missing price row; deployments that could not be listed or priced are named, never counted as $0."""
    spends = {snap.name: snap.spend for snap in snaps}
    unread = [name for name, spend in spends.items() if spend.error is not None]
    unpriced = sum(len(spend.unpriced) for spend in spends.values())
    bound = "at most " if any(spend.bounded for spend in spends.values()) else ""
    rate = sum(spend.usd_per_hour for spend in spends.values())
    today = sum(spend.usd for spend in spends.values())
    line = f"*Total* {bound}${rate:,.2f}/h · {bound}${today:,.2f} today (UTC)"
    if unpriced:
        line += f" · {unpriced} resource(s) without a price not counted"
    if unread:
        line += " · not counted (queued resources unreadable): " + ", ".join(f"`{n}`" for n in unread)
    return line
