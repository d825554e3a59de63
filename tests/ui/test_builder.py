"""The router builder in a real browser: build a router over backend tools with the form, see each
problem at its field as you type, save it, try it and find its run; YAML and form kept in step;
nothing invalid saved; a rejected edit keeps the old version serving to MCP clients; keyboard only."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from mcp import Client
from playwright.async_api import expect

from support.browser import serve_ui
from support.configs import python_backend


async def test_build_a_router_try_it_and_find_its_run(browser: Any, tmp_path: Path) -> None:
    async with serve_ui({"backends": [python_backend()]}, tmp_path) as server:
        page = await browser.new_page()
        await page.goto(f"{server.url}/")
        await page.click("#new-router")
        await page.fill("#name", "calc")
        await page.fill("#description", "Greet or multiply, by the kind of request.")
        await page.fill("#op-0-slug", "hello")
        await page.fill("#op-0-tool", "py__greet")
        # a problem appears at its field while typing: the default operation does not exist yet
        await page.fill("#default_operation", "times")
        await expect(page.locator("#err-default_operation")).not_to_be_empty()
        await expect(page.locator("#save")).to_be_visible()

        await page.click("#add-op")
        await page.fill("#op-1-slug", "times")
        await page.fill("#op-1-tool", "py__multiply")
        await page.click("#add-rule")
        await page.select_option("#rule-0-type", "exists")
        await page.fill("#rule-0-field", "name")
        await page.fill("#rule-0-operation", "hello")
        await expect(page.locator("#problem-count")).to_have_text("Valid: ready to save.")
        await expect(page.locator("#err-default_operation")).to_be_empty()
        await expect(page.locator("#preview-schema")).to_contain_text('"name"')
        await expect(page.locator("#yaml")).to_have_value(re.compile(r"slug: times"))

        await page.click("#save")
        await expect(page.locator("h1")).to_contain_text("calc")
        await expect(page.locator("#rules tbody tr")).to_have_count(1)

        await page.fill("#arg-name", "Ada")
        await page.click("#try-form button[type=submit]")
        await expect(page.locator("#routing")).to_contain_text("hello")
        await page.click("#run-link")
        await expect(page.locator("#run-status")).to_have_text("completed")
        await expect(page.locator("#run-reason")).to_contain_text("name")


async def test_an_invalid_router_shows_every_error_at_its_field_and_saves_nothing(
    browser: Any, tmp_path: Path
) -> None:
    async with serve_ui({"backends": [python_backend()]}, tmp_path) as server:
        page = await browser.new_page()
        await page.goto(f"{server.url}/build/router")
        await page.fill("#name", "bad one")
        await page.fill("#op-0-slug", "bad slug!")
        await page.fill("#op-0-tool", "py__greet")
        await page.click("#save")
        await expect(page.locator("#save-problem")).to_contain_text("Not saved")
        await expect(page.locator("#err-name")).to_contain_text("must match")
        await expect(page.locator("#err-op-0-slug")).not_to_be_empty()

        # fixed, the next layer of checks speaks: a rule naming no operation, a tool that does not exist
        await page.fill("#name", "bad")
        await page.fill("#op-0-slug", "x")
        await page.fill("#op-0-tool", "py__no_such_tool")
        await page.click("#add-rule")
        await page.fill("#rule-0-field", "url")
        await page.fill("#rule-0-operation", "missing")
        await expect(page.locator("#err-rule-0-operation")).to_contain_text("unknown operation")
        await page.fill("#rule-0-operation", "x")
        await expect(page.locator("#err-op-0-tool")).to_contain_text("py__no_such_tool")
        await page.click("#save")
        await expect(page.locator("#save-problem")).to_contain_text("Not saved")
        # the form keeps what was typed
        await expect(page.locator("#op-0-tool")).to_have_value("py__no_such_tool")
        await expect(page.locator("#err-op-0-tool")).not_to_be_empty()
        assert await server.runtime.definitions.repo.list(None) == []


async def test_yaml_and_form_stay_in_step(browser: Any, tmp_path: Path) -> None:
    async with serve_ui({"backends": [python_backend()]}, tmp_path) as server:
        page = await browser.new_page()
        await page.goto(f"{server.url}/build/router")
        yaml_text = (
            "name: from_yaml\ndescription: Built in the text editor.\nrouting: agent_driven\n"
            "operations:\n- slug: greet\n  tool: py/greet\n- slug: multiply\n  tool: py/multiply\n"
        )
        await page.fill("#yaml", yaml_text)
        await expect(page.locator("#op-1-slug")).to_have_value("multiply")  # the form follows the YAML
        await expect(page.locator("#name")).to_have_value("from_yaml")
        await expect(page.locator("#problem-count")).to_have_text("Valid: ready to save.")
        await page.fill("#description", "Edited in the form.")
        await expect(page.locator("#yaml")).to_have_value(re.compile("Edited in the form"))
        await page.click("#save")
        await expect(page.locator("h1")).to_contain_text("from_yaml")
        stored = await server.runtime.definitions.repo.list(None)
        assert [row.definition["description"] for row in stored] == ["Edited in the form."]


async def test_a_rejected_edit_keeps_the_old_version_serving(browser: Any, tmp_path: Path) -> None:
    async with serve_ui({"backends": [python_backend()]}, tmp_path) as server:
        definition = {
            "name": "keeper",
            "description": "Greet.",
            "routing": "agent_driven",
            "operations": [{"slug": "greet", "tool": "py/greet"}],
        }
        await server.runtime.definitions.create(None, definition, "active", None)
        page = await browser.new_page()
        await page.goto(f"{server.url}/tools/keeper")
        await page.click("#edit")
        await page.fill("#op-0-tool", "py__gone")
        await page.click("#save")
        await expect(page.locator("#save-problem")).to_contain_text("Not saved")
        await expect(page.locator("#err-op-0-tool")).not_to_be_empty()

        async with Client(f"{server.url}/mcp") as client:
            result = await client.call_tool("keeper", {"operation": "greet", "name": "Ada"})
            assert not result.is_error and "Hello, Ada" in result.content[0].text
        rows = await server.runtime.definitions.repo.list(None)
        assert rows[0].version == 1 and rows[0].definition["operations"][0]["tool"] == "py/greet"


async def test_the_builder_works_with_the_keyboard_only(browser: Any, tmp_path: Path) -> None:
    async with serve_ui({"backends": [python_backend()]}, tmp_path) as server:
        page = await browser.new_page()
        await page.goto(f"{server.url}/build/router")
        await page.focus("#name")
        await page.keyboard.type("typed")
        await page.keyboard.press("Tab")
        await page.keyboard.type("Only the keyboard.")
        await page.keyboard.press("Tab")
        await page.keyboard.type("g")
        await page.keyboard.press("Tab")
        await page.keyboard.type("py__greet")
        # the check that follows typing swaps the mapping cell for a table of greet's parameters
        # (its own row under the operation); tabbing on before it lands raced that swap
        await expect(page.locator("#op-0-maptable")).to_be_visible()
        await page.keyboard.press("Tab")  # remove button
        await page.keyboard.press("Tab")  # mapping row under the operation: greet's `name`
        await page.keyboard.press("Tab")  # ... and `excited`
        await page.keyboard.press("Tab")  # add operation
        await page.keyboard.press("Tab")  # routing mode
        await page.keyboard.press("ArrowDown")  # agent_driven
        await expect(page.locator("#routing")).to_have_value("agent_driven")
        await expect(page.locator("#problem-count")).to_have_text("Valid: ready to save.")
        await page.focus("#save")
        await page.keyboard.press("Enter")
        await expect(page.locator("h1")).to_contain_text("typed")
        assert [row.name for row in await server.runtime.definitions.repo.list(None)] == ["typed"]


async def test_an_edit_makes_a_version_and_the_page_shows_the_difference(
    browser: Any, tmp_path: Path
) -> None:
    async with serve_ui({"backends": [python_backend()]}, tmp_path) as server:
        definition = {
            "name": "versioned",
            "description": "First words.",
            "routing": "agent_driven",
            "operations": [{"slug": "greet", "tool": "py/greet"}],
        }
        await server.runtime.definitions.create(None, definition, "active", None)
        page = await browser.new_page()
        await page.goto(f"{server.url}/tools/versioned/edit")
        await page.fill("#description", "Second words.")
        await page.click("#save")
        await expect(page.locator("#versions tbody tr")).to_have_count(2)
        await expect(page.locator("#diff .del")).to_contain_text("First words.")
        await expect(page.locator("#diff .add")).to_contain_text("Second words.")
        await page.select_option("#from", "2")
        await page.click("#diff-form button")
        await expect(page.locator("#diff")).to_have_text("(no difference)")


WORKFLOW_YAML = """name: hello_then_times
description: Greet, then multiply.
parameters:
  type: object
  properties:
    who: {type: string}
  required: [who]
steps:
- id: hello
  tool: py/greet
  arguments: {name: "{{ params.who }}"}
- id: times
  tool: py/multiply
  arguments: {a: 2, b: 3}
  dependsOn: [hello]
"""


async def test_build_a_workflow_in_yaml_and_watch_its_run(browser: Any, tmp_path: Path) -> None:
    async with serve_ui({"backends": [python_backend()]}, tmp_path) as server:
        page = await browser.new_page()
        await page.goto(f"{server.url}/")
        await page.click("#new-workflow")
        await expect(page.locator("#problem-count")).not_to_have_text("Valid: ready to save.")  # empty form
        await page.fill("#yaml", WORKFLOW_YAML.replace("py/multiply", "py/nothing"))
        await expect(page.locator("#s-1-tool")).to_have_value("py/nothing")  # the form follows the text
        await expect(page.locator("#err-s-1-tool")).to_contain_text("py/nothing")
        await page.fill("#yaml", WORKFLOW_YAML)
        await expect(page.locator("#problem-count")).to_have_text("Valid: ready to save.")
        await expect(page.locator("#preview #dag g.node")).to_have_count(2)
        await page.click("#save")
        await expect(page.locator("h1")).to_contain_text("hello_then_times")
        await page.fill("#arg-who", "Ada")
        await page.click("#try-form button[type=submit]")
        await page.click("#run-link")
        await expect(page.locator('#dag g[data-step="times"]')).to_have_class(re.compile("completed"))
