"""What the catalog serves besides tools, and where it comes from: the resources and prompts pages
(each read or previewed through its backend) — one gateway and browser for the module."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from playwright.async_api import expect

from support.browser import UiServer, serve_ui_for_module
from support.configs import named_stdio_backend, python_backend
from support.inprocess import in_process_testservers

pytestmark = pytest.mark.asyncio(loop_scope="session")  # where the session's Chromium lives


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[UiServer]:
    raw = {"backends": [named_stdio_backend("ts"), python_backend()]}
    with pytest.MonkeyPatch.context() as patch:
        in_process_testservers(patch)  # the test server in this process: the pages are the subject
        async with serve_ui_for_module(raw, tmp_path_factory.mktemp("served"), require_auth=True) as served:
            yield served


async def logged_in(browser: Any, server: UiServer, *scopes: str) -> Any:
    """A fresh browser context logged in with a new key of `scopes` (all three by default)."""
    context = await browser.new_context()
    page = await context.new_page()
    await page.goto(f"{server.url}/login")
    await page.fill("#key", await server.key("acme", *scopes))
    await page.click("form.login button[type=submit]")
    await expect(page.locator("nav")).to_be_visible()
    return page


async def test_resources_are_listed_and_read_through_their_backend(server: UiServer, browser: Any) -> None:
    page = await logged_in(browser, server)
    await page.click("nav >> text=Resources")
    row = page.locator('#resources tr[data-uri="test://readme"]')
    await expect(row).to_contain_text("ts")
    await expect(row).to_contain_text("A static text resource")
    await expect(page.locator("#resource-templates")).to_contain_text("test://items/{item}")
    await row.locator("a").first.click()
    await expect(page.locator("#read-contents")).to_contain_text("readme of ts")
    # a URI a template makes is read through the template's backend
    await page.fill("#uri", "test://items/42")
    await page.click("#read")
    await expect(page.locator("#read-contents")).to_contain_text("item 42 of ts")
    await page.fill("#uri", "nowhere://at/all")
    await page.click("#read")
    await expect(page.locator("#read-problem")).to_contain_text("No backend serves")
    await page.context.close()


async def test_prompts_are_listed_and_previewed_with_their_arguments(server: UiServer, browser: Any) -> None:
    page = await logged_in(browser, server)
    await page.click("nav >> text=Prompts")
    row = page.locator("#prompts tbody tr").filter(has_text="Greet someone")
    await expect(row).to_have_count(1)
    await expect(row.locator(".required")).to_have_count(1)  # `name` is required
    await row.locator("a").click()
    await page.fill("#arg-name", "Ada")
    await page.click("#preview")
    await expect(page.locator("#prompt-messages")).to_contain_text("Say hello to Ada, from ts.")
    await expect(page.locator("#prompt-messages")).to_contain_text("user")
    await page.context.close()


async def test_reading_and_previewing_need_the_call_scope(server: UiServer, browser: Any) -> None:
    page = await logged_in(browser, server, "tools:read")
    await page.goto(f"{server.url}/resources?uri=test://readme")
    await expect(page.locator("#resources")).to_contain_text("test://readme")  # listing is reading
    await expect(page.locator("#read-form")).to_have_count(0)
    await expect(page.locator("#read-problem")).to_contain_text("tools:call")
    await expect(page.locator("#read-contents")).to_have_count(0)
    await page.goto(f"{server.url}/prompts")
    await page.locator("#prompts a").first.click()
    await expect(page.locator("#prompt-form")).to_have_count(0)
    await page.context.close()


async def test_only_the_operator_adds_backends(server: UiServer, browser: Any) -> None:
    """Backends are shared by every tenant: a tenant's admin key may not add or change one."""
    page = await logged_in(browser, server)
    await page.goto(f"{server.url}/backends")
    await expect(page.locator("#backends")).to_contain_text("ts")
    await expect(page.locator("#add-backend")).to_have_count(0)
    response = await page.goto(f"{server.url}/backends/new")
    assert response is not None and response.status == 403
    await expect(page.locator("main")).to_contain_text("only the operator")
    await page.context.close()
