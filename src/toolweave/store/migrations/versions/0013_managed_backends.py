"""Backends added in the web UI (`managed_backends`): each one's config entry, encrypted.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-06 03:35:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013"
down_revision: str | None = "0012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "managed_backends",
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("transport", sa.String(16), nullable=False),
        sa.Column("entry", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("updated_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_managed_backends"),
    )


def downgrade() -> None:
    op.drop_table("managed_backends")
