"""SSE events of MCP sessions shared through PostgreSQL without Redis (streams resumable on any gateway).

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-06 09:40:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0017"
down_revision: str | None = "0016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "mcp_events",
        sa.Column("session_id", sa.String(128), nullable=False),
        sa.Column("replica", sa.String(16), nullable=False),
        sa.Column("seq", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("stream_id", sa.Text(), nullable=False),
        sa.Column("data", sa.Text(), nullable=False),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("session_id", "replica", "seq", name="pk_mcp_events"),
    )
    op.create_index("ix_mcp_events_expires_at", "mcp_events", ["expires_at"])


def downgrade() -> None:
    op.drop_index("ix_mcp_events_expires_at", table_name="mcp_events")
    op.drop_table("mcp_events")
