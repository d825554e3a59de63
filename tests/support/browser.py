"""A real browser for the web UI tests: Playwright driving the system's Chromium, and a served gateway.

Playwright cannot download its own browser here, so it drives Debian's `chromium`
(`executable_path`); tests skip with the reason when either is missing. `.ci/run`
installs Chromium, so CI always runs them.
"""

from __future__ import annotations

import contextlib
import os
import shutil
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from support.serving import serve_asgi
from toolweave.config import parse_config
from toolweave.server.app import server_app
from toolweave.store import KeyRepository

CHROMIUM_CANDIDATES = ("chromium", "chromium-browser", "google-chrome")


def chromium_path() -> str | None:
    """The Chromium to drive: `$TOOLWEAVE_TEST_CHROMIUM`, else the first one on PATH."""
    configured = os.environ.get("TOOLWEAVE_TEST_CHROMIUM")
    if configured:
        return configured if Path(configured).exists() else None
    return next((found for name in CHROMIUM_CANDIDATES if (found := shutil.which(name))), None)


@contextlib.asynccontextmanager
async def chromium() -> AsyncIterator[Any]:
    """A headless Chromium (Playwright `Browser`); skips the test when Playwright or Chromium is missing."""
    try:
        from playwright.async_api import async_playwright
    except ImportError:
        pytest.skip(
            "the UI tests need Playwright: pip install playwright (its browser download is not needed)"
        )
    path = chromium_path()
    if path is None:
        pytest.skip("the UI tests need Chromium (apt-get install chromium, or set TOOLWEAVE_TEST_CHROMIUM)")
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=path, headless=True, args=["--no-sandbox", "--disable-dev-shm-usage"]
        )
        try:
            yield browser
        finally:
            await browser.close()


@dataclass
class UiServer:
    """A served gateway (`server_app` under uvicorn, lifespan and all) with its UI at `url`."""

    url: str
    app: Any

    @property
    def runtime(self) -> Any:
        return self.app.state.runtime

    async def key(self, tenant: str | None, *scopes: str) -> str:
        wanted = scopes or ("tools:read", "tools:call", "tools:admin")
        _info, plaintext = await KeyRepository(self.runtime.db).create(tenant, list(wanted))
        return plaintext


@contextlib.asynccontextmanager
async def serve_ui(
    raw: dict[str, Any], tmp_path: Path, *, require_auth: bool = False
) -> AsyncIterator[UiServer]:
    """The gateway of config `raw` on a SQLite file in `tmp_path`, served on a free loopback port."""
    raw = {**raw, "gateway": {**raw.get("gateway", {}), "database": f"sqlite:///{tmp_path / 'ui.db'}"}}
    config = parse_config(raw)
    assert config is not None
    app = server_app(config, require_auth=require_auth)
    async with serve_asgi(app) as url:
        yield UiServer(url=url, app=app)


@contextlib.asynccontextmanager
async def serve_ui_for_module(
    raw: dict[str, Any], directory: Path, *, require_auth: bool = False
) -> AsyncIterator[UiServer]:
    """`serve_ui` for a module-scoped fixture (one gateway for a module's tests): the environment
    `api_env` gives a test (a fixed secret key, a private HOME), set for as long as it serves."""
    from support.api import TEST_SECRET

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("TOOLWEAVE_SECRET_KEY", TEST_SECRET)
        patch.delenv("TOOLWEAVE_SECRET_KEY_FILE", raising=False)
        patch.delenv("TOOLWEAVE_LLM_BASE_URL", raising=False)
        patch.setenv("HOME", str(directory / "home"))
        async with serve_ui(raw, directory, require_auth=require_auth) as served:
            yield served
