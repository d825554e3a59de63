"""Virtual servers defined through the API, with their version history.

Revision ID: 0014
Revises: 0013
Create Date: 2026-12-06 03:10:00
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0014"
down_revision: str | None = "0013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
NOT_DELETED = sa.text("deleted_at IS NULL")


def _ts(name: str, nullable: bool = False) -> sa.Column[datetime]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def upgrade() -> None:
    op.create_table(
        "virtual_servers",
        sa.Column("id", sa.String(36), nullable=False),
        sa.Column(
            "tenant",
            sa.String(128),
            sa.ForeignKey("tenants.id", ondelete="CASCADE", name="fk_virtual_servers_tenant_tenants"),
            nullable=True,
        ),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        _ts("created_at"),
        _ts("updated_at"),
        _ts("deleted_at", nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_virtual_servers"),
    )
    op.create_index("ix_virtual_servers_tenant", "virtual_servers", ["tenant"])
    op.create_index(
        "uq_virtual_servers_name",
        "virtual_servers",
        ["name"],
        unique=True,
        sqlite_where=NOT_DELETED,
        postgresql_where=NOT_DELETED,
    )
    op.create_table(
        "virtual_server_versions",
        sa.Column(
            "server_id",
            sa.String(36),
            sa.ForeignKey(
                "virtual_servers.id",
                ondelete="CASCADE",
                name="fk_virtual_server_versions_server_id_virtual_servers",
            ),
            nullable=False,
        ),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("definition", JSON, nullable=False),
        sa.Column("note", sa.Text(), nullable=True),
        _ts("created_at"),
        sa.PrimaryKeyConstraint("server_id", "version", name="pk_virtual_server_versions"),
    )


def downgrade() -> None:
    op.drop_table("virtual_server_versions")
    op.drop_index("uq_virtual_servers_name", table_name="virtual_servers")
    op.drop_index("ix_virtual_servers_tenant", table_name="virtual_servers")
    op.drop_table("virtual_servers")
