"""Helpers for the REST API tests: an app on a real database, clients with or without a key.

`ApiApp` runs the server app in-process (httpx's ASGI transport) with its
runtime started by hand, since that transport does not run the lifespan;
`serve_app` runs the whole app under uvicorn on loopback where a real MCP
client or the lifespan matter.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from sqlalchemy import text

from toolweave import Gateway
from toolweave.config import parse_config
from toolweave.server.factory import server_app
from toolweave.store import Database, KeyRepository
from tw_testing import PYTHON, SERVERS, free_port, stop_process, subprocess_env, wait_for_port

POSTGRES_ENV = "TOOLWEAVE_TEST_POSTGRES_URL"
POSTGRES_SKIP = (
    f"set {POSTGRES_ENV} (e.g. postgresql://postgres@127.0.0.1:5432/test) to run the PostgreSQL cases"
)
TEST_SECRET = "test-secret-key-for-the-api-tests"
HEADERSERVER = SERVERS / "headerserver.py"

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
        gateway = Gateway(cfg)
        app = server_app(gateway, require_auth=require_auth)
        await app.state.runtime.start()
        opened = ApiApp(gateway, app, self.url)
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


@contextlib.asynccontextmanager
async def serve_app(app: Any) -> AsyncIterator[str]:
    """The app under uvicorn on a free loopback port, lifespan included; yields the base URL."""
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign]
    task = asyncio.create_task(server.serve())
    try:
        async with asyncio.timeout(20):
            while not server.started:
                if task.done():
                    task.result()
                    raise RuntimeError("uvicorn stopped before it started")
                await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 15)


@contextlib.contextmanager
def header_server() -> Iterator[str]:
    """tests/servers/headerserver.py on loopback; yields its MCP URL."""
    port = free_port()
    process = subprocess.Popen(
        [PYTHON, str(HEADERSERVER), "--http", str(port)],
        env=subprocess_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        stop_process(process)


def problems(response: httpx.Response) -> list[tuple[str, str]]:
    body = response.json()
    assert set(body) == {"error"}, body
    return [(p["path"], p["message"]) for p in body["error"]["problems"]]
