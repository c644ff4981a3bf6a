"""`/tpu recover`: the preview of a recovery (what it deletes, what it creates or searches, what it may cost)
and the confirmed result."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from bot.slack.render import Reply, blocks_reply, section
from bot.views.tpu import resource_line
from ops.tpu.model import QueuedResourceInfo


@dataclass(frozen=True)
class RecoveryPreview:
    """What a recovery of `qr` will do, as gathered by the handler.

    Attributes:
        qr: the dead queued resource; reason: why it is dead (`ops.tpu.recovery.dead_reason`).
        search: True for a capacity search over `zones`, False to create it again in its zone.
        model, hours: the provisioning model requested and the hours it may bill (None: unknown).
        usd: the projected spend in US dollars, None when it cannot be priced (`unpriced` says why).
        missing: notes on price rows that stand in for missing ones. warnings: zone warnings, mrkdwn lines.
        now: the moment the preview was made (for the resource line's ages).
    """

    qr: QueuedResourceInfo
    reason: str
    search: bool
    zones: list[str]
    model: str
    hours: float | None
    usd: float | None
    unpriced: str
    missing: list[str]
    warnings: list[str]
    now: datetime


def recovery_preview(p: RecoveryPreview) -> Reply:
    """The preview: delete, then create again or search, the resource line, the projected spend and any
    zone warnings, in one section."""
    qr = p.qr
    zones = ", ".join(f"`{z}`" for z in p.zones)
    then = (
        f"then *search for capacity* in {zones} (flex-start), keeping the first zone that becomes ACTIVE"
        if p.search
        else f"then *create it again* in `{qr.zone}` ({qr.accelerator_type}, {qr.provisioning_model})"
    )
    if p.usd is None:
        spend = f"\n*Projected spend* unknown: {p.unpriced}"
    else:
        where = f"`{qr.zone}` prices" if p.search else f"`{qr.zone}`"
        spend = f"\n*Projected spend* {p.model}, up to ${p.usd:,.2f} ({p.hours:g} h at {where})" + "".join(
            f"\n_{text}_" for text in p.missing
        )
    text = f"*Recover* ({p.reason}): *delete* it, {then}:\n{resource_line(qr, p.now)}{spend}"
    return blocks_reply([section("\n".join([text, *p.warnings]))])


def recovered(done: str) -> Reply:
    """The confirmed recovery's result: `done` (what `bot.shared.recovery.recover` did), when vLLM serves."""
    return blocks_reply(
        [
            section(
                f":white_check_mark: Recovery: {done}. vLLM needs about 10 minutes to load; "
                "this thread hears when it serves."
            )
        ]
    )
