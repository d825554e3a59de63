"""New databases start as one migrated in this process, not migrated again.

Every test that serves a gateway on a fresh SQLite file (`make_app`, `sqlite_app`, `serve_ui`…) ran
all of `store/migrations` for it: ~0.1 s of CPU each, ~480 files in a whole run (~50 s of CPU). Now
the first such file of a test process is migrated as a user's would be (`Database._migrate`, Alembic
and all) into a template; each later new file is a copy of it, and `_migrate` then finds it at the
newest revision and runs nothing, exactly as for any existing database. A new PostgreSQL schema
(~225 a run) replays, in its migration's transaction, the statements the process's first new schema
sent while Alembic migrated it. In-memory databases, files and schemas that already exist and every
process a test starts (`toolweave serve`) migrate as before; `tests/store/test_store_database.py`,
whose subject is migrating, turns both off (`fresh_migrations`).
"""

from __future__ import annotations

import asyncio
import atexit
import shutil
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Connection, event
from sqlalchemy.ext.asyncio import AsyncEngine

from toolweave.store import database
from toolweave.store.database import Database

_migrate = Database._migrate
_lock = threading.Lock()
_template: Path | None = None
_off = 0
"""How many `fresh_migrations()` blocks are open: while one is, every new file is migrated."""


def install() -> None:
    """From now on, in this process, a new SQLite file starts as the template's copy."""
    Database._migrate = _from_template  # type: ignore[method-assign]
    database._upgrade_to_head = _upgrade_or_replay


@contextmanager
def fresh_migrations() -> Iterator[None]:
    """Migrate every new database file from scratch while this is open."""
    global _off
    _off += 1
    try:
        yield
    finally:
        _off -= 1


async def _from_template(self: Database, engine: AsyncEngine) -> None:
    path = self.sqlite_path
    if not _off and self.dialect == "sqlite" and path is not None and path != _template and not path.exists():
        shutil.copyfile(_migrated_template(), path)
    await _migrate(self, engine)


def _migrated_template() -> Path:
    """The process's template: made once, by the real migrations, in a thread of its own (the caller's
    event loop is busy awaiting this start)."""
    global _template
    with _lock:
        if _template is None:
            folder = Path(tempfile.mkdtemp(prefix="toolweave-migrated-"))
            atexit.register(shutil.rmtree, folder, True)
            _template = folder / "template.db"
            worker = threading.Thread(target=asyncio.run, args=(_migrate_file(_template),))
            worker.start()
            worker.join()
        if not _template.exists():
            raise RuntimeError("the template database could not be migrated (see the output above)")
        return _template


async def _migrate_file(path: Path) -> None:
    """Migrated with `_migrate` itself and closed, so its write-ahead log is folded into the file."""
    async with Database.from_url(f"sqlite:///{path}"):
        pass


# -- PostgreSQL: a new schema replays the statements the first migration ran ----------------------

_upgrade = database._upgrade_to_head
_script: list[tuple[str, Any]] | None = None
"""The SQL the first new schema's migration sent, in order (DDL, `alembic_version`; catalog reads too)."""


def _upgrade_or_replay(connection: Connection) -> None:
    """`_upgrade_to_head` for a new PostgreSQL schema of this process after the first: the first
    one's statements again, in the migration's own transaction (`_migrate` holds the schema's lock)."""
    global _script
    if _off or connection.dialect.name != "postgresql" or database._current_revisions(connection):
        _upgrade(connection)
        return
    if _script is not None:
        for statement, parameters in _script:
            connection.exec_driver_sql(statement, parameters)
        return
    sent: list[tuple[str, Any]] = []

    def record(_conn: Any, _cursor: Any, statement: str, parameters: Any, *_rest: Any) -> None:
        sent.append((statement, parameters))

    event.listen(connection, "before_cursor_execute", record)
    try:
        _upgrade(connection)
    finally:
        event.remove(connection, "before_cursor_execute", record)
    _script = sent
