"""Log in with an API key once, a server-side session in an HttpOnly SameSite=Strict cookie, CSRF on
every state change, tenant isolation, and a revoked key ending its session."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
from playwright.async_api import expect

from support.api import GREETER
from support.browser import serve_ui
from support.configs import python_backend

API = "/api/v1"


async def test_login_once_then_a_server_side_session(browser: Any, tmp_path: Path) -> None:
    async with serve_ui({"backends": [python_backend()]}, tmp_path, require_auth=True) as server:
        key = await server.key("alice", "tools:read")
        context = await browser.new_context()
        page = await context.new_page()
        await page.goto(f"{server.url}/tools/py__greet")
        await expect(page).to_have_url(f"{server.url}/login?next=/tools/py__greet")
        await page.fill("#key", "tw_not_a_real_key")
        await page.click("button[type=submit]")
        await expect(page.locator("#login-error")).to_contain_text("unknown")

        await page.fill("#key", key)
        await page.keyboard.press("Enter")
        await expect(page).to_have_url(f"{server.url}/tools/py__greet")
        await expect(page.locator("header .who")).to_contain_text("alice")

        cookies = await context.cookies()
        assert len(cookies) == 1
        cookie = cookies[0]
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
        assert key not in cookie["value"]  # the key stays on the server
        assert await page.evaluate("document.cookie") == ""

        # the key revoked: the next page asks to log in again
        info = (await server.runtime.keys.list("alice"))[0]
        await server.runtime.keys.revoke(info.id, "alice")
        server.runtime.key_cache.clear()
        await page.goto(f"{server.url}/")
        await expect(page).to_have_url(f"{server.url}/login?next=/")


async def test_tenants_see_only_their_own_tools(browser: Any, tmp_path: Path) -> None:
    async with serve_ui({"backends": [python_backend()]}, tmp_path, require_auth=True) as server:
        alice, bob = await server.key("alice"), await server.key("bob")
        async with httpx.AsyncClient(
            base_url=server.url, headers={"Authorization": f"Bearer {alice}"}
        ) as api:
            created = await api.post(f"{API}/composite-tools", json={"definition": GREETER})
            assert created.status_code == 201, created.text
        for key, sees in ((alice, True), (bob, False)):
            context = await browser.new_context()
            page = await context.new_page()
            await page.goto(f"{server.url}/login")
            await page.fill("#key", key)
            await page.click("button[type=submit]")
            await expect(page.locator("h1")).to_have_text("AI Tools")
            await expect(page.locator('tr[data-tool="greeter"]')).to_have_count(1 if sees else 0)
            response = await page.goto(f"{server.url}/tools/greeter")
            assert response is not None and response.status == (200 if sees else 404)
            await page.goto(f"{server.url}/tools/py__greet")
            await expect(page.locator("#used-in")).to_contain_text("greeter" if sees else "No composite")
            await context.close()


async def test_state_changes_need_the_csrf_token(browser: Any, tmp_path: Path) -> None:
    async with serve_ui({"backends": [python_backend()]}, tmp_path, require_auth=True) as server:
        key = await server.key("alice", "tools:read")
        context = await browser.new_context()
        page = await context.new_page()
        await page.goto(f"{server.url}/login")
        await page.fill("#key", key)
        await page.click("button[type=submit]")
        await expect(page.locator("h1")).to_have_text("AI Tools")

        # the same browser session, a form post without the token (or with a wrong one): refused
        for data in ({}, {"csrf": "forged"}):
            refused = await page.request.post(f"{server.url}/logout", form=data)
            assert refused.status == 403
        await page.goto(f"{server.url}/")
        await expect(page.locator("header .who")).to_contain_text("alice")  # still logged in

        # a login without the token is refused too (no login CSRF)
        async with httpx.AsyncClient(base_url=server.url) as anonymous:
            assert (await anonymous.post("/login", data={"key": key})).status_code == 403

        # the real button carries it
        await page.click("header .who button")
        await expect(page).to_have_url(f"{server.url}/login")
        await page.goto(f"{server.url}/")
        await expect(page).to_have_url(f"{server.url}/login?next=/")


async def test_ui_can_be_turned_off(tmp_path: Path, api_env: None) -> None:
    raw = {"backends": [python_backend()], "ui": {"enabled": False}}
    async with serve_ui(raw, tmp_path) as server, httpx.AsyncClient(base_url=server.url) as client:
        assert (await client.get("/")).status_code == 404
        assert (await client.get("/docs")).status_code == 200
