"""OAuth grants to backends per (tenant, user, backend), encrypted (`[backends.oauth]`).

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-05 23:50:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "oauth_tokens",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column(
            "tenant",
            sa.String(128),
            sa.ForeignKey("tenants.id", ondelete="CASCADE", name="fk_oauth_tokens_tenant_tenants"),
            nullable=True,
        ),
        sa.Column("subject", sa.String(255), nullable=False),
        sa.Column("backend", sa.String(64), nullable=False),
        sa.Column("secret", sa.LargeBinary(), nullable=False),
        sa.Column("authorized", sa.Boolean(), nullable=False),
        sa.Column("scope", sa.Text(), nullable=True),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_oauth_tokens"),
    )
    op.create_index("ix_oauth_tokens_tenant", "oauth_tokens", ["tenant"])
    op.create_index(
        "uq_oauth_tokens_owner",
        "oauth_tokens",
        [sa.text("coalesce(tenant, '')"), "subject", "backend"],
        unique=True,
    )


def downgrade() -> None:
    op.drop_table("oauth_tokens")
