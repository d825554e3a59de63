"""Adding and editing backends in the web UI: checked as the config file's entries are, each problem at
its field; the new backend connects and its tools appear; secrets are never shown back, stored
encrypted, audited by name only — one gateway (auth off: the operator) and one browser."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from playwright.async_api import expect

from support.browser import UiServer, serve_ui_for_module
from support.configs import python_backend
from support.paths import PYTHON, TESTSERVER
from toolweave.store import ALL_TENANTS

pytestmark = pytest.mark.asyncio(loop_scope="session")  # where the session's Chromium lives
SECRET = "sekret-4567-never-shown"


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[UiServer]:
    async with serve_ui_for_module({"backends": [python_backend()]}, tmp_path_factory.mktemp("bf")) as served:
        yield served


async def test_a_backend_is_checked_as_the_config_file_checks_it(server: UiServer, page: Any) -> None:
    await page.goto(f"{server.url}/backends")
    await page.click("#add-backend")
    # as you type, the field you changed speaks up; the untouched ones (an empty command) stay quiet
    await page.fill("#name", "Bad Name")
    await expect(page.locator("#err-name")).to_contain_text("must match ^[a-z0-9]")
    await expect(page.locator(".field-problem:not(:empty)")).to_have_count(1)
    await page.fill("#name", "fine")
    await expect(page.locator("#err-name")).to_be_empty()
    await page.fill("#name", "Bad Name")
    await page.select_option("#transport", "http")
    await expect(page.locator("#command")).to_be_hidden()  # the fields of the chosen kind only
    await page.fill("#url", "ftp://example.com/mcp")
    await page.fill("#headers", f"X-Token: {SECRET}\nX-Other")
    await page.click("#save-backend")
    # the save's page first: the check as you type already showed the same problems on this one
    await expect(page.locator("#retype-secrets")).to_contain_text("type the ones you gave again")
    await expect(page.locator("#err-name")).to_contain_text("must match ^[a-z0-9]")
    await expect(page.locator("#err-url")).to_contain_text("must start with http:// or https://")
    await expect(page.locator("#err-headers")).to_contain_text("'X-Other' has no value")
    await expect(page.locator("#headers")).to_have_value("X-Token\nX-Other")  # names only
    assert SECRET not in await page.content()

    await page.fill("#name", "py")  # the config file's
    await page.select_option("#transport", "openapi")
    await page.fill("#openapi", "https://api.example.com/openapi.json")
    await page.fill("#include", "tag:")
    await page.click("#save-backend")
    await expect(page.locator("#err-name")).to_contain_text("exists already")
    await expect(page.locator("#err-include")).to_contain_text("tag: needs a glob")
    assert await server.runtime.managed_backends.repo.list() == []  # nothing stored


async def test_an_added_backend_connects_and_an_edit_keeps_its_secrets(server: UiServer, page: Any) -> None:
    await page.goto(f"{server.url}/backends/new")
    await page.fill("#name", "extra")
    await page.fill("#command", PYTHON)
    await page.fill("#args", str(TESTSERVER))
    await page.fill("#env", f"TESTSERVER_NAME=extra\nAPI_TOKEN={SECRET}")
    await page.click("#save-backend")
    row = page.locator('#backends tr[data-backend="extra"]')
    await expect(row.locator(".status")).to_have_text("connected", timeout=30_000)
    await row.locator("a").first.click()
    await expect(page.locator('tr[data-tool="extra__echo"], a:text-is("extra__echo")').first).to_be_visible()
    result = await server.runtime.gateway.call("extra__echo", {"text": "hi"})
    assert not result.is_error

    await page.goto(f"{server.url}/backends")
    await page.click('a[aria-label="Edit extra"]')
    await expect(page.locator("#env")).to_have_value("TESTSERVER_NAME\nAPI_TOKEN")
    assert SECRET not in await page.content()
    await page.fill("#env", "TESTSERVER_NAME=renamed\nAPI_TOKEN")  # a name alone keeps its value
    await page.click("#save-backend")
    await expect(page.locator('#backends tr[data-backend="extra"] .status')).to_have_text(
        "connected", timeout=30_000
    )
    await page.goto(f"{server.url}/resources?uri=test://readme")
    await expect(page.locator("#read-contents")).to_contain_text("readme of renamed")  # restarted with it
    stored = await server.runtime.managed_backends.repo.get("extra")
    assert stored is not None and stored["env"] == {"TESTSERVER_NAME": "renamed", "API_TOKEN": SECRET}

    written = [
        r for r in await server.runtime.audit.list(ALL_TENANTS, limit=50) if r.object_type == "backend"
    ]
    assert sorted(r.action for r in written) == ["backend.created", "backend.updated"]
    assert all("env.API_TOKEN" in r.detail["secrets"] for r in written)
    assert SECRET not in json.dumps([r.to_dict() for r in written], default=str)
    database = Path(server.runtime.config.gateway.database.removeprefix("sqlite:///"))
    for file in (database, database.with_name(database.name + "-wal")):  # stored encrypted
        found = await asyncio.to_thread(file.read_bytes) if file.exists() else b""
        assert SECRET.encode() not in found


async def test_a_config_backend_is_not_editable(server: UiServer, page: Any) -> None:
    await page.goto(f"{server.url}/backends")
    await expect(page.locator('a[aria-label="Edit py"]')).to_have_count(0)
    response = await page.goto(f"{server.url}/backends/py/edit")
    assert response is not None and response.status == 404
    await expect(page.locator("main")).to_contain_text("config file")


async def test_a_backend_added_through_another_gateway_is_listed_and_editable(
    server: UiServer, page: Any
) -> None:
    """Behind a balancer the next page may come from another gateway on the database: it starts what
    was stored there (at once on the backends page, else within its sync interval)."""
    elsewhere = {"name": "elsewhere", "url": "http://127.0.0.1:9/mcp", "headers": {"X-Key": SECRET}}
    await server.runtime.managed_backends.repo.put(elsewhere, "http")  # as another gateway would
    await page.goto(f"{server.url}/backends")
    await expect(page.locator('#backends tr[data-backend="elsewhere"]')).to_have_count(1)
    await page.click('a[aria-label="Edit elsewhere"]')
    await expect(page.locator("#url")).to_have_value("http://127.0.0.1:9/mcp")
    await expect(page.locator("#headers")).to_have_value("X-Key")
    assert "elsewhere" in server.runtime.gateway.backends


async def test_a_backend_added_here_can_be_removed(server: UiServer, page: Any) -> None:
    await page.goto(f"{server.url}/backends/new")
    await page.fill("#name", "brief")
    await page.select_option("#transport", "http")
    await page.fill("#url", "http://127.0.0.1:9/mcp")
    await page.click("#save-backend")
    await page.click('a[aria-label="Edit brief"]')
    await page.click("#delete-backend")
    await expect(page.locator("h1")).to_contain_text("Backends")
    await expect(page.locator('#backends tr[data-backend="brief"]')).to_have_count(0)
    assert "brief" not in server.runtime.gateway.backends
    assert await server.runtime.managed_backends.repo.get("brief") is None
    written = await server.runtime.audit.list(ALL_TENANTS, limit=5)
    assert written[0].action == "backend.deleted" and written[0].object_id == "brief"
