"""Initial schema: tenants, API keys, composite tools with versions, connections, runs.

Revision ID: 0001
Revises:
Create Date: 2025-01-01 00:00:00
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0001"
down_revision: str | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

JSON = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
NOT_DELETED = sa.text("deleted_at IS NULL")


def _ts(name: str, nullable: bool = False) -> sa.Column[datetime]:
    return sa.Column(name, sa.DateTime(timezone=True), nullable=nullable)


def _tenant_fk(table: str, nullable: bool) -> sa.Column[str]:
    return sa.Column(
        "tenant",
        sa.String(128),
        sa.ForeignKey("tenants.id", ondelete="CASCADE", name=f"fk_{table}_tenant_tenants"),
        nullable=nullable,
    )


def upgrade() -> None:
    op.create_table(
        "tenants",
        sa.Column("id", sa.String(128), nullable=False),
        _ts("created_at"),
        sa.PrimaryKeyConstraint("id", name="pk_tenants"),
    )
    _create_api_keys()
    _create_composite_tools()
    _create_connections()
    _create_runs()


def _create_api_keys() -> None:
    op.create_table(
        "api_keys",
        sa.Column("id", sa.String(32), nullable=False),
        _tenant_fk("api_keys", nullable=False),
        sa.Column("name", sa.String(200), nullable=True),
        sa.Column("prefix", sa.String(16), nullable=False),
        sa.Column("key_hash", sa.String(64), nullable=False),
        sa.Column("scopes", JSON, nullable=False),
        _ts("created_at"),
        _ts("last_used_at", nullable=True),
        _ts("revoked_at", nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_api_keys"),
        sa.UniqueConstraint("key_hash", name="uq_api_keys_key_hash"),
    )
    op.create_index("ix_api_keys_tenant", "api_keys", ["tenant"])
    op.create_index("ix_api_keys_prefix", "api_keys", ["prefix"])


def _create_composite_tools() -> None:
    op.create_table(
        "composite_tools",
        sa.Column("id", sa.String(36), nullable=False),
        _tenant_fk("composite_tools", nullable=True),
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("status", sa.String(16), nullable=False),
        sa.Column("validation_errors", JSON, nullable=True),
        sa.Column("version", sa.Integer(), nullable=False),
        _ts("created_at"),
        _ts("updated_at"),
        _ts("deleted_at", nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_composite_tools"),
    )
    op.create_index("ix_composite_tools_tenant", "composite_tools", ["tenant"])
    op.create_index("ix_composite_tools_name", "composite_tools", ["name"])
    op.create_index(
        "uq_composite_tools_scope_name",
        "composite_tools",
        [sa.text("coalesce(tenant, '')"), "name"],
        unique=True,
        sqlite_where=NOT_DELETED,
        postgresql_where=NOT_DELETED,
    )
    op.create_table(
        "composite_tool_versions",
        sa.Column(
            "tool_id",
            sa.String(36),
            sa.ForeignKey(
                "composite_tools.id",
                ondelete="CASCADE",
                name="fk_composite_tool_versions_tool_id_composite_tools",
            ),
            nullable=False,
        ),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("definition", JSON, nullable=False),
        sa.Column("note", sa.Text(), nullable=True),
        _ts("created_at"),
        sa.PrimaryKeyConstraint("tool_id", "version", name="pk_composite_tool_versions"),
    )


def _create_connections() -> None:
    op.create_table(
        "connections",
        sa.Column("id", sa.String(32), nullable=False),
        _tenant_fk("connections", nullable=True),
        sa.Column("backend", sa.String(64), nullable=False),
        sa.Column("key_names", JSON, nullable=False),
        sa.Column("secret", sa.LargeBinary(), nullable=False),
        _ts("created_at"),
        _ts("updated_at"),
        sa.PrimaryKeyConstraint("id", name="pk_connections"),
    )
    op.create_index("ix_connections_tenant", "connections", ["tenant"])
    op.create_index(
        "uq_connections_scope_backend",
        "connections",
        [sa.text("coalesce(tenant, '')"), "backend"],
        unique=True,
    )


def _create_runs() -> None:
    op.create_table(
        "gateway_instances",
        sa.Column("id", sa.String(32), nullable=False),
        sa.Column("hostname", sa.String(255), nullable=False),
        sa.Column("pid", sa.Integer(), nullable=False),
        sa.Column("started_at", sa.Float(), nullable=False),
        sa.Column("last_seen", sa.Float(), nullable=False),
        sa.PrimaryKeyConstraint("id", name="pk_gateway_instances"),
    )
    op.create_table(
        "runs",
        sa.Column("id", sa.String(64), nullable=False),
        sa.Column("tool", sa.Text(), nullable=False),
        sa.Column("kind", sa.String(32), nullable=False),
        sa.Column("tenant", sa.String(128), nullable=True),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("arguments", JSON, nullable=False),
        sa.Column("operation", sa.Text(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("latency_ms", sa.Float(), nullable=False),
        sa.Column("started_at", sa.Float(), nullable=False),
        sa.Column("finished_at", sa.Float(), nullable=True),
        sa.Column("state", JSON, nullable=False),
        sa.Column("owner", sa.String(32), nullable=True),
        sa.PrimaryKeyConstraint("id", name="pk_runs"),
    )
    op.create_index("ix_runs_tenant", "runs", ["tenant"])
    op.create_index("ix_runs_started_at", "runs", ["started_at"])
    op.create_index("ix_runs_status_owner", "runs", ["status", "owner"])
    op.create_table(
        "run_steps",
        sa.Column(
            "run_id",
            sa.String(64),
            sa.ForeignKey("runs.id", ondelete="CASCADE", name="fk_run_steps_run_id_runs"),
            nullable=False,
        ),
        sa.Column("step_id", sa.Text(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("status", sa.String(32), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("latency_ms", sa.Float(), nullable=False),
        sa.Column("output", JSON, nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.PrimaryKeyConstraint("run_id", "step_id", name="pk_run_steps"),
    )


def downgrade() -> None:
    for table in (
        "run_steps",
        "runs",
        "gateway_instances",
        "connections",
        "composite_tool_versions",
        "composite_tools",
        "api_keys",
        "tenants",
    ):
        op.drop_table(table)
