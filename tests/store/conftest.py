"""Fixtures: a migrated database per test, on a SQLite file and (when configured) PostgreSQL.

PostgreSQL tests run in a schema of their own (random name, dropped afterwards),
so they can be re-run and run in parallel against one shared database.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from toolweave.store import Database, SecretBox

POSTGRES_ENV = "TOOLWEAVE_TEST_POSTGRES_URL"
POSTGRES_SKIP = f"set {POSTGRES_ENV} (e.g. postgresql://postgres@127.0.0.1:5432/test) to run PostgreSQL tests"


async def _drop_schema(url: str, schema: str) -> None:
    engine = Database.from_url(url)._create_engine()
    try:
        async with engine.begin() as conn:
            await conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
    finally:
        await engine.dispose()


@pytest.fixture(autouse=True)
def _clean_secret_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """No test may read the developer's real key or write into their home directory."""
    monkeypatch.delenv("TOOLWEAVE_SECRET_KEY", raising=False)
    monkeypatch.delenv("TOOLWEAVE_SECRET_KEY_FILE", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    yield


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[str, str | None]]:
    """(url, schema) of an empty target; the PostgreSQL schema is dropped after the test."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'toolweave.db'}", None
        return
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        pytest.skip(POSTGRES_SKIP)
    schema = f"tw_test_{uuid.uuid4().hex[:16]}"
    try:
        yield url, schema
    finally:
        await _drop_schema(url, schema)


@pytest.fixture
async def make_db(db_url: tuple[str, str | None]) -> AsyncIterator[Callable[[], Database]]:
    """Unstarted `Database` handles on the test's target, as separate gateways would have; closed after."""
    url, schema = db_url
    opened: list[Database] = []

    def factory() -> Database:
        database = Database.from_url(url, schema=schema)
        opened.append(database)
        return database

    try:
        yield factory
    finally:
        for database in opened:
            await database.close()


@pytest.fixture
async def db(make_db: Callable[[], Database]) -> Database:
    database = make_db()
    await database.start()
    return database


@pytest.fixture
def box() -> SecretBox:
    return SecretBox("test-secret-key-for-the-store-tests", "tests")
