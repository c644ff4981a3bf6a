"""Recovery of a dead primary: what counts as dead, whether the bot made it, the automatic-recovery budget.

A queued resource is dead when it is SUSPENDED or FAILED, or has a PREEMPTED node (after a preemption the
node's state is PREEMPTED: https://cloud.google.com/tpu/docs/preemptible; what the queued resource's own
state becomes is not documented, so either sign counts). Recovering
it means deleting it (it holds quota until deleted) and creating it again, or searching the watched zones
for capacity. Automatic recovery only touches resources carrying the bot's ownership label
(`ops.tpu.ownership.created_by_bot`), at most
`max_per_day` times and `max_usd_per_day` of projected spend per UTC day; every attempt is recorded.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import Column, DateTime, Float, Integer, String, Table, Text, insert, select
from sqlalchemy.engine import Engine

from ops.alerts.planned import DEFAULT_DEPLOYMENT
from ops.store import schema
from ops.store.state import Store, metadata
from ops.tpu.model import QueuedResourceInfo

__all__ = ["Attempt", "RecoveryBudget", "dead_reason"]

attempts_table = Table(
    "auto_recoveries",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("at", DateTime(timezone=True), nullable=False, index=True),
    Column("resource", String(200), nullable=False),  # identity of the dead queued resource
    Column("usd", Float, nullable=False),  # projected spend of the recreated resource
    Column("outcome", Text, nullable=False),
)


def dead_reason(qr: QueuedResourceInfo) -> str | None:
    """Why `qr` needs recovery ("SUSPENDED", "FAILED: ...", "node X PREEMPTED"), or None if it is fine."""
    if qr.state == "SUSPENDED":
        return f"SUSPENDED (by {qr.state_initiator or 'unknown'})"
    if qr.state == "FAILED":
        return f"FAILED: {qr.error or 'no error message'}"
    preempted = [node.name for node in qr.nodes if node.state == "PREEMPTED"]
    if preempted:
        return f"node {', '.join(preempted)} PREEMPTED"
    return None


@dataclass(frozen=True)
class Attempt:
    """One automatic recovery attempt: when, which resource, projected USD, outcome text."""

    at: datetime
    resource: str
    usd: float
    outcome: str


class RecoveryBudget:
    """Automatic recovery attempts in the state store, and the per-day caps.

    Args:
        store: a `Store` or an Engine.
        max_per_day: attempts allowed per UTC day.
        max_usd_per_day: projected spend (USD) allowed per UTC day.
        deployment: whose attempts these are (bot/deployments.py): a named deployment records its attempts
            as "NAME:identity" and counts only those; `default` (a single deployment) counts every row.
    """

    def __init__(
        self,
        store: Store | Engine,
        *,
        max_per_day: int,
        max_usd_per_day: float,
        deployment: str = DEFAULT_DEPLOYMENT,
    ) -> None:
        self.engine: Engine = store.engine if isinstance(store, Store) else store
        if not isinstance(store, Store):
            schema.upgrade(self.engine)  # a Store has done it
        self.max_per_day = max_per_day
        self.max_usd_per_day = max_usd_per_day
        self.prefix = "" if deployment == DEFAULT_DEPLOYMENT else f"{deployment}:"

    def today(self, now: datetime) -> list[Attempt]:
        """This deployment's attempts since 00:00 UTC of `now`'s day, oldest first."""
        start = datetime(now.year, now.month, now.day, tzinfo=UTC)
        table = attempts_table
        query = select(table).where(table.c.at >= start).order_by(table.c.id)
        if self.prefix:
            query = query.where(table.c.resource.startswith(self.prefix, autoescape=True))
        with self.engine.connect() as conn:
            rows = conn.execute(query).mappings().all()
        return [_attempt(row) for row in rows]

    def refusal(self, usd: float, now: datetime) -> str | None:
        """Why one more attempt of projected `usd` is not allowed today, or None if it is."""
        done = self.today(now)
        if len(done) >= self.max_per_day:
            cap = f"AUTO_RECOVER_MAX_PER_DAY={self.max_per_day}"
            return f"{len(done)} automatic recoveries today already (cap {cap})"
        spent = sum(a.usd for a in done)
        if spent + usd > self.max_usd_per_day:
            return (
                f"projected spend ${spent + usd:,.2f} today would pass AUTO_RECOVER_MAX_USD_PER_DAY="
                f"${self.max_usd_per_day:,.2f}"
            )
        return None

    def record(self, resource: str, usd: float, outcome: str, *, now: datetime) -> None:
        """Record one attempt (counted against today's caps whatever its outcome)."""
        with self.engine.begin() as conn:
            conn.execute(
                insert(attempts_table).values(
                    at=now, resource=self.prefix + resource, usd=usd, outcome=outcome[:500]
                )
            )


def _attempt(row: Any) -> Attempt:
    at = row["at"] if row["at"].tzinfo else row["at"].replace(tzinfo=UTC)
    return Attempt(at, row["resource"], float(row["usd"]), row["outcome"])


def exposure_hours(qr: QueuedResourceInfo) -> float:
    """Hours a recreated `qr` may bill: its max run duration (flex-start), else one day."""
    run = qr.max_run_duration or timedelta(days=1)
    return run.total_seconds() / 3600
