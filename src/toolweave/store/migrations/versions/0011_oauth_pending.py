"""OAuth authorizations in progress, shared by the gateways on the database (any takes the callback).

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-06 03:10:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011"
down_revision: str | None = "0010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "oauth_pending",
        sa.Column("state_hash", sa.String(64), nullable=False),
        sa.Column("backend", sa.String(64), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.Column("redirect", sa.LargeBinary(), nullable=True),
        sa.Column("ok", sa.Boolean(), nullable=True),
        sa.Column("outcome", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("state_hash", name="pk_oauth_pending"),
    )
    op.create_index("ix_oauth_pending_expires_at", "oauth_pending", ["expires_at"])


def downgrade() -> None:
    op.drop_table("oauth_pending")
