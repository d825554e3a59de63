"""A web UI session logged in through an identity provider keeps who it is (tenant, subject,
scopes, expiry), as a key's session keeps the key's id.

Revision ID: 0007
Revises: 0006
Create Date: 2026-12-06 00:40:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "0007"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    json = sa.JSON().with_variant(postgresql.JSONB(), "postgresql")
    with op.batch_alter_table("ui_sessions") as batch:
        batch.add_column(sa.Column("identity", json, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("ui_sessions") as batch:
        batch.drop_column("identity")
