"""Where open alerts stand against the queued resources listed now: pure, no store and no clients.

A queued resource is known by its identity, "zone/name@create time" (`ops.alerts.ledger.identity`), the part
of every alert key that names it, not by its name alone: a resource deleted and created again under the same
name is another resource, and an alert of the one before is about a resource that no longer exists.
`/alerts list`, App Home and `/fleet` place their open alerts here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from ops.alerts.ledger import GONE_STATES, LedgerRow, identity
from ops.tpu.model import QueuedResourceInfo

__all__ = ["GoneAlert", "PlacedAlerts", "parse_identity", "place_open_alerts"]


def parse_identity(resource: str) -> tuple[str, str, str] | None:
    """(zone, name, create time as written) of a queued resource's identity "zone/name@create time"
    (`identity`); None for any other subject ("vllm:<url>", a maintenance window, the digest)."""
    if resource.startswith("vllm:") or "/" not in resource or "@" not in resource:
        return None
    zone, _, rest = resource.partition("/")
    name, _, created = rest.partition("@")
    return zone, name, created


@dataclass(frozen=True)
class GoneAlert:
    """An open alert about a queued resource that no longer exists.

    Attributes:
        row: the alert. zone, name: its queued resource's (from its identity).
        successor: the resource listed now under the same name in that zone, created after the one the
            alert was about (the name was recreated), or None (deleted, or being deleted).
    """

    row: LedgerRow
    zone: str
    name: str
    successor: QueuedResourceInfo | None


@dataclass(frozen=True)
class PlacedAlerts:
    """Open alerts placed against the queued resources listed now (`place_open_alerts`).

    Attributes:
        current: alerts of resources listed now (by identity: zone, name and create time), of subjects that
            are no queued resource (vLLM, maintenance), and of zones that did not answer (nothing is known).
        gone: alerts of queued resources no longer listed in a zone that answered, oldest first.
    """

    current: list[LedgerRow]
    gone: list[GoneAlert]


def place_open_alerts(
    rows: Iterable[LedgerRow], resources: Iterable[QueuedResourceInfo], answered: Iterable[str]
) -> PlacedAlerts:
    """Which open alerts are about a queued resource that exists now. A resource is known by its identity
    (zone, name and create time, `identity`), not by its name: an alert of a resource deleted and created
    again under the same name is about the one before, which no longer exists, and names the new one as its
    successor. Pure: no I/O.

    Args:
        rows: open alerts (`AlertLedger.open_alerts`), in the ledger's order.
        resources: the queued resources listed now (DELETING ones count as gone).
        answered: the zones whose listing succeeded.
    """
    live = [qr for qr in resources if qr.state not in GONE_STATES]
    present = {identity(qr) for qr in live}
    by_name = {(qr.zone, qr.name): qr for qr in live}
    zones = set(answered)
    current: list[LedgerRow] = []
    gone: list[GoneAlert] = []
    for row in rows:
        parsed = parse_identity(row.resource)
        if parsed is None or row.resource in present or parsed[0] not in zones:
            current.append(row)
            continue
        zone, name, _ = parsed
        gone.append(GoneAlert(row, zone, name, by_name.get((zone, name))))
    return PlacedAlerts(current, gone)
