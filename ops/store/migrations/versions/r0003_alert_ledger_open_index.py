"""Index the alert ledger's open alerts on (status, acked_by, resolved_at, at).

The alert tick reads the open alerts of the last week (`AlertLedger.open_alerts`: sent, neither acknowledged
nor resolved) to resolve the countdowns and maintenance windows that no longer apply. On (status, at) that
read visited every sent alert of the week, resolved ones included: the history of resources long gone, read
again on every tick. On this index it visits the open ones only (SQLite and PostgreSQL both search an index
for `IS NULL`).

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-06
"""

from __future__ import annotations

from alembic import op

revision = "0003"
down_revision: str | None = "0002"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Add ix_alert_ledger_open."""
    op.create_index("ix_alert_ledger_open", "alert_ledger", ["status", "acked_by", "resolved_at", "at"])


def downgrade() -> None:
    """Drop ix_alert_ledger_open."""
    op.drop_index("ix_alert_ledger_open", table_name="alert_ledger")
