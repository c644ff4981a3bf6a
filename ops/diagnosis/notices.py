"""The fault catalogue's conclusion and fix for two signals the alert job reads itself: a chat delivery
refusal (Slack's answer, as text) and a host maintenance event Google announced on a TPU VM.

The only place these two ask the catalogue (`ops.diagnosis.families`); every surface (alerts, `/alerts list`,
App Home,
`/tpu status`, `/tpu describe`) renders what it returns, so they say the same thing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

from ops.diagnosis.engine import RemoteError, diagnose
from ops.diagnosis.families import FixFacts, catalogue, chips_of, figures, fill
from ops.tpu.model import NodeInfo, QueuedResourceInfo, UpcomingMaintenance

__all__ = ["MAINTENANCE_FAMILY", "Finding", "can_start_early", "maintenance_finding", "refusal_finding"]

MAINTENANCE_FAMILY = "tpu-maintenance-scheduled"
# Manual start of host maintenance: TPU v6e with the 2x4 topology (v6e-8) or larger only
# (https://cloud.google.com/tpu/docs/manually-start-maintenance, "Limitations").
EARLY_START_MIN_CHIPS = 8


@dataclass(frozen=True)
class Finding:
    """A catalogue family's filled conclusion (`cause`) and `fix`; `family` is its name."""

    family: str
    cause: str
    fix: str


def refusal_finding(slack_text: str) -> Finding | None:
    """The finding for Slack's answer to a refused call, e.g. "The server responded with: {'ok': False,
    'error': 'missing_scope', 'needed': 'chat:write', ...}" (`bot.slack.gateway.Refusal.slack_text`); None
    when no family knows it."""
    known = diagnose(RemoteError("slack", slack_text)).top
    return Finding(known.name, known.conclusion, known.fix) if known is not None else None


def can_start_early(node: NodeInfo, maintenance: UpcomingMaintenance) -> bool:
    """Whether the maintenance of `node` can be started by hand now: Google says so (`canReschedule`), it
    is not under way, and the node is a v6e with at least 8 chips (the documented limit)."""
    chips = chips_of(node.accelerator_type) or 0
    return (
        maintenance.can_reschedule
        and maintenance.status != "ONGOING"
        and node.accelerator_type.startswith("v6e-")
        and chips >= EARLY_START_MIN_CHIPS
    )


def maintenance_finding(qr: QueuedResourceInfo, node: NodeInfo) -> Finding | None:
    """The `tpu-maintenance-scheduled` finding for the announced maintenance of `node` (of `qr`), filled
    with the live values: its status and window, the queued resource, zone and accelerator type, and the
    node only when its maintenance can be started early (so the perform-maintenance command is given whole
    only then). None when the node has no maintenance or the catalogue lacks the family."""
    maintenance = node.maintenance
    if maintenance is None or MAINTENANCE_FAMILY not in catalogue():
        return None
    family = catalogue()[MAINTENANCE_FAMILY]
    extracted = {"maintenance_status": maintenance.status}
    if maintenance.window_start is not None:
        extracted["window_start"] = _utc(maintenance.window_start)
    if maintenance.window_end is not None:
        extracted["window_end"] = _utc(maintenance.window_end)
    if can_start_early(node, maintenance):
        extracted["node"] = node.name
    facts = FixFacts(
        accelerator_type=node.accelerator_type or qr.accelerator_type, zone=qr.zone, name=qr.name
    )
    values = figures({k: v for k, v in extracted.items() if v}, facts)
    return Finding(family.name, fill(family.conclusion, values), fill(family.fix, values))


def _utc(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
