"""The schema as it was before migrations (revision 0001): every table of the state store's database as the
release before them made it with `create_all`, frozen here. The models in `ops.store.state`,
`ops.alerts.ledger`, ... move
on with each revision; this never changes, so a database made by that release can be recognised and stamped
(`ops.store.schema.upgrade`), and revision 0001 makes exactly this on an empty database."""

from __future__ import annotations

import sqlalchemy as sa

__all__ = ["baseline_metadata"]


def baseline_metadata() -> sa.MetaData:
    """A fresh MetaData holding the baseline tables (a new one each call: callers may not share it).

    Returns:
        The MetaData; `create_all(conn, checkfirst=True)` on it creates whichever baseline tables are missing.
    """
    metadata = sa.MetaData()
    sa.Table(
        "alert_delivery_problems",
        metadata,
        sa.Column("deployment", sa.String(length=64), nullable=False),
        sa.Column("channel", sa.String(length=32), nullable=False),
        sa.Column("code", sa.String(length=64), nullable=False),
        sa.Column("needed", sa.String(length=200), nullable=False),
        sa.Column("provided", sa.String(length=1000), nullable=False),
        sa.Column("since", sa.DateTime(timezone=True), nullable=False),
        sa.Column("checked_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("deployment", "channel"),
    )

    sa.Table(
        "alert_kv",
        metadata,
        sa.Column("name", sa.String(length=100), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )

    sa.Table(
        "alert_ledger",
        metadata,
        sa.Column("key", sa.String(length=400), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("resource", sa.String(length=200), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("channel", sa.String(length=32), nullable=True),
        sa.Column("ts", sa.String(length=32), nullable=True),
        sa.Column("acked_by", sa.String(length=32), nullable=True),
        sa.Column("resolved_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("key"),
    )

    sa.Table(
        "alert_mutes",
        metadata,
        sa.Column("resource", sa.String(length=100), nullable=False),
        sa.Column("until", sa.DateTime(timezone=True), nullable=False),
        sa.Column("by", sa.String(length=32), nullable=False),
        sa.PrimaryKeyConstraint("resource"),
    )

    sa.Table(
        "alert_observations",
        metadata,
        sa.Column("resource", sa.String(length=200), nullable=False),
        sa.Column("state", sa.String(length=40), nullable=False),
        sa.Column("nodes", sa.Text(), nullable=False),
        sa.Column("channel", sa.String(length=32), nullable=True),
        sa.Column("ts", sa.String(length=32), nullable=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("resource"),
    )

    sa.Table(
        "alert_owners",
        metadata,
        sa.Column("key", sa.String(length=400), nullable=False),
        sa.Column("deployment", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("key"),
        sa.Index("ix_alert_owners_deployment", "deployment"),
    )

    sa.Table(
        "alert_undelivered",
        metadata,
        sa.Column("key", sa.String(length=400), nullable=False),
        sa.Column("deployment", sa.String(length=64), nullable=False),
        sa.Column("channel", sa.String(length=32), nullable=False),
        sa.Column("thread_ts", sa.String(length=32), nullable=True),
        sa.Column("text", sa.Text(), nullable=False),
        sa.Column("blocks", sa.Text(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("key"),
        sa.Index("ix_alert_undelivered_deployment", "deployment"),
    )

    sa.Table(
        "answers",
        metadata,
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("public_id", sa.String(length=32), nullable=True),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("user_id", sa.String(length=32), nullable=False),
        sa.Column("channel_id", sa.String(length=32), nullable=False),
        sa.Column("question", sa.Text(), nullable=False),
        sa.Column("model", sa.String(length=300), nullable=False),
        sa.Column("tools", sa.Text(), nullable=False),
        sa.Column("verdict", sa.String(length=16), nullable=True),
        sa.Column("rated_by", sa.String(length=32), nullable=True),
        sa.Column("rated_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.UniqueConstraint("public_id"),
        sa.Index("ix_answers_at", "at"),
    )

    _numbered(
        "audit",
        metadata,
        sa.Column("user_id", sa.String(length=32), nullable=False),
        sa.Column("channel_id", sa.String(length=32), nullable=False),
        sa.Column("action", sa.String(length=32), nullable=False),
        sa.Column("command", sa.Text(), nullable=False),
        sa.Column("outcome", sa.String(length=200), nullable=False),
        sa.Column("duration_s", sa.Float(), nullable=True),
        sa.Column("thread_ts", sa.String(length=32), nullable=True),
    )

    _numbered(
        "auto_recoveries",
        metadata,
        sa.Column("resource", sa.String(length=200), nullable=False),
        sa.Column("usd", sa.Float(), nullable=False),
        sa.Column("outcome", sa.Text(), nullable=False),
    )

    _numbered(
        "bench_results",
        metadata,
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("params", sa.Text(), nullable=False),
        sa.Column("results", sa.Text(), nullable=False),
        indexed=False,
    )

    sa.Table(
        "confirmations",
        metadata,
        sa.Column("token", sa.String(length=64), nullable=False),
        sa.Column("command", sa.Text(), nullable=False),
        sa.Column("plan", sa.Text(), nullable=False),
        sa.Column("requested_by", sa.String(length=32), nullable=False),
        sa.Column("channel_id", sa.String(length=32), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("used_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("used_by", sa.String(length=32), nullable=True),
        sa.PrimaryKeyConstraint("token"),
    )

    sa.Table(
        "inflight_requests",
        metadata,
        sa.Column("request_id", sa.String(length=64), nullable=False),
        sa.Column("operation_id", sa.String(length=64), nullable=False),
        sa.Column("kind", sa.String(length=16), nullable=False),
        sa.Column("project", sa.String(length=64), nullable=False),
        sa.Column("zone", sa.String(length=64), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.String(length=32), nullable=False),
        sa.Column("channel_id", sa.String(length=32), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("sent_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("request_id"),
        sa.Index("ix_inflight_requests_operation_id", "operation_id"),
        sa.Index("ix_inflight_requests_state", "state"),
    )

    sa.Table(
        "leases",
        metadata,
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("holder", sa.String(length=128), nullable=False),
        sa.Column("acquired_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("name"),
    )

    sa.Table(
        "maintenance_windows",
        metadata,
        sa.Column("deployment", sa.String(length=64), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("opened_by", sa.String(length=32), nullable=False),
        sa.Column("opened_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("deadline", sa.DateTime(timezone=True), nullable=False),
        sa.Column("channel", sa.String(length=32), nullable=True),
        sa.Column("thread_ts", sa.String(length=32), nullable=True),
        sa.Column("closed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("outcome", sa.String(length=32), nullable=True),
        sa.Column("target", sa.String(length=64), nullable=True),
        sa.Column("work_done_at", sa.DateTime(timezone=True), nullable=True),
        sa.PrimaryKeyConstraint("deployment"),
    )

    sa.Table(
        "operation_leases",
        metadata,
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("request_id", sa.String(length=64), nullable=False),
        sa.Column("user_id", sa.String(length=32), nullable=False),
        sa.Column("command", sa.Text(), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("key"),
        sa.Index("ix_operation_leases_request_id", "request_id"),
    )

    sa.Table(
        "processed_events",
        metadata,
        sa.Column("event_id", sa.String(length=128), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("event_id"),
        sa.Index("ix_processed_events_at", "at"),
    )

    sa.Table(
        "zone_failures",
        metadata,
        sa.Column("zone", sa.String(length=64), nullable=False),
        sa.Column("accelerator_type", sa.String(length=64), nullable=False),
        sa.Column("provisioning_model", sa.String(length=32), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.UniqueConstraint("zone", "accelerator_type", "provisioning_model"),
    )

    sa.Table(
        "answer_ratings",
        metadata,
        sa.Column("answer_id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.String(length=32), nullable=False),
        sa.Column("verdict", sa.String(length=16), nullable=False),
        sa.Column("rated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["answer_id"],
            ["answers.id"],
        ),
        sa.UniqueConstraint("answer_id", "user_id"),
        sa.Index("ix_answer_ratings_answer_id", "answer_id"),
    )

    sa.Table(
        "metric_samples",
        metadata,
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("deployment", sa.String(length=64), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("kv_cache_usage", sa.Float(), nullable=True),
        sa.Column("running", sa.Float(), nullable=True),
        sa.Column("waiting", sa.Float(), nullable=True),
        sa.Column("generation_tokens", sa.Float(), nullable=True),
        sa.Column("ttft_buckets", sa.Text(), nullable=True),
        sa.Column("tpot_buckets", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("id"),
        sa.Index("ix_metric_samples_at", "at"),
        sa.Index("ix_metric_samples_deployment", "deployment"),
    )

    sa.Table(
        "followups",
        metadata,
        sa.Column("operation_id", sa.String(length=64), nullable=False),
        sa.Column("channel_id", sa.String(length=32), nullable=False),
        sa.Column("ts", sa.String(length=32), nullable=True),
        sa.Column("thread_ts", sa.String(length=32), nullable=True),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("operation_id"),
    )
    return metadata


def _numbered(
    name: str, metadata: sa.MetaData, *columns: sa.Column[object], indexed: bool = True
) -> sa.Table:
    """A baseline table of rows numbered as they come: an autoincrement `id` (its primary key), the row's
    time `at` (indexed as `ix_<name>_at` unless not `indexed`), then `columns`, in that order."""
    return sa.Table(
        name,
        metadata,
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("at", sa.DateTime(timezone=True), nullable=False),
        *columns,
        sa.PrimaryKeyConstraint("id"),
        *([sa.Index(f"ix_{name}_at", "at")] if indexed else []),
    )
