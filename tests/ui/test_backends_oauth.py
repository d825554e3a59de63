"""Connect, status and Disconnect of an OAuth backend (`[backends.oauth]`) on the backends page, in a
real browser, against a real local OAuth-protected MCP server with its own sign-in page
(tests/servers/oauthserver.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.async_api import expect

from support.browser import serve_ui
from support.processes import oauth_server


@pytest.fixture(scope="module")
def url() -> Iterator[str]:
    """One OAuth-protected test server for the module's tests (a start costs 2-3 s CPU): each test's
    gateway registers a client of its own and signs in its own user."""
    with oauth_server() as found:
        yield found


async def test_connect_shows_the_account_and_disconnect_forgets_it(
    browser: Any, tmp_path: Path, url: str
) -> None:
    raw = {"backends": [{"name": "remote", "url": url, "oauth": {}}]}
    async with serve_ui(raw, tmp_path) as server:
        server.runtime.grants.callback_url = f"{server.url}/oauth/callback"
        page = await browser.new_page()
        await page.goto(f"{server.url}/backends")
        row = page.locator('tr[data-backend="remote"]')
        await expect(row.locator(".status").first).to_have_text("unauthorized")
        await expect(row.locator(".account")).to_contain_text("not connected")

        await row.locator("button.connect").click()
        await page.click("#authorize-link")
        await page.fill("#user", "alice")  # the backend's own sign-in page
        await page.click("button[type=submit]")
        await expect(page.locator("h1")).to_have_text("Connected to remote")

        await page.click("text=Backends")
        row = page.locator('tr[data-backend="remote"]')
        await expect(row.locator(".account")).to_contain_text("connected as local")
        await expect(row.locator(".account")).to_contain_text("token until")
        await expect(row.locator(".status").first).to_have_text("connected", timeout=20_000)
        tools = [tool.name for tool in server.runtime.gateway.list_tools()]
        assert "remote__whoami" in tools
        grant = await server.runtime.grants.store.get(None, "local", "remote")
        assert grant["tokens"]["access_token"] not in await page.content()

        await row.locator("button.disconnect").click()
        await expect(page.locator("#backends-notice")).to_have_text("Disconnected from remote")
        await expect(page.locator('tr[data-backend="remote"] .account')).to_contain_text("not connected")
        assert await server.runtime.grants.store.get(None, "local", "remote") is None


async def test_a_shared_grant_is_connected_by_an_admin_only(browser: Any, tmp_path: Path, url: str) -> None:
    raw = {"backends": [{"name": "remote", "url": url, "oauth": {"per_user": False}}]}
    async with serve_ui(raw, tmp_path, require_auth=True) as server:
        page = await (await browser.new_context()).new_page()
        await page.goto(f"{server.url}/login")
        await page.fill("#key", await server.key("acme", "tools:read", "tools:call"))
        await page.click("button[type=submit]")
        await page.goto(f"{server.url}/backends")
        account = page.locator('tr[data-backend="remote"] .account')
        await expect(account).to_contain_text("not connected")
        await expect(account.locator("button")).to_have_count(0)  # not offered to a non-admin
        token = await page.evaluate("JSON.parse(document.body.getAttribute('hx-headers'))['X-CSRF-Token']")
        for action in ("connect", "disconnect"):
            refused = await page.request.post(f"{server.url}/backends/remote/{action}", form={"csrf": token})
            assert refused.status == 403  # and refused by the server
            unknown = await page.request.post(f"{server.url}/backends/nosuch/{action}", form={"csrf": token})
            assert unknown.status == 404

        admin = await (await browser.new_context()).new_page()
        await admin.goto(f"{server.url}/login")
        await admin.fill("#key", await server.key("acme"))
        await admin.click("button[type=submit]")
        await admin.goto(f"{server.url}/backends")
        await expect(admin.locator('tr[data-backend="remote"] button.connect')).to_have_count(1)


async def test_connect_authorizes_an_openapi_backend_and_calls_carry_the_users_token(
    browser: Any, tmp_path: Path, url: str
) -> None:
    """An OpenAPI backend whose document has an oauth2 authorization-code scheme: Connect, the API's
    sign-in page, back at /oauth/callback; the operator's calls then carry their own token."""
    document = url.removesuffix("/mcp") + "/api/openapi.json"
    raw = {"backends": [{"name": "people", "openapi": document, "oauth": {"client_id": "tw"}}]}
    async with serve_ui(raw, tmp_path) as server:
        server.runtime.grants.callback_url = f"{server.url}/oauth/callback"
        page = await browser.new_page()
        await page.goto(f"{server.url}/backends")
        row = page.locator('tr[data-backend="people"]')
        await expect(row.locator(".account")).to_contain_text("not connected")
        await row.locator("button.connect").click()
        await page.click("#authorize-link")
        await page.fill("#user", "olga")
        await page.click("button[type=submit]")
        await expect(page.locator("h1")).to_have_text("Connected to people")
        await page.click("text=Backends")
        account = page.locator('tr[data-backend="people"] .account')
        await expect(account).to_contain_text("connected as local · scopes profile:read")
        result = await server.runtime.gateway.call("people__getMe", {})
        assert not result.is_error and result.structured_content == {"user": "olga"}
