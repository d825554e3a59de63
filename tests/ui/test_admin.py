"""Admin in a real browser: a new API key is shown once and works; revoking it ends its sessions;
a connection's header values are never shown back; a key without tools:admin gets no admin."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from playwright.async_api import expect

from support.browser import serve_ui
from support.configs import python_backend

REMOTE = {"name": "remote", "url": "http://127.0.0.1:9/mcp"}


async def log_in(browser: Any, url: str, key: str) -> Any:
    context = await browser.new_context()
    page = await context.new_page()
    await page.goto(f"{url}/login")
    await page.fill("#key", key)
    await page.click("button[type=submit]")
    await expect(page.locator("h1")).to_have_text("AI Tools")
    return page


async def test_create_a_key_shown_once_then_revoke_it(browser: Any, tmp_path: Path) -> None:
    async with serve_ui({"backends": [python_backend()]}, tmp_path, require_auth=True) as server:
        admin = await log_in(browser, server.url, await server.key("alice"))
        await admin.click("nav >> text=Admin")
        await admin.fill("#key-name", "for the reader")
        await admin.uncheck('input[name="scopes"][value="tools:call"]')
        await admin.click("#create-key button[type=submit]")
        new_key = (await admin.locator("#new-key").text_content() or "").strip()
        assert new_key.startswith("tw_")
        await admin.goto(f"{server.url}/admin")  # shown once: the page again does not show it
        await expect(admin.locator("#new-key")).to_have_count(0)
        assert new_key not in await admin.content()
        row = admin.locator("#keys tr", has_text="for the reader")
        await expect(row).to_contain_text("tools:read")
        await expect(row).not_to_contain_text("tools:call")

        reader = await log_in(browser, server.url, new_key)
        await expect(reader.locator("header .who")).to_contain_text("tools:read")
        await expect(reader.locator("nav >> text=Admin")).to_have_count(0)
        assert (await reader.goto(f"{server.url}/admin")).status == 403

        await admin.goto(f"{server.url}/admin")
        await (
            admin.locator("#keys tr", has_text="for the reader").get_by_role("button", name="Revoke").click()
        )
        await expect(admin.locator("#admin-notice")).to_contain_text("revoked")
        await reader.goto(f"{server.url}/")
        await expect(reader).to_have_url(f"{server.url}/login?next=/")


async def test_a_connection_secret_is_never_shown_back(browser: Any, tmp_path: Path) -> None:
    async with serve_ui({"backends": [python_backend(), REMOTE]}, tmp_path, require_auth=True) as server:
        page = await log_in(browser, server.url, await server.key("alice"))
        await page.goto(f"{server.url}/admin")
        await page.select_option("#conn-backend", "remote")
        await page.fill("#conn-headers", "X-Token: alice-secret-value-42")
        await page.click("#set-connection button[type=submit]")
        await expect(page.locator("#admin-notice")).to_contain_text("remote")
        await expect(page.locator('tr[data-connection="remote"]')).to_contain_text("X-Token")
        assert "alice-secret-value-42" not in await page.content()
        await page.goto(f"{server.url}/admin")
        assert "alice-secret-value-42" not in await page.content()

        # a bad header is refused with its name, and the stored one stays
        await page.fill("#conn-headers", "Host: elsewhere")
        await page.click("#set-connection button[type=submit]")
        await expect(page.locator("#admin-problem")).to_contain_text("Host")
        rows = await server.runtime.connections.list("alice")
        assert [(r["backend"], r["keys"]) for r in rows] == [("remote", ["X-Token"])]

        other = await log_in(browser, server.url, await server.key("bob"))
        await other.goto(f"{server.url}/admin")
        await expect(other.locator('tr[data-connection="remote"]')).to_have_count(0)
