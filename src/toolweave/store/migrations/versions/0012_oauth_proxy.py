"""The OAuth proxy's clients, grants, one-time secrets (hashed) and signing keys (`[auth.proxy]`).

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-06 03:10:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0012"
down_revision: str | None = "0011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")


def upgrade() -> None:
    op.create_table(
        "oauth_proxy_clients",
        sa.Column("client_id", sa.String(512), nullable=False),
        sa.Column("secret_hash", sa.String(64), nullable=True),
        sa.Column("client", JSON, nullable=False),
        sa.Column("source", sa.String(16), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("client_id", name="pk_oauth_proxy_clients"),
    )
    op.create_index("ix_oauth_proxy_clients_created_at", "oauth_proxy_clients", ["created_at"])
    op.create_table(
        "oauth_proxy_grants",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("client_id", sa.String(512), nullable=False),
        sa.Column("tenant", sa.String(128), nullable=False),
        sa.Column("subject", sa.Text(), nullable=False),
        sa.Column("scope", sa.Text(), nullable=False),
        sa.Column("resource", sa.Text(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.Column("revoked_at", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_oauth_proxy_grants"),
    )
    op.create_index("ix_oauth_proxy_grants_client_id", "oauth_proxy_grants", ["client_id"])
    op.create_index("ix_oauth_proxy_grants_tenant", "oauth_proxy_grants", ["tenant"])
    op.create_index("ix_oauth_proxy_grants_expires_at", "oauth_proxy_grants", ["expires_at"])
    op.create_table(
        "oauth_proxy_tokens",
        sa.Column("token_hash", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(16), nullable=False),
        sa.Column("grant_id", sa.String(32), nullable=True),
        sa.Column("client_id", sa.String(512), nullable=False),
        sa.Column("data", JSON, nullable=False),
        sa.Column("expires_at", sa.Float(), nullable=False),
        sa.Column("used_at", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("token_hash", name="pk_oauth_proxy_tokens"),
    )
    op.create_index("ix_oauth_proxy_tokens_grant_id", "oauth_proxy_tokens", ["grant_id"])
    op.create_index("ix_oauth_proxy_tokens_expires_at", "oauth_proxy_tokens", ["expires_at"])
    op.create_table(
        "oauth_proxy_keys",
        sa.Column("kid", sa.String(64), nullable=False),
        sa.Column("secret", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.Float(), nullable=False),
        sa.Column("retired_at", sa.Float(), nullable=True),
        sa.PrimaryKeyConstraint("kid", name="pk_oauth_proxy_keys"),
    )


def downgrade() -> None:
    op.drop_table("oauth_proxy_keys")
    op.drop_table("oauth_proxy_tokens")
    op.drop_table("oauth_proxy_grants")
    op.drop_table("oauth_proxy_clients")
