"""Alerts that could not be delivered: the refusal per deployment and channel, and the messages held back.

When the chat backend refuses a channel in a way that sending again cannot fix (an archived channel, a
missing scope, a revoked token: `bot.slack.gateway.refusal_of`), the alert job records the refusal here
and stops sending to that channel. Each alert claimed meanwhile keeps its claim in the ledger with status
"undelivered" (so no later tick claims it again) and its rendered message is held in `alert_undelivered`,
oldest first, until a re-check finds the channel working and posts it. A refusal of the token itself is
recorded for channel "*": it holds for every channel of the deployment.

Two tables on `ops.store.state.metadata` (made by the migrations, `ops.store.schema`):
`alert_delivery_problems` (one
row per deployment and channel) and `alert_undelivered` (one row per held alert key). The codes are opaque
strings to this module: it stores them, `bot/` knows what they mean.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Column, DateTime, Integer, String, Table, Text, and_, delete, insert, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

from ops.alerts.ledger import aware, ledger_table
from ops.alerts.planned import DEFAULT_DEPLOYMENT
from ops.store import schema
from ops.store.state import Store, metadata

__all__ = ["ALL_CHANNELS", "UNDELIVERED", "AlertOutbox", "DeliveryProblem", "HeldAlert"]

ALL_CHANNELS = "*"  # the channel of a refusal that holds for every channel (the token's)
UNDELIVERED = "undelivered"  # the ledger status of a claimed alert held back here

problems_table = Table(
    "alert_delivery_problems",
    metadata,
    Column("deployment", String(64), primary_key=True),
    Column("channel", String(32), primary_key=True),  # a channel id, or "*" for every channel
    Column("code", String(64), nullable=False),  # the backend's error code, e.g. "is_archived"
    Column("needed", String(200), nullable=False, default=""),  # missing_scope: the scope the call needs
    Column("provided", String(1000), nullable=False, default=""),  # missing_scope: the token's scopes
    Column("since", DateTime(timezone=True), nullable=False),  # first refusal
    Column("checked_at", DateTime(timezone=True), nullable=False),  # last attempt that was refused
    Column("attempts", Integer, nullable=False, default=1),
)

held_table = Table(
    "alert_undelivered",
    metadata,
    Column("key", String(400), primary_key=True),  # the alert's ledger key
    Column("deployment", String(64), nullable=False, index=True),
    Column("channel", String(32), nullable=False),
    Column("thread_ts", String(32), nullable=True),
    Column("text", Text, nullable=False),  # the message's fallback text
    Column("blocks", Text, nullable=False, default="[]"),  # the message's blocks, JSON
    Column("at", DateTime(timezone=True), nullable=False),  # when it was held
)


@dataclass(frozen=True)
class DeliveryProblem:
    """A recorded refusal: `channel` ("*": every channel), the backend's `code`, for a missing scope the
    `needed` and `provided` scopes, when it began (`since`), the last refused attempt (`checked_at`) and how
    many attempts were refused."""

    deployment: str
    channel: str
    code: str
    needed: str
    provided: str
    since: datetime
    checked_at: datetime
    attempts: int


@dataclass(frozen=True)
class HeldAlert:
    """An alert's message held back: its ledger key, where it goes, its text and blocks, when it was held."""

    key: str
    channel: str
    thread_ts: str | None
    text: str
    blocks: list[dict[str, Any]]
    at: datetime


def _problem(row: Any) -> DeliveryProblem:
    now = datetime.now(UTC)
    return DeliveryProblem(
        deployment=row["deployment"],
        channel=row["channel"],
        code=row["code"],
        needed=row["needed"] or "",
        provided=row["provided"] or "",
        since=aware(row["since"]) or now,
        checked_at=aware(row["checked_at"]) or now,
        attempts=int(row["attempts"] or 1),
    )


class AlertOutbox:
    """Delivery problems and held alerts of one deployment, in the state store.

    Args:
        store: a `Store` or an Engine (its database is upgraded: `ops.store.schema`).
        deployment: the deployment whose alerts these are (bot/deployments.py).
    """

    def __init__(self, store: Store | Engine, deployment: str = DEFAULT_DEPLOYMENT) -> None:
        self.engine: Engine = store.engine if isinstance(store, Store) else store
        self.deployment = deployment
        if not isinstance(store, Store):
            schema.upgrade(self.engine)  # a Store has done it

    # ---- problems
    def problems(self) -> list[DeliveryProblem]:
        """Every recorded problem of the deployment, oldest first."""
        table = problems_table
        query = select(table).where(table.c.deployment == self.deployment).order_by(table.c.since)
        with self.engine.connect() as conn:
            return [_problem(row) for row in conn.execute(query).mappings().all()]

    def refusals(self) -> list[tuple[DeliveryProblem, int]]:
        """Every recorded problem of the deployment, oldest first, with how many alerts are held back for its
        channel meanwhile ([] while alerts get through): what `/tpu status`, `/alerts list` and App Home
        say about whether alerts reach their channel, the same on any replica."""
        return [(problem, len(self.held(problem.channel))) for problem in self.problems()]

    def problem(self, channel: str) -> DeliveryProblem | None:
        """The problem that stops delivery to `channel`: the token's (channel "*") first, else the
        channel's own; None when nothing is recorded."""
        found = {p.channel: p for p in self.problems()}
        return found.get(ALL_CHANNELS) or found.get(channel)

    def record(
        self, channel: str, code: str, *, now: datetime, needed: str = "", provided: str = ""
    ) -> DeliveryProblem:
        """Record a refused attempt for `channel` ("*" for the token): a new problem, or one more attempt
        of the recorded one (its code and scopes updated, its `since` kept). Returns the problem."""
        table = problems_table
        where = and_(table.c.deployment == self.deployment, table.c.channel == channel)
        values = {"code": code, "needed": needed, "provided": provided, "checked_at": now}
        with self.engine.begin() as conn:
            done = conn.execute(update(table).where(where).values(attempts=table.c.attempts + 1, **values))
            if done.rowcount == 0:
                try:
                    with conn.begin_nested():
                        conn.execute(
                            insert(table).values(
                                deployment=self.deployment, channel=channel, since=now, attempts=1, **values
                            )
                        )
                except IntegrityError:  # another replica recorded it meanwhile
                    conn.execute(update(table).where(where).values(**values))
            row = conn.execute(select(table).where(where)).mappings().one()
        return _problem(row)

    def clear(self, channel: str) -> bool:
        """Forget the problem of `channel` ("*": the token's). Returns whether there was one."""
        table = problems_table
        with self.engine.begin() as conn:
            done = conn.execute(
                delete(table).where(table.c.deployment == self.deployment, table.c.channel == channel)
            )
        return bool(done.rowcount)

    # ---- held alerts
    def hold(
        self,
        key: str,
        channel: str,
        text: str,
        blocks: list[dict[str, Any]],
        *,
        now: datetime,
        thread_ts: str | None = None,
    ) -> None:
        """Hold the message of the claimed alert `key` for `channel` and mark its ledger row undelivered,
        in one transaction (a message held twice keeps its first version)."""
        with self.engine.begin() as conn:
            conn.execute(update(ledger_table).where(ledger_table.c.key == key).values(status=UNDELIVERED))
            known = conn.execute(select(held_table.c.key).where(held_table.c.key == key)).first()
            if known is None:
                conn.execute(
                    insert(held_table).values(
                        key=key,
                        deployment=self.deployment,
                        channel=channel,
                        thread_ts=thread_ts,
                        text=text,
                        blocks=json.dumps(blocks),
                        at=now,
                    )
                )

    def held(self, channel: str | None = None) -> list[HeldAlert]:
        """The held messages of the deployment (only those for `channel` when given, "*" meaning all),
        oldest first."""
        table = held_table
        query = select(table).where(table.c.deployment == self.deployment).order_by(table.c.at, table.c.key)
        if channel is not None and channel != ALL_CHANNELS:
            query = query.where(table.c.channel == channel)
        with self.engine.connect() as conn:
            rows = conn.execute(query).mappings().all()
        return [
            HeldAlert(
                row["key"],
                row["channel"],
                row["thread_ts"],
                row["text"],
                list(json.loads(row["blocks"] or "[]")),
                aware(row["at"]) or datetime.now(UTC),
            )
            for row in rows
        ]

    def delivered(self, key: str, channel: str, ts: str | None) -> None:
        """A held message was posted: drop it and record the alert as sent (its channel and ts)."""
        with self.engine.begin() as conn:
            conn.execute(delete(held_table).where(held_table.c.key == key))
            conn.execute(
                update(ledger_table)
                .where(ledger_table.c.key == key)
                .values(status="sent", channel=channel, ts=ts)
            )

    def drop(self, key: str) -> bool:
        """Drop a held message without posting it (what it said is over). Returns whether one was held."""
        with self.engine.begin() as conn:
            done = conn.execute(delete(held_table).where(held_table.c.key == key))
        return bool(done.rowcount)
