"""Fixtures of the REST API tests: a database per test (SQLite file, and PostgreSQL when configured)
and a factory of started apps on it. The existing MCP front tests here use none of them."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from api_helpers import TEST_SECRET, AppFactory, database_url, drop_schema


@pytest.fixture
def api_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A fixed secret key (PostgreSQL needs one) and a private HOME: no test touches the developer's key."""
    monkeypatch.setenv("TOOLWEAVE_SECRET_KEY", TEST_SECRET)
    monkeypatch.delenv("TOOLWEAVE_SECRET_KEY_FILE", raising=False)
    monkeypatch.delenv("TOOLWEAVE_LLM_BASE_URL", raising=False)
    monkeypatch.delenv("TOOLWEAVE_LLM_MODEL", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
async def make_app(
    request: pytest.FixtureRequest, tmp_path: Path, api_env: None
) -> AsyncIterator[AppFactory]:
    """`await make_app(config_dict, require_auth=False)` on this test's database (both dialects)."""
    url, schema = database_url(request.param, tmp_path)
    factory = AppFactory(url)
    try:
        yield factory
    finally:
        await factory.close_all()
        if schema is not None:
            await drop_schema(url.split("?")[0], schema)


@pytest.fixture
async def sqlite_app(tmp_path: Path, api_env: None) -> AsyncIterator[AppFactory]:
    """The same factory on SQLite only, for tests whose subject is not the database."""
    url, _ = database_url("sqlite", tmp_path)
    factory = AppFactory(url)
    try:
        yield factory
    finally:
        await factory.close_all()
