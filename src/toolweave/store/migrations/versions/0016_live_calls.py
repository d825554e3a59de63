"""Try-it calls followed from any gateway, and NOTIFY payloads of any size (PostgreSQL without Redis).

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-06 09:20:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "ui_live_calls",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("snapshot", sa.Text(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_ui_live_calls"),
    )
    op.create_index("ix_ui_live_calls_expires_at", "ui_live_calls", ["expires_at"])
    op.create_table(
        "channel_messages",
        sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("payload", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_channel_messages"),
    )
    op.create_index("ix_channel_messages_created_at", "channel_messages", ["created_at"])


def downgrade() -> None:
    op.drop_index("ix_channel_messages_created_at", table_name="channel_messages")
    op.drop_table("channel_messages")
    op.drop_index("ix_ui_live_calls_expires_at", table_name="ui_live_calls")
    op.drop_table("ui_live_calls")
