"""The suite's shortcut for new databases (tests/support/migrated.py) gives the schema a migration
gives: a copied SQLite file and a replayed PostgreSQL schema have every table, column and index a
database migrated from scratch has, and stand at the newest revision."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from sqlalchemy import Connection, text

from support.api import drop_schema
from support.migrated import fresh_migrations
from toolweave.store import Database
from toolweave.store.database import SCHEMA_HEAD


async def shape(db: Database) -> set[tuple[str, ...]]:
    """Every column and index, as the database itself describes them (schema names left out)."""

    def described(conn: Connection) -> set[tuple[str, ...]]:
        if conn.dialect.name == "sqlite":
            rows = conn.execute(text("SELECT type, name, tbl_name, coalesce(sql, '') FROM sqlite_master"))
            return {tuple(row) for row in rows}
        schema = conn.execute(text("SELECT current_schema()")).scalar_one()
        columns = conn.execute(
            text(
                "SELECT table_name, column_name, data_type, is_nullable, coalesce(column_default, '') "
                "FROM information_schema.columns WHERE table_schema = current_schema()"
            )
        )
        indexes = conn.execute(
            text("SELECT tablename, indexname, indexdef FROM pg_indexes WHERE schemaname = current_schema()")
        )
        found = {("column", *row) for row in columns}
        found |= {
            ("index", table, name, definition.replace(f"{schema}.", ""))
            for table, name, definition in indexes
        }
        return found

    async with db.read() as conn:
        return await conn.run_sync(described)


async def test_a_copied_or_replayed_database_has_the_migrated_schema(
    make_db: Callable[[], Database], db_url: tuple[str, str | None], tmp_path: Path
) -> None:
    url, schema = db_url
    first = (  # the process's first new database, migrated for real, so the next is the shortcut's
        Database.from_url(url, schema=f"{schema}_first")
        if schema is not None
        else Database.from_url(f"sqlite:///{tmp_path / 'first.db'}")
    )
    async with first:
        pass
    if schema is not None:
        await drop_schema(url, f"{schema}_first")
    copied = make_db()  # the shortcut: a copy (SQLite) or the replayed statements (PostgreSQL)
    await copied.start()
    copied_shape = await shape(copied)
    async with copied.write() as conn:  # the same target, emptied, then migrated from scratch
        if conn.dialect.name == "sqlite":
            tables = [
                row[0]
                for row in await conn.execute(text("SELECT name FROM sqlite_master WHERE type = 'table'"))
            ]
            for table in tables:
                await conn.execute(text(f'DROP TABLE IF EXISTS "{table}"'))
        else:
            schema = (await conn.execute(text("SELECT current_schema()"))).scalar()
            await conn.execute(text(f'DROP SCHEMA "{schema}" CASCADE'))
    await copied.close()
    with fresh_migrations():
        migrated = make_db()
        await migrated.start()
    assert copied_shape == await shape(migrated)
    async with migrated.read() as conn:
        assert (await conn.execute(text("SELECT version_num FROM alembic_version"))).scalar() == SCHEMA_HEAD
