"""Per-tool health rolled up per minute and per hour: calls, errors, a latency histogram.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-05 23:55:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0010"
down_revision: str | None = "0009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "tool_stats",
        sa.Column("span", sa.Integer(), nullable=False),
        sa.Column("bucket", sa.Integer(), nullable=False),
        sa.Column("tool", sa.Text(), nullable=False),
        sa.Column("backend", sa.Text(), nullable=False),
        sa.Column("tenant", sa.String(128), nullable=False),
        sa.Column("calls", sa.Integer(), nullable=False),
        sa.Column("errors", sa.Integer(), nullable=False),
        sa.Column("total_ms", sa.Float(), nullable=False),
        sa.Column("histogram", JSON, nullable=False),
        sa.PrimaryKeyConstraint("span", "bucket", "tool", "backend", "tenant", name="pk_tool_stats"),
    )


def downgrade() -> None:
    op.drop_table("tool_stats")
