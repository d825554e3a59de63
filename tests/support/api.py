"""Helpers for the REST API tests: an app on a real database, clients with or without a key.

`ApiApp` runs the server app in-process (httpx's ASGI transport) with its
runtime started by hand, since that transport does not run the lifespan;
`support.serving.serve_asgi` runs the whole app under uvicorn on loopback where
a real MCP client or the lifespan matter.
"""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from toolweave import Gateway
from toolweave.config import parse_config
from toolweave.server.app import server_app
from toolweave.store import Database, KeyRepository

POSTGRES_ENV = "TOOLWEAVE_TEST_POSTGRES_URL"
POSTGRES_SKIP = (
    f"set {POSTGRES_ENV} (e.g. postgresql://postgres@127.0.0.1:5432/test) to run the PostgreSQL cases"
)
TEST_SECRET = "test-secret-key-for-the-api-tests"

SCRAPER = {
    "name": "smart_scraper",
    "description": "Scrape any URL with the best scraper for its site.",
    "routing": "rule_based",
    "operations": [
        {"slug": "linkedin", "tool": "ts/scrape_profile", "parameter_mapping": {"url": "profile_url"}},
        {"slug": "generic", "tool": "ts/scrape"},
    ],
    "rules": [
        {
            "condition": {"type": "contains", "field": "url", "value": "linkedin.com"},
            "operation": "linkedin",
            "priority": 1,
        }
    ],
    "default_operation": "generic",
}
"""Seed 002's smart scraper over tests/servers/testserver.py's offline scrapers."""

GREETER = {
    "name": "greeter",
    "description": "Greet or multiply.",
    "routing": "agent_driven",
    "operations": [{"slug": "greet", "tool": "py/greet"}, {"slug": "multiply", "tool": "py/multiply"}],
}
"""A router over the in-process Python backend: fast to start, for the tests that need any composite."""


async def drop_schema(url: str, schema: str) -> None:
    engine = Database.from_url(url)._create_engine()
    try:
        async with engine.begin() as conn:
            await conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
    finally:
        await engine.dispose()


def database_url(kind: str, tmp_path: Path) -> tuple[str, str | None]:
    """(url with the schema in it, schema to drop) for `sqlite` or `postgres`; skips without PostgreSQL."""
    import pytest

    if kind == "sqlite":
        return f"sqlite:///{tmp_path / 'toolweave.db'}", None
    url = os.environ.get(POSTGRES_ENV)
    if not url:
        pytest.skip(POSTGRES_SKIP)
    schema = f"tw_api_{uuid.uuid4().hex[:16]}"
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}schema={schema}", schema


@dataclass
class ApiApp:
    gateway: Gateway
    app: Any
    url: str

    @property
    def runtime(self) -> Any:
        return self.app.state.runtime

    def client(self, key: str | None = None) -> httpx.AsyncClient:
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        transport = httpx.ASGITransport(app=self.app, client=("127.0.0.1", 50000))
        return httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1", headers=headers)

    async def key(self, tenant: str, *scopes: str) -> str:
        wanted = scopes or ("tools:read", "tools:call", "tools:admin")
        _info, plaintext = await KeyRepository(self.runtime.db).create(tenant, list(wanted))
        return plaintext


@dataclass
class AppFactory:
    """`await make_app(config_dict, require_auth=...)`: started apps on one database, closed at teardown."""

    url: str
    opened: list[ApiApp] = field(default_factory=list)

    async def __call__(self, raw: dict[str, Any], *, require_auth: bool = False) -> ApiApp:
        raw = {**raw, "gateway": {**raw.get("gateway", {}), "database": self.url}}
        cfg = parse_config(raw)
        assert cfg is not None
        app = server_app(cfg, require_auth=require_auth)
        await app.state.runtime.start()
        opened = ApiApp(app.state.runtime.gateway, app, self.url)
        self.opened.append(opened)
        return opened

    async def close(self, api: ApiApp) -> None:
        """Stop one app (a gateway restart)."""
        if api in self.opened:
            self.opened.remove(api)
            await api.runtime.close()

    async def close_all(self) -> None:
        for api in list(self.opened):
            await self.close(api)


def without_instance(exposition: str) -> str:
    """`/metrics` text without the `instance` label every series carries, for comparing series."""
    return re.sub(r'instance="[^"]*",?', "", exposition).replace("{}", "").replace(",}", "}")


def problems(response: httpx.Response) -> list[tuple[str, str]]:
    body = response.json()
    assert set(body) == {"error"}, body
    return [(p["path"], p["message"]) for p in body["error"]["problems"]]


# -- fixtures (registered for every test by tests/conftest.py) ---------------------------------


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
