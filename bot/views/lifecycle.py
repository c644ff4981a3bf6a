"""Queued-resource and node changes as Slack blocks: the previews and results of /tpu create, delete,
reset, start, stop and ensure, and of /tpu recover."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from bot.oncall.followup import pending_block
from bot.shared.serving import VLLM_LOAD
from bot.shared.zone_plan import Billing, SecondTpu
from bot.slack.render import Block, Reply, blocks_reply, context, header, section
from bot.views.cost import per_hour, usd
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
    money: list[str] | None = None,
) -> Reply:
    """`/tpu ensure`'s preview: the FAILED or SUSPENDED resources to delete, the create of `primary` in
    `create_zone` (None: no create) with `money` under it (its spend and capacity warnings, mrkdwn lines,
    as `/tpu create` shows them), and the live ones left alone; "nothing to do" (no Confirm button)
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
        if money:
            blocks.append(section("\n".join(money)))
    if others:
        names = ", ".join(f"`{qr.name}` ({qr.state})" for qr in others)
        blocks.append(
            context(f"Left alone (not the primary, still live; delete explicitly if redundant): {names}")
        )
    return blocks_reply(blocks)


@dataclass(frozen=True)
class RecoveryPreview:
    """What a recovery of `qr` will do, as gathered by the handler.

    Attributes:
        qr: the dead queued resource; reason: why it is dead (`ops.tpu.recovery.dead_reason`).
        search: True for a capacity search over `zones`, False to create it again in its zone.
        model, hours: the provisioning model requested and the hours it may bill (None: unknown).
        usd: the projected spend in US dollars, None when it cannot be priced (`unpriced` says why).
        missing: notes on price rows that stand in for missing ones. warnings: the capacity warnings
            (`bot.shared.zone_plan.capacity_preview`: model change, zones, what already runs), mrkdwn lines.
        now: the moment the preview was made (for the resource line's ages).
        dearest: the zone whose price `usd` is at (a search's dearest zone: its worst case).
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
    dearest: str = ""


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
        dearest = p.dearest or qr.zone
        where = f"`{dearest}` prices, the dearest of the zones searched" if p.search else f"`{qr.zone}`"
        spend = f"\n*Projected spend* {p.model}, up to ${p.usd:,.2f} ({p.hours:g} h at {where})" + "".join(
            f"\n_{text}_" for text in p.missing
        )
    text = f"*Recover* ({p.reason}): *delete* it, {then}:\n{resource_line(qr, p.now)}{spend}"
    return blocks_reply([section("\n".join([text, *p.warnings]))])


def _rate(b: Billing) -> str:
    """ "`gemma4-qr` (ACTIVE, `us-east5-a`) at most $25.92/h" ("price unknown" when not priced)."""
    rate = f"{b.bound}{per_hour(b.usd_per_hour)}" if b.usd_per_hour is not None else "price unknown"
    return f"`{b.qr.name}` ({b.qr.state}, `{b.qr.zone}`) {rate}"


def _worst(b: Billing) -> str:
    """ "`gemma4-qr` at most $64.80 more (2.5 h)", or "... no fixed end" when none is known."""
    if b.worst_usd is None or b.hours is None:
        return f"`{b.qr.name}` no fixed end" if b.usd_per_hour is not None else f"`{b.qr.name}` not priced"
    return f"`{b.qr.name}` {b.bound or 'up to '}{usd(b.worst_usd)} more ({b.hours:.1f} h)"


def second_tpu_lines(second: SecondTpu) -> list[str]:
    """The lines of a result that started a TPU beside one already running: what now bills, each TPU's
    hourly rate and the total, the worst case still to come, and the delete of the second one if it is not
    wanted, e.g. ":warning: *2 TPUs now bill*: `gemma4-old` (ACTIVE, `europe-west4-a`) $32.40/h beside
    `gemma4-qr` (ACTIVE, `us-east5-a`) at most $21.60/h: together at most $54.00/h"."""
    every = [second.started, *second.beside]
    rates = [b.usd_per_hour for b in every]
    bounds = {b.bound for b in every}
    bound = "at most " if "at most " in bounds else "about " if "about " in bounds else ""
    total = (
        f": together {bound}{per_hour(sum(r for r in rates if r is not None))}" if None not in rates else ""
    )
    beside = ", ".join(_rate(b) for b in second.beside)
    return [
        f":warning: *{len(every)} TPUs now bill*: {_rate(second.started)} beside {beside}{total}",
        "*Worst case* " + "; ".join(_worst(b) for b in every),
        f"_Not wanted? `{second.delete}` deletes `{second.started.qr.name}`._",
    ]


def recovered(done: str, second: SecondTpu | None = None) -> Reply:
    """The confirmed recovery's result: `done` (what `bot.shared.recovery.recover` did), when vLLM serves,
    and what bills beside a TPU already running (`second`, `second_tpu_lines`; None: nothing else runs)."""
    serves = "this thread hears when it serves"
    text = f":white_check_mark: Recovery: {done}. vLLM needs {VLLM_LOAD} to load; {serves}."
    return blocks_reply([section("\n".join([text, *(second_tpu_lines(second) if second else [])]))])
