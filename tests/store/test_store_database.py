from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Connection, text

from support.migrated import fresh_migrations
from toolweave.store import Database, KeyRepository, StoreError, alembic_config
from toolweave.store.database import MIGRATIONS_DIR, SCHEMA_HEAD
from toolweave.store.tables import metadata

TABLES = {
    "tenants",
    "api_keys",
    "composite_tools",
    "composite_tool_versions",
    "connections",
    "gateway_instances",
    "ui_sessions",
    "runs",
    "run_steps",
}


@pytest.fixture(autouse=True)
def _migrated_from_scratch() -> Iterator[None]:
    """Migrating is this module's subject: no database of it starts as a copy (support/migrated.py)."""
    with fresh_migrations():
        yield


def head_revision() -> str:
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head


async def versions_in(db: Database) -> list[str]:
    async with db.read() as conn:
        return list((await conn.execute(text("SELECT version_num FROM alembic_version"))).scalars())


async def table_names(db: Database) -> set[str]:
    def names(conn: Connection) -> set[str]:
        from sqlalchemy import inspect

        return set(inspect(conn).get_table_names())

    async with db.read() as conn:
        return await conn.run_sync(names)


# -- URLs -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "driver", "dialect"),
    [
        ("sqlite:///toolweave.db", "sqlite+aiosqlite", "sqlite"),
        ("sqlite+aiosqlite:///toolweave.db", "sqlite+aiosqlite", "sqlite"),
        ("postgresql://postgres@127.0.0.1:5432/test", "postgresql+asyncpg", "postgresql"),
        ("postgres://postgres@127.0.0.1/test", "postgresql+asyncpg", "postgresql"),
        ("postgresql+asyncpg://postgres@127.0.0.1/test", "postgresql+asyncpg", "postgresql"),
    ],
)
def test_from_url_picks_the_async_driver(url: str, driver: str, dialect: str) -> None:
    db = Database.from_url(url)
    assert db.url.drivername == driver
    assert db.dialect == dialect


@pytest.mark.parametrize("url", ["sqlite:///:memory:", "sqlite://"])
def test_memory_urls(url: str) -> None:
    db = Database.from_url(url)
    assert db.is_memory
    assert repr(db) == "Database('sqlite:///:memory:')"
    assert db.sqlite_path is None


def test_sqlite_paths_expand_home_and_become_absolute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    db = Database.from_url("sqlite:///~/data/tw.db")
    assert db.sqlite_path == tmp_path / "home" / "data" / "tw.db"
    monkeypatch.chdir(tmp_path)
    assert Database.from_url("sqlite:///rel.db").sqlite_path == tmp_path / "rel.db"


def test_postgres_schema_and_sslmode_come_from_the_query() -> None:
    db = Database.from_url("postgresql://u:pw@h/db?schema=gateway_a&sslmode=require")
    assert db.schema == "gateway_a"
    assert dict(db.url.query) == {"ssl": "require"}
    assert "pw" not in repr(db)


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("mysql://root@localhost/db", "unsupported database URL scheme 'mysql'"),
        ("not a url", "invalid database URL"),
        ("postgresql://h/db?schema=Bad-Name", "invalid PostgreSQL schema name"),
    ],
)
def test_bad_urls_are_clear_errors(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Database.from_url(url)


async def test_missing_asyncpg_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "asyncpg", None)
    with pytest.raises(StoreError, match=r"pip install 'toolweave\[postgres\]'"):
        await Database.from_url("postgresql://postgres@127.0.0.1/test").start()


async def test_engine_needs_start(tmp_path: Path) -> None:
    db = Database.from_url(f"sqlite:///{tmp_path / 'x.db'}")
    with pytest.raises(RuntimeError, match="not started"):
        _ = db.engine
    await db.start()
    await db.close()
    with pytest.raises(RuntimeError, match="not started"):
        _ = db.engine


# -- migrations ---------------------------------------------------------------


def test_migrations_ship_inside_the_package() -> None:
    for name in ("env.py", "script.py.mako", "versions/0001_initial.py"):
        assert (MIGRATIONS_DIR / name).is_file(), name


async def test_start_creates_every_table_at_head(db: Database) -> None:
    assert await table_names(db) >= TABLES
    assert await versions_in(db) == [head_revision()]


async def test_start_is_idempotent(db: Database, make_db: Callable[[], Database]) -> None:
    engine = db.engine
    await asyncio.gather(db.start(), db.start())
    assert db.engine is engine
    await db.close()
    await db.start()
    again = make_db()
    await again.start()
    assert await versions_in(again) == [head_revision()]


async def test_concurrent_starts_on_an_empty_database(make_db: Callable[[], Database]) -> None:
    gateways = [make_db() for _ in range(4)]
    await asyncio.gather(*(gateway.start() for gateway in gateways))
    assert await versions_in(gateways[0]) == [head_revision()]
    assert await table_names(gateways[-1]) >= TABLES


async def test_concurrent_starts_from_separate_processes(
    db_url: tuple[str, str | None], make_db: Callable[[], Database]
) -> None:
    url, schema = db_url
    script = (
        "import asyncio, sys\n"
        "from toolweave.store import Database\n"
        "async def main():\n"
        "    db = Database.from_url(sys.argv[1], schema=sys.argv[2] or None)\n"
        "    await db.start()\n"
        "    await db.close()\n"
        "asyncio.run(main())\n"
    )
    processes = [
        await asyncio.create_subprocess_exec(
            sys.executable, "-c", script, url, schema or "", stderr=asyncio.subprocess.PIPE
        )
        for _ in range(3)
    ]
    for process in processes:
        _, stderr = await asyncio.wait_for(process.communicate(), timeout=60)
        assert process.returncode == 0, stderr.decode()
    checker = make_db()
    await checker.start()
    assert await versions_in(checker) == [head_revision()]


def test_the_head_a_start_checks_without_alembic_is_the_migrations_head() -> None:
    # a database at SCHEMA_HEAD is opened without running Alembic: a new migration must move it
    assert head_revision() == SCHEMA_HEAD


async def test_a_database_at_head_is_opened_without_loading_alembic(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'at-head.db'}"
    async with Database.from_url(url):  # a new database: migrated
        pass
    script = (
        "import asyncio, sys\n"
        "from toolweave.store import Database\n"
        f"async def main():\n    async with Database.from_url({url!r}): pass\n"
        "asyncio.run(main())\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('alembic', 'mako')))\n"
    )
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", script, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), timeout=60)
    assert process.returncode == 0, stderr.decode()
    assert stdout.decode().strip() == "[]"


async def test_a_schema_newer_than_the_code_is_refused(db: Database, make_db: Callable[[], Database]) -> None:
    async with db.write() as conn:
        await conn.execute(text("UPDATE alembic_version SET version_num = '9999'"))
    with pytest.raises(StoreError, match="revision 9999, which this toolweave version does not know"):
        await make_db().start()


@pytest.mark.filterwarnings("ignore:.*expression-based index")
async def test_migrations_match_the_table_definitions(db: Database) -> None:
    def diff(conn: Connection) -> list[object]:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        return compare_metadata(context, metadata)

    async with db.read() as conn:
        differences = await conn.run_sync(diff)
    assert differences == []


# -- SQLite specifics -----------------------------------------------------------


async def test_sqlite_file_runs_in_wal_with_foreign_keys(tmp_path: Path) -> None:
    async with Database.from_url(f"sqlite:///{tmp_path / 'sub' / 'tw.db'}") as db, db.read() as conn:
        journal = (await conn.execute(text("PRAGMA journal_mode"))).scalar()
        foreign_keys = (await conn.execute(text("PRAGMA foreign_keys"))).scalar()
        busy = (await conn.execute(text("PRAGMA busy_timeout"))).scalar()
    assert (journal, foreign_keys, busy) == ("wal", 1, 10_000)


async def test_memory_database_is_shared_and_serialises_concurrent_writers() -> None:
    async with Database.from_url("sqlite:///:memory:") as db:
        keys = KeyRepository(db)
        await asyncio.gather(*(keys.create(f"tenant{n % 3}", ["tools:read"]) for n in range(20)))
        assert len(await keys.list()) == 20
        assert len(await keys.list("tenant0")) == 7


async def test_writes_roll_back_on_error(db: Database) -> None:
    with pytest.raises(RuntimeError):
        async with db.write() as conn:
            await conn.execute(text("INSERT INTO tenants (id, created_at) VALUES ('t1', CURRENT_TIMESTAMP)"))
            raise RuntimeError("abort")
    async with db.read() as conn:
        assert (await conn.execute(text("SELECT count(*) FROM tenants"))).scalar() == 0
