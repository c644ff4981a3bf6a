"""The baseline: every table as the release before migrations made it (ops/store/migrations/baseline.py).

Revision ID: 0001
Revises:
Create Date: 2026-12-03
"""

from __future__ import annotations

from alembic import op

from ops.store.migrations.baseline import baseline_metadata

revision = "0001"
down_revision: str | None = None
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Create the baseline tables (those missing: a database made before migrations keeps its own)."""
    baseline_metadata().create_all(op.get_bind(), checkfirst=True)


def downgrade() -> None:
    """Drop every baseline table."""
    baseline_metadata().drop_all(op.get_bind())
