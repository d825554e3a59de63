"""The database handle: URL normalisation, engine setup, migrations on start.

One `Database` per gateway process. `start()` migrates to the newest schema
before anything queries it, so a gateway never runs against a schema it does
not know; two gateways starting together serialise on a lock instead of
racing through the same migration.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import orjson
from sqlalchemy import Connection, event, inspect, text
from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.ext.asyncio import AsyncConnection, AsyncEngine, create_async_engine
from sqlalchemy.pool import AsyncAdaptedQueuePool

from toolweave.store.errors import StoreError

if TYPE_CHECKING:  # Alembic is imported only when there is something to migrate
    from alembic.config import Config as AlembicConfig
    from alembic.script import ScriptDirectory

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
DEFAULT_BUSY_TIMEOUT_MS = 10_000

_BEGIN_OPTION = "toolweave_sqlite_begin"
_SCHEMA_RE = re.compile(r"^[a-z_][a-z0-9_]{0,62}$")
_POSTGRES_SCHEMES = {"postgresql", "postgres", "postgresql+asyncpg"}
_SQLITE_SCHEMES = {"sqlite", "sqlite+aiosqlite"}

Dialect = Literal["sqlite", "postgresql"]
SCHEMA_HEAD = "0017"
"""The newest migration's revision (`migrations/versions`): a database already at it is opened without
loading Alembic. A test holds it equal to the migrations' head, so a new migration cannot be skipped."""
VERSION_TABLE = "alembic_version"


def _json_dumps(value: Any) -> str:
    """Lenient on purpose: run outputs may hold values JSON has no type for; they become strings."""
    return orjson.dumps(value, default=str, option=orjson.OPT_NON_STR_KEYS).decode()


def _json_loads(value: str | bytes | float) -> Any:
    """SQLite gives a column declared JSON numeric affinity, so a bare number comes back as one."""
    if isinstance(value, int | float):
        return value
    return orjson.loads(value)


def alembic_config() -> AlembicConfig:
    """The Alembic configuration, built in code so no alembic.ini has to ship or be found.

    Also what a developer passes to `alembic.command.revision(...)` to add a migration.
    """
    from alembic.config import Config as AlembicConfig

    config = AlembicConfig()
    folder = str(MIGRATIONS_DIR).replace("%", "%%")  # ConfigParser interpolation
    config.set_main_option("script_location", folder)
    config.set_main_option("version_locations", f"{folder}/versions")
    return config


def _normalise_sqlite(url: URL) -> tuple[URL, Path | None]:
    database = url.database or ":memory:"
    if database == ":memory:":
        return url.set(drivername="sqlite+aiosqlite", database=":memory:", query={}), None
    path = Path(database).expanduser().absolute()
    return url.set(drivername="sqlite+aiosqlite", database=str(path)), path


def _normalise_postgres(url: URL) -> tuple[URL, str | None]:
    query = dict(url.query)
    schema = query.pop("schema", None)
    sslmode = query.pop("sslmode", None)
    if sslmode is not None:
        query["ssl"] = sslmode
    return url.set(drivername="postgresql+asyncpg", query=query), _single(schema)


def _single(value: str | tuple[str, ...] | None) -> str | None:
    return value[-1] if isinstance(value, tuple) else value


def _parse(url: str) -> URL:
    try:
        return make_url(url)
    except ArgumentError:
        raise ValueError(
            "invalid database URL: expected sqlite:///path.db, sqlite:///:memory: or postgresql://user@host/db"
        ) from None


def _advisory_key(name: str) -> int:
    """A stable signed 64-bit lock id; scoped by schema so separate schemas do not wait on each other."""
    digest = hashlib.sha256(f"toolweave-migrations:{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


class Database:
    """An async engine plus the schema it was migrated to. Build with `from_url`, then `await start()`."""

    def __init__(
        self,
        url: URL,
        dialect: Dialect,
        *,
        sqlite_path: Path | None = None,
        schema: str | None = None,
        busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
        echo: bool = False,
    ) -> None:
        self.url = url
        self.dialect: Dialect = dialect
        self.sqlite_path = sqlite_path
        self.schema = schema
        self.busy_timeout_ms = busy_timeout_ms
        self._echo = echo
        self._engine: AsyncEngine | None = None
        self._start_lock = asyncio.Lock()

    @classmethod
    def from_url(
        cls,
        url: str,
        *,
        schema: str | None = None,
        busy_timeout_ms: int = DEFAULT_BUSY_TIMEOUT_MS,
        echo: bool = False,
    ) -> Database:
        """Accept the URLs users write (`sqlite:///x.db`, `postgresql://...`) and pick the async driver.

        PostgreSQL takes an optional schema (the `schema` argument or a `?schema=` query
        parameter) so several gateways or test runs can share one database without sharing tables.
        """
        parsed = _parse(url)
        if parsed.drivername in _SQLITE_SCHEMES:
            async_url, path = _normalise_sqlite(parsed)
            return cls(async_url, "sqlite", sqlite_path=path, busy_timeout_ms=busy_timeout_ms, echo=echo)
        if parsed.drivername in _POSTGRES_SCHEMES:
            async_url, url_schema = _normalise_postgres(parsed)
            chosen = schema or url_schema
            if chosen is not None and not _SCHEMA_RE.match(chosen):
                raise ValueError(
                    f"invalid PostgreSQL schema name {chosen!r}: use lowercase letters, digits, _"
                )
            return cls(async_url, "postgresql", schema=chosen, busy_timeout_ms=busy_timeout_ms, echo=echo)
        raise ValueError(
            f"unsupported database URL scheme {parsed.drivername!r}: use sqlite:///path.db or postgresql://..."
        )

    def __repr__(self) -> str:
        shown = "sqlite:///:memory:" if self.is_memory else self.url.render_as_string(hide_password=True)
        return f"Database({shown!r})"

    @property
    def is_memory(self) -> bool:
        return self.dialect == "sqlite" and self.sqlite_path is None

    @property
    def engine(self) -> AsyncEngine:
        if self._engine is None:
            raise RuntimeError("the database is not started: await db.start() first")
        return self._engine

    async def start(self) -> None:
        """Create the engine and migrate to the newest schema. Safe to call again."""
        async with self._start_lock:
            if self._engine is not None:
                return
            engine = self._create_engine()
            try:
                await self._migrate(engine)
            except BaseException:
                await engine.dispose()
                raise
            self._engine = engine

    async def close(self) -> None:
        if self._engine is not None:
            engine, self._engine = self._engine, None
            await engine.dispose()

    async def __aenter__(self) -> Database:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    @asynccontextmanager
    async def read(self) -> AsyncIterator[AsyncConnection]:
        """A connection for queries; SQLite readers never take the write lock."""
        async with self.engine.connect() as conn:
            yield conn

    @asynccontextmanager
    async def write(self) -> AsyncIterator[AsyncConnection]:
        """A transaction that commits on success.

        On SQLite it starts with BEGIN IMMEDIATE: taking the write lock up front makes
        concurrent writers wait for the busy timeout instead of failing with
        "database is locked" when a read turns into a write mid-transaction.
        """
        async with self.engine.connect() as conn:
            if self.dialect == "sqlite":
                await conn.execution_options(**{_BEGIN_OPTION: "BEGIN IMMEDIATE"})
            async with conn.begin():
                yield conn

    def _create_engine(self) -> AsyncEngine:
        options: dict[str, Any] = {"echo": self._echo, "json_serializer": _json_dumps}
        options["json_deserializer"] = _json_loads
        if self.dialect == "sqlite":
            return self._create_sqlite_engine(options)
        if self.schema is not None:
            options["connect_args"] = {"server_settings": {"search_path": self.schema}}
        try:
            return create_async_engine(self.url, pool_pre_ping=True, **options)
        except ModuleNotFoundError as error:
            if error.name != "asyncpg":
                raise
            raise StoreError(
                "PostgreSQL needs the asyncpg driver: pip install 'toolweave[postgres]'"
            ) from None

    def _create_sqlite_engine(self, options: dict[str, Any]) -> AsyncEngine:
        options["connect_args"] = {"timeout": self.busy_timeout_ms / 1000}
        if self.sqlite_path is None:
            # One connection, handed out in turn: every connection to ":memory:" is a new,
            # empty database, and sharing one connection concurrently would mix transactions.
            options.update(poolclass=AsyncAdaptedQueuePool, pool_size=1, max_overflow=0)
        else:
            self.sqlite_path.parent.mkdir(parents=True, exist_ok=True)
        engine = create_async_engine(self.url, **options)
        _install_sqlite_hooks(engine, wal=self.sqlite_path is not None, busy_timeout_ms=self.busy_timeout_ms)
        return engine

    async def _migrate(self, engine: AsyncEngine) -> None:
        """Only after this succeeds does `engine` become visible, so nobody queries an old schema."""
        async with engine.connect() as conn:
            if self.dialect == "sqlite":
                await conn.execution_options(**{_BEGIN_OPTION: "BEGIN IMMEDIATE"})
            async with conn.begin():
                if self.dialect == "postgresql":
                    await self._lock_and_create_schema(conn)
                await conn.run_sync(_upgrade_to_head)

    async def _lock_and_create_schema(self, conn: AsyncConnection) -> None:
        """Held until the migration commits, so a second gateway sees the finished schema."""
        key = _advisory_key(self.schema or "public")
        await conn.execute(text("SELECT pg_advisory_xact_lock(:key)"), {"key": key})
        if self.schema is not None:
            await conn.execute(text(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"'))


def _upgrade_to_head(connection: Connection) -> None:
    if _current_revisions(connection) == {SCHEMA_HEAD}:
        return  # the usual start: nothing to migrate, and Alembic (~0.1 s to import) is not needed
    from alembic import command
    from alembic.script import ScriptDirectory

    config = alembic_config()
    config.attributes["connection"] = connection
    _refuse_newer_schema(connection, ScriptDirectory.from_config(config))
    command.upgrade(config, "head")


def _current_revisions(connection: Connection) -> set[str]:
    """What `alembic_version` holds (nothing for a new database), read without Alembic."""
    if not inspect(connection).has_table(VERSION_TABLE):
        return set()
    return {row[0] for row in connection.execute(text(f"SELECT version_num FROM {VERSION_TABLE}"))}


def _refuse_newer_schema(connection: Connection, script: ScriptDirectory) -> None:
    """An older gateway must not run against a schema a newer one migrated; say so plainly."""
    known = {revision.revision for revision in script.walk_revisions()}
    current = _current_revisions(connection)
    unknown = sorted(set(current) - known)
    if unknown:
        raise StoreError(
            f"the database schema is at revision {', '.join(unknown)}, which this toolweave version "
            f"does not know (newest known: {script.get_current_head()}); upgrade toolweave"
        )


def _install_sqlite_hooks(engine: AsyncEngine, *, wal: bool, busy_timeout_ms: int) -> None:
    """Pragmas per connection, and SQLAlchemy (not the sqlite3 module) in charge of BEGIN.

    The sqlite3 module's legacy mode skips BEGIN before SELECT and DDL, which breaks
    transactional migrations and repeatable reads; taking over BEGIN fixes both and lets
    writers ask for BEGIN IMMEDIATE.
    """

    @event.listens_for(engine.sync_engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None
        cursor = dbapi_connection.cursor()
        try:
            cursor.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
            cursor.execute("PRAGMA foreign_keys = ON")
            if wal:
                _enable_wal(cursor)
                cursor.execute("PRAGMA synchronous = NORMAL")
        finally:
            cursor.close()

    @event.listens_for(engine.sync_engine, "begin")
    def _on_begin(conn: Connection) -> None:
        conn.exec_driver_sql(conn.get_execution_options().get(_BEGIN_OPTION, "BEGIN"))


def _enable_wal(cursor: Any, attempts: int = 100) -> None:
    """Switch the file to WAL once; retry while another connection holds the lock.

    Changing the journal mode needs an exclusive lock and SQLite reports "database is
    locked" at once instead of honouring busy_timeout, so gateways starting together
    on a fresh file would otherwise race. The mode is persistent: later connections
    find it already set and skip the switch.
    """
    cursor.execute("PRAGMA journal_mode")
    row = cursor.fetchone()
    if row is not None and str(row[0]).lower() == "wal":
        return
    for attempt in range(attempts):
        try:
            cursor.execute("PRAGMA journal_mode = WAL")
            return
        except Exception as error:
            if "locked" not in str(error).lower() or attempt == attempts - 1:
                raise
            time.sleep(0.02 + 0.01 * min(attempt, 10))
