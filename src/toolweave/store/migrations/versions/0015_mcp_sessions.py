"""Handshake-era MCP sessions in the database, shared by gateways on one PostgreSQL without Redis.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-06 06:40:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0015"
down_revision: str | None = "0014"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "mcp_sessions",
        sa.Column("id", sa.String(128), nullable=False),
        sa.Column("path", sa.String(512), nullable=False),
        sa.Column("tenant", sa.String(128), nullable=False),
        sa.Column("label", sa.String(256), nullable=False),
        sa.Column("version", sa.String(32), nullable=True),
        sa.Column("client", sa.Text(), nullable=True),
        sa.Column("state", sa.Text(), nullable=True),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_mcp_sessions"),
    )
    op.create_index("ix_mcp_sessions_expires_at", "mcp_sessions", ["expires_at"])
    op.create_index("ix_mcp_sessions_tenant", "mcp_sessions", ["tenant"])


def downgrade() -> None:
    op.drop_index("ix_mcp_sessions_tenant", table_name="mcp_sessions")
    op.drop_index("ix_mcp_sessions_expires_at", table_name="mcp_sessions")
    op.drop_table("mcp_sessions")
