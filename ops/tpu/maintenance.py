"""Alerts for host maintenance Google announced on a TPU VM (`Node.upcomingMaintenance`), pure: no I/O.

A maintenance event is one node's announced window; it is told once, `lead` before its window starts (or
at once when first seen inside that lead, or already under way), with the catalogue's fix for it
(`ops.diagnosis.notices.maintenance_finding`). Its alert is resolved in place when the node no longer
announces
that window: the maintenance is over, was moved (a new window is a new event) or the queued resource is
gone. Google announces SCHEDULED maintenance about seven days ahead and UNSCHEDULED (critical) maintenance
with less notice (https://cloud.google.com/tpu/docs/view-maintenance-notifications).

Keys: `"{identity}|maintenance|{node}@{window start}"`, e.g.
`"us-east5-a/gemma4-qr@2026-11-30T00:00:00Z|maintenance|gemma4-qr-node@2026-12-01T04:00:00Z"`; the
resolution's key adds `|over`.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from ops.alerts.ledger import Alert, LedgerRow, identity, qr_alert, subject_alert
from ops.diagnosis.notices import can_start_early, maintenance_finding
from ops.times import iso_utc, minutes_text
from ops.tpu.model import NodeInfo, QueuedResourceInfo, UpcomingMaintenance

__all__ = ["DEFAULT_LEAD", "KIND", "OVER_KIND", "maintenance_alerts", "maintenance_over", "window_text"]

KIND = "maintenance"
OVER_KIND = "maintenance_over"
DEFAULT_LEAD = timedelta(hours=24)


def window_text(maintenance: UpcomingMaintenance) -> str:
    """ "window 2026-12-01 04:00 to 08:00 UTC" (dates written out when the end is another day), or
    "window not given"."""
    start, end = maintenance.window_start, maintenance.window_end
    if start is None:
        return "window not given"
    first = start.strftime("%Y-%m-%d %H:%M")
    if end is None:
        return f"window from {first} UTC"
    last = end.strftime("%H:%M" if end.date() == start.date() else "%Y-%m-%d %H:%M")
    return f"window {first} to {last} UTC"


def _suffix(node: str, maintenance: UpcomingMaintenance) -> str:
    return f"{node}@{iso_utc(maintenance.window_start)}"


def _alert(qr: QueuedResourceInfo, node: NodeInfo, maintenance: UpcomingMaintenance, now: datetime) -> Alert:
    kind = (maintenance.kind or "host").lower()
    window = window_text(maintenance)
    if maintenance.underway(now):
        what = f"{kind} host maintenance under way on node `{node.name}` ({window})"
    elif maintenance.window_start is not None:
        left = minutes_text(maintenance.window_start - now, floor=True)
        what = f"{kind} host maintenance on node `{node.name}` in {left} ({window})"
    else:
        what = f"{kind} host maintenance announced for node `{node.name}` ({window})"
    early = "yes" if can_start_early(node, maintenance) else "no"
    facts = f"Status {maintenance.status or 'unknown'} · can be started early: {early}"
    if maintenance.latest_start is not None:
        facts += f" · latest start {maintenance.latest_start.strftime('%Y-%m-%d %H:%M UTC')}"
    lines = [facts]
    finding = maintenance_finding(qr, node)
    if finding is not None:
        lines += [finding.cause, f"*Fix:* {finding.fix}"]
    return qr_alert(
        qr,
        KIND,
        _suffix(node.name, maintenance),
        f"`{qr.name}` ({qr.zone}): {what}",
        "\n".join(lines),
        state=qr.state,
        node=node.name,
        severity="critical" if maintenance.kind == "UNSCHEDULED" else "warning",
    )


def maintenance_alerts(
    resources: Iterable[QueuedResourceInfo],
    now: datetime,
    *,
    lead: timedelta = DEFAULT_LEAD,
    tick: timedelta = timedelta(0),
) -> list[Alert]:
    """The maintenance alerts due now: one per node whose announced window starts within `lead` (plus
    `tick`, the time to the next evaluation, so it is told at the last evaluation before rather than
    after), is under way, or has no start time. The ledger sends each key once.

    Args:
        resources: the listed queued resources (DELETING ones are skipped).
        now: timezone-aware current time.
        lead: how long before the window the alert is due (MAINTENANCE_ALERT_LEAD, default 24 h).
        tick: the time to the next evaluation.

    Returns:
        Alerts of kind "maintenance", severity critical for UNSCHEDULED maintenance, else warning.
    """
    found: list[Alert] = []
    for qr in resources:
        if qr.state == "DELETING":
            continue
        for node in qr.nodes:
            maintenance = node.maintenance
            if maintenance is None:
                continue
            start = maintenance.window_start
            if start is None or maintenance.underway(now) or start - now <= lead + tick:
                found.append(_alert(qr, node, maintenance, now))
    return found


def maintenance_over(
    rows: Iterable[LedgerRow], resources: Iterable[QueuedResourceInfo], answered: Iterable[str]
) -> list[Alert]:
    """Resolutions of maintenance alerts (open or held back) whose event the node no longer announces:
    over, moved to another window, or the queued resource or node gone. A resource in a zone that did not
    answer is left alone.

    Args:
        rows: ledger rows (other kinds are ignored); resources: the listed queued resources; answered:
            the zones whose listing succeeded.

    Returns:
        One Alert of kind "maintenance_over" per such row, keyed "{row key}|over", resolving the row.
    """
    listed = {identity(qr): qr for qr in resources}
    zones = set(answered)
    found: list[Alert] = []
    for row in rows:
        if row.kind != KIND:
            continue
        event = row.key.rsplit(f"|{KIND}|", 1)[-1]
        node_name = event.split("@", 1)[0]
        qr = listed.get(row.resource)
        if qr is None:
            if row.resource.split("/", 1)[0] not in zones:
                continue
            why = "the queued resource is gone"
        else:
            node = next((n for n in qr.nodes if n.name == node_name), None)
            if node is None:
                why = f"node `{node_name}` is gone"
            elif node.maintenance is not None and _suffix(node.name, node.maintenance) == event:
                continue  # still announced: not over
            elif node.maintenance is not None:
                why = f"moved: {window_text(node.maintenance)}"
            else:
                why = f"over; node `{node.name}` is {node.state}" + (
                    f", {node.health}" if node.health else ""
                )
        found.append(
            subject_alert(f"{row.key}|over", OVER_KIND, row.resource, f"{row.text}: {why}", resolves=row.key)
        )
    return found
