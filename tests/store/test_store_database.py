from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, text

from tests_store_helpers import table_names
from toolweave.store import Database, alembic_config
from toolweave.store.database import MIGRATIONS_DIR
from toolweave.store.tables import metadata

from .conftest import drop_schema


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head
