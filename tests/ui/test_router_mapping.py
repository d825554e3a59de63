"""The router builder's parameter mapping table in a real browser: two tools whose parameters are
named differently (greet's `name`, drop_table's `table`) both fed by one unified parameter chosen in the
table, the unified schema showing that one parameter live, kept across the YAML editor, saved and
called by an MCP client that sees each backend get its own argument."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mcp import Client
from playwright.async_api import expect

from support.browser import serve_ui
from support.configs import python_backend
from toolweave.server.ui.builder_pages import Parameter
from toolweave.server.ui.router_builder import _mapping, read_form


async def test_two_tools_fed_by_one_unified_parameter(browser: Any, tmp_path: Path) -> None:
    async with serve_ui({"backends": [python_backend()]}, tmp_path) as server:
        page = await browser.new_page()
        await page.goto(f"{server.url}/build/router")
        await page.fill("#name", "say")
        await page.fill("#description", "Greet someone or drop a table.")
        await page.select_option("#routing", "agent_driven")
        await page.fill("#op-0-slug", "greet")
        await page.fill("#op-0-tool", "py__greet")
        # the table appears once the tool is known: one row per tool parameter, required marked
        table = page.locator("#op-0-maptable")
        await expect(table.locator("tbody tr")).to_have_count(2)
        await expect(table).to_contain_text("boolean")
        await expect(table.locator(".required")).to_have_count(1)
        await expect(page.locator("#op-0-map-name")).to_have_value("name")
        await page.click("#add-op")
        await page.fill("#op-1-slug", "drop")
        await page.fill("#op-1-tool", "py__drop_table")
        await expect(page.locator("#op-1-map-table")).to_have_value("table")
        await expect(page.locator("#problem-count")).to_have_text("Valid: ready to save.")
        await expect(page.locator("#preview-schema")).to_contain_text('"table"')

        # keyboard only: focus the row, type the unified name; the schema follows as you type
        await page.focus("#op-0-map-name")
        await page.keyboard.press("Control+A")
        await page.keyboard.type("target")
        await page.focus("#op-1-map-table")
        await page.keyboard.press("Control+A")
        await page.keyboard.type("target")
        await expect(page.locator("#yaml")).to_have_value(re.compile(r"target: table"))
        schema = page.locator("#preview-schema")
        await expect(schema).to_contain_text('"target"')
        await expect(schema).to_contain_text('"excited"')
        await expect(schema).not_to_contain_text('"table"')
        await expect(schema).not_to_contain_text('"name"')
        assert await page.locator("#op-1-map-table").evaluate("e => e === document.activeElement")

        # through the text editor and back: an edit there shows in the table
        await page.fill("#yaml", (await page.input_value("#yaml")).replace("target: table", "what: table"))
        await expect(page.locator("#op-1-map-table")).to_have_value("what")
        await expect(page.locator("#op-0-map-name")).to_have_value("target")
        await page.fill("#op-1-map-table", "target")
        await expect(page.locator("#yaml")).to_have_value(re.compile(r"target: table"))
        await expect(page.locator("#problem-count")).to_have_text("Valid: ready to save.")

        await page.click("#save")
        await expect(page.locator("h1")).to_contain_text("say")

    # saved in the state database: a fresh gateway over the same state serves it to MCP clients
    async with serve_ui({"backends": [python_backend()]}, tmp_path) as server:
        async with Client(f"{server.url}/mcp") as client:
            greeted = await client.call_tool("say", {"operation": "greet", "target": "Ada"})
            dropped = await client.call_tool("say", {"operation": "drop", "target": "users"})
        assert not greeted.is_error and greeted.content[0].text == "Hello, Ada."
        assert not dropped.is_error and dropped.content[0].text == "dropped users"


def test_the_table_rows_and_the_pairs_it_has_no_row_for_make_one_mapping() -> None:
    """A row left empty or holding its own name renames nothing; a pair for a parameter the tool
    lacks (written in the text editor) survives the form's round trip."""
    posted = {
        "ops": "1",
        "op-0-tool": "py__greet",
        "op-0-mapparams": "name,excited",
        "op-0-map-name": "target",
        "op-0-map-excited": "excited",
        "op-0-mapping": "extra=gone, old=name",
    }
    [row] = read_form(posted).operations
    assert _mapping(row.mapping) == {"extra": "gone", "target": "name"}
    params = [Parameter("name", "string", True), Parameter("excited", "boolean", False)]
    assert row.table(params) == ({"name": "target"}, "extra=gone")
    assert row.table_shown and row.table_tool == ""
