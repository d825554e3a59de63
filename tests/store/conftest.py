"""Fixtures: a migrated database per test, on a SQLite file and (when configured) PostgreSQL.

PostgreSQL tests run in a schema of their own (random name, dropped afterwards),
so they can be re-run and run in parallel against one shared database.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from sqlalchemy import text

from toolweave.store import Database, SecretBox

POSTGRES_ENV = "TOOLWEAVE_TEST_POSTGRES_URL"
POSTGRES_SKIP = f"set {POSTGRES_ENV} (e.g. postgresql://postgres@127.0.0.1:5432/test) to run PostgreSQL tests"


def postgres_url() -> str | None:
    return os.environ.get(POSTGRES_ENV) or None


def unique_schema() -> str:
    return f"tw_test_{uuid.uuid4().hex[:16]}"


async def drop_schema(url: str, schema: str) -> None:
    admin = Database.from_url(url)
    engine = admin._create_engine()
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
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[str, str | None]]:
    """(url, schema) for each dialect; the schema is None on SQLite."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'toolweave.db'}", None
        return
    url = postgres_url()
    if url is None:
        pytest.skip(POSTGRES_SKIP)
    yield url, unique_schema()


@pytest.fixture
async def db(db_url: tuple[str, str | None]) -> AsyncIterator[Database]:
    url, schema = db_url
    database = Database.from_url(url, schema=schema)
    await database.start()
    try:
        yield database
    finally:
        await database.close()
        if schema is not None:
            await drop_schema(url, schema)


@pytest.fixture
def box() -> SecretBox:
    return SecretBox("test-secret-key-for-the-store-tests", "tests")
