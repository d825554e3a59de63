"""The virtual servers' pages in a real browser: the list, a server's page (its MCP URL, what it
lists under its own names, its problems), Try it through the server, and a tool's page naming the
servers that expose it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from playwright.async_api import expect

from support.browser import serve_ui
from support.configs import python_backend

CONFIG = {
    "backends": [python_backend()],
    "servers": [
        {
            "name": "desk",
            "title": "Help desk",
            "instructions": "Greet people.",
            "tools": ["py__greet", "py__multiply", "ghost_*"],
            "overrides": {"py__greet": {"name": "hello"}},
        },
        {"name": "math", "tools": ["py__multiply"], "tool_exposure": "search"},
    ],
}


async def test_the_servers_pages_and_try_it(browser: Any, tmp_path: Path) -> None:
    async with serve_ui(CONFIG, tmp_path) as server:
        page = await browser.new_page()
        await page.goto(f"{server.url}/servers")
        await expect(page.locator("#servers tbody tr")).to_have_count(2)
        await expect(page.locator('tr[data-server="math"]')).to_contain_text("search")
        await page.click('tr[data-server="desk"] a')
        await expect(page.locator("h1")).to_have_text("Help desk")
        await expect(page.locator("#server-url")).to_have_text(f"{server.url}/servers/desk/mcp")
        await expect(page.locator("#instructions")).to_have_text("Greet people.")
        await expect(page.locator('#server-tools tr[data-tool="hello"]')).to_contain_text("py__greet")
        await expect(page.locator("#problems")).to_contain_text("'ghost_*' matches no listed tool")

        await page.select_option("#tool", "hello")
        await page.fill("#arguments", '{"name": "Ada"}')
        await page.click("#try-form button")
        await expect(page.locator("#try-result")).to_contain_text("Hello, Ada.")
        await page.select_option("#tool", "hello")
        await page.fill("#arguments", "not json")
        await page.click("#try-form button")
        await expect(page.locator("#try-error")).to_contain_text("arguments are not JSON")

        await page.goto(f"{server.url}/tools/py__multiply")
        await expect(page.locator("#tool-servers li")).to_have_text(["desk", "math"])
        await page.goto(f"{server.url}/servers/nope")
        await expect(page.locator("h1")).to_contain_text("No such server")
