"""Record which deployments observe a resource (alert_observers).

Deployments share one last observation per resource (`alert_observations`). A deployment's hourly prune
forgot every old observation of its answered zones that it did not list, so the observation of a resource
only another deployment lists (the same zone name in another project, or another deployment of the same
project) went too. With this table a deployment forgets only its own row, and the observation goes with the
last deployment that observed it. Observations made before this revision have no row: the `default`
deployment's, as a ledger key without an owner is; a named deployment records those it lists at its next
prune.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-06
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision: str | None = "0003"
branch_labels: str | None = None
depends_on: str | None = None


def upgrade() -> None:
    """Create alert_observers (resource, deployment)."""
    op.create_table(
        "alert_observers",
        sa.Column("resource", sa.String(length=200), nullable=False),
        sa.Column("deployment", sa.String(length=64), nullable=False),
        sa.PrimaryKeyConstraint("resource", "deployment"),
    )


def downgrade() -> None:
    """Drop alert_observers."""
    op.drop_table("alert_observers")
