"""Tool vectors of search mode's meaning-based ranking (`[search.embeddings]`).

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-24 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | None = "0002"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "tool_vectors",
        sa.Column("model", sa.String(200), nullable=False),
        sa.Column("text_key", sa.String(64), nullable=False),
        sa.Column("vector", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("model", "text_key", name="pk_tool_vectors"),
    )


def downgrade() -> None:
    op.drop_table("tool_vectors")
