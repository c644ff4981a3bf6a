"""Index the alert ledger on (status, at).

The alert tick's queries (`AlertLedger.rows`, `open_alerts`: the sent alerts since a time) read the index
instead of scanning the whole ledger, which grows by every alert key ever recorded.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-03
"""

from __future__ import annotations

from alembic import op

revision = "0002"
down_revision: str | None = "0001"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Add ix_alert_ledger_status_at."""
    op.create_index("ix_alert_ledger_status_at", "alert_ledger", ["status", "at"])


def downgrade() -> None:
    """Drop ix_alert_ledger_status_at."""
    op.drop_index("ix_alert_ledger_status_at", table_name="alert_ledger")
