"""The AI Tools list and a tool's page in a real browser: types, counts, filters, search, paging,
schemas, the definition's tables, "Used in" both ways, export tabs; escaping; security headers;
the API docs offline."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import httpx
from playwright.async_api import expect

from support.api import GREETER
from support.browser import serve_ui
from support.configs import python_backend

ROUTER = {**GREETER, "name": "greeter"}


async def test_list_shows_types_counts_filters_and_search(browser: Any, tmp_path: Path) -> None:
    raw = {"backends": [python_backend()], "composite_tools": [ROUTER]}
    async with serve_ui(raw, tmp_path) as server:
        page = await browser.new_page()
        await page.goto(f"{server.url}/")
        await expect(page.locator("h1")).to_have_text("AI Tools")
        greeter = page.locator('tr[data-tool="greeter"]')
        await expect(greeter.locator(".badge")).to_have_text("router")
        greet = page.locator('tr[data-tool="py__greet"]')
        await expect(greet).to_contain_text("py")
        await expect(greet).to_contain_text("read-only")
        await expect(greet).to_contain_text("used in 1")
        await expect(page.locator('tr[data-tool="py__drop_table"]')).to_contain_text("destructive")
        backend_count = len(server.runtime.gateway.catalog.listed_for(None)) - 1
        await expect(page.locator('.count[data-kind="backend"]')).to_contain_text(str(backend_count))
        await expect(page.locator('.count[data-kind="router"]')).to_contain_text("1")

        # the type filter (htmx swaps the results and keeps the URL shareable)
        await page.select_option("#type", "router")
        await expect(page.locator("tbody tr")).to_have_count(1)
        await expect(page).to_have_url(re.compile(r"type=router"))

        # search ranks like find_tools: "multiply" finds the tool and the router describing it
        await page.select_option("#type", "")
        await page.fill("#q", "multiply numbers")
        await expect(page.locator("tbody tr").first).to_have_attribute("data-tool", "py__multiply")
        await page.fill("#q", "zzzz-nothing")
        await expect(page.locator(".empty")).to_have_text("No tool matches.")


async def test_list_pages_and_filters_by_backend(browser: Any, tmp_path: Path) -> None:
    backends = [python_backend(f"b{i}") for i in range(8)]  # 8 backends of 8 tools: two pages of 50
    async with serve_ui({"backends": backends}, tmp_path) as server:
        page = await browser.new_page()
        await page.goto(f"{server.url}/")
        await expect(page.locator("tbody tr")).to_have_count(50)
        await expect(page.locator(".pager")).to_contain_text("Page 1 of 2")
        await page.click("a[rel=next]")
        await expect(page.locator(".pager")).to_contain_text("Page 2 of 2")
        await page.goto(f"{server.url}/?backend=b3")
        rows = page.locator("tbody tr")
        count = await rows.count()
        assert count > 0
        for index in range(count):
            await expect(rows.nth(index).locator("td").nth(2)).to_have_text("b3")


async def test_tool_page_shows_definition_used_in_and_exports(browser: Any, tmp_path: Path) -> None:
    raw = {"backends": [python_backend()], "composite_tools": [ROUTER]}
    async with serve_ui(raw, tmp_path) as server:
        page = await browser.new_page()
        await page.goto(f"{server.url}/")
        await page.click('tr[data-tool="greeter"] a')
        await expect(page.locator("h1")).to_contain_text("greeter")
        await expect(page.locator("#status")).to_have_text("active")
        await expect(page.locator("#operations tbody tr")).to_have_count(2)
        await expect(page.locator("#input-schema")).to_contain_text('"operation"')

        # export tabs: every format, one visible at a time, each with a copy button
        tabs = page.get_by_role("tab")
        await expect(tabs).to_have_count(6)
        await expect(page.locator("#export-mcp")).to_be_visible()
        await page.get_by_role("tab", name="anthropic").click()
        await expect(page.locator("#export-anthropic")).to_be_visible()
        await expect(page.locator("#export-mcp")).to_be_hidden()
        await expect(page.locator("#export-anthropic-text")).to_contain_text('"input_schema"')

        # "Uses" links to the backend tool, whose page links back under "Used in"
        await page.locator("#operations").get_by_role("link", name="py/greet").click()
        await expect(page.locator("h1")).to_contain_text("py__greet")
        await expect(page.locator("#used-in")).to_contain_text("greeter")
        await page.locator("#used-in").get_by_role("link", name="greeter").click()
        await expect(page.locator("h1")).to_contain_text("greeter")


async def test_a_router_page_says_its_routing_even_when_the_definition_leaves_the_default(
    api_env: None, tmp_path: Path
) -> None:
    rule_based = {  # no `routing` key: rule_based, the default
        "name": "by_rule",
        "description": "Greet, or multiply when asked.",
        "operations": [{"slug": "greet", "tool": "py/greet"}, {"slug": "multiply", "tool": "py/multiply"}],
        "default_operation": "greet",
    }
    raw = {"backends": [python_backend()], "composite_tools": [rule_based, GREETER]}
    async with serve_ui(raw, tmp_path) as server, httpx.AsyncClient(base_url=server.url) as web:
        shown = {name: (await web.get(f"/tools/{name}")).text for name in ("by_rule", "greeter")}
    assert "Routing: <strong>rule_based</strong>" in shown["by_rule"]
    assert "Routing: <strong>agent_driven</strong>" in shown["greeter"]


async def test_degraded_composite_shows_every_problem(browser: Any, tmp_path: Path) -> None:
    broken = {**ROUTER, "name": "broken", "operations": [{"slug": "x", "tool": "py/no_such_tool"}]}
    async with serve_ui({"backends": [python_backend()], "composite_tools": [broken]}, tmp_path) as server:
        page = await browser.new_page()
        await page.goto(f"{server.url}/tools/broken")
        await expect(page.locator("#status")).to_have_text("degraded")
        await expect(page.locator("#problems li").first).to_contain_text("no_such_tool")
        await expect(page.locator("#operations .missing")).to_have_text("py/no_such_tool")


async def test_backend_text_is_escaped_never_run(browser: Any, tmp_path: Path) -> None:
    raw = {"backends": [python_backend("evil", module="tw_pytools_xss")]}
    async with serve_ui(raw, tmp_path) as server:
        page = await browser.new_page()
        dialogs: list[str] = []
        page.on("dialog", lambda dialog: dialogs.append(dialog.message))
        for path in ("/", "/tools/evil__lookup", "/?q=look"):
            await page.goto(f"{server.url}{path}")
            await expect(page.locator("main")).to_contain_text("<script>")
            assert await page.evaluate("window.__xss") is None, path
            assert await page.locator("main script, main img, main svg").count() == 0
        assert dialogs == []


async def test_security_headers_and_offline_docs(browser: Any, tmp_path: Path) -> None:
    async with serve_ui({"backends": [python_backend()]}, tmp_path) as server:
        context = await browser.new_context()
        outside: list[str] = []

        async def only_our_origin(route: Any) -> None:
            if route.request.url.startswith(server.url):
                await route.continue_()
            else:
                outside.append(route.request.url)
                await route.abort()

        await context.route("**/*", only_our_origin)
        page = await context.new_page()
        response = await page.goto(f"{server.url}/")
        assert response is not None
        headers = response.headers
        csp = headers["content-security-policy"]
        assert "script-src 'self'" in csp and "unsafe-inline" not in csp.split("script-src")[1].split(";")[0]
        assert "frame-ancestors 'none'" in csp
        assert headers["x-frame-options"] == "DENY"
        await page.goto(f"{server.url}/docs")
        await expect(page.locator(".swagger-ui .info .title")).to_contain_text("toolweave", timeout=15000)
        await page.goto(f"{server.url}/redoc")
        await expect(page.locator("h1").first).to_contain_text("toolweave", timeout=15000)
        assert outside == []


async def test_the_ui_has_a_favicon(api_env: None, tmp_path: Path) -> None:
    raw = {"backends": [python_backend()]}
    async with serve_ui(raw, tmp_path) as server, httpx.AsyncClient(base_url=server.url) as web:
        icon = await web.get("/favicon.ico")
        page = (await web.get("/")).text
        linked = await web.get("/static/ui/favicon.svg")
    assert icon.status_code == 200 and icon.headers["content-type"].startswith("image/svg+xml")
    assert '<link rel="icon" href="/static/ui/favicon.svg"' in page and linked.status_code == 200


async def test_an_empty_catalog_says_how_to_add_a_backend(api_env: None, tmp_path: Path) -> None:
    async with serve_ui({"backends": []}, tmp_path) as server, httpx.AsyncClient(base_url=server.url) as web:
        page = (await web.get("/")).text
    assert 'id="empty-catalog"' in page and "[[backends]]" in page and "toolweave init claude-desktop" in page
    assert "No tool matches." not in page
