"""The fan-out and workflow builders and the router's nested conditions, in a real browser: tools
picked by searching the catalog (with the keyboard), each problem at its field as you type, the
text editor as YAML or TOML keeping keys the form has no field for, saved, tried, and run."""

from __future__ import annotations

import asyncio
import contextlib
import re
from pathlib import Path
from typing import Any

from mcp import Client
from playwright.async_api import expect

from support.browser import serve_ui
from support.configs import python_backend

VALID = "Valid: ready to save."


async def test_build_a_fanout_by_searching_the_catalog_with_the_keyboard(
    browser: Any, tmp_path: Path
) -> None:
    async with serve_ui({"backends": [python_backend()]}, tmp_path) as server:
        page = await browser.new_page()
        await page.goto(f"{server.url}/")
        await page.click("#new-fanout")
        await page.fill("#name", "both")
        await page.fill("#description", "Greet and multiply at once.")
        # the catalog search, keyboard only: type, Tab to the best match's Add, Enter
        await page.focus("#catalog-q")
        await page.keyboard.type("greet someone by name")
        first = page.locator("#catalog-results button.pick").first
        await expect(first).to_have_attribute("value", "py__greet")
        await page.keyboard.press("Tab")
        await expect(first).to_be_focused()
        await page.keyboard.press("Enter")
        await expect(page.locator("#t-0-tool")).to_have_value("py__greet")
        await expect(page.locator("#hint-t-0-params")).to_have_text(
            "takes: name* (string), excited (boolean)"
        )
        await expect(page.locator("#name")).to_have_value("both")  # the pick kept what was typed

        await page.fill("#catalog-q", "multiply")
        await page.click('#catalog-results button[value="py__multiply"]')
        await expect(page.locator("#t-1-tool")).to_have_value("py__multiply")
        await page.fill("#t-1-arguments", "{a: 2, b: oops")
        await expect(page.locator("#err-t-1-arguments")).to_contain_text("not valid YAML")
        await page.fill("#t-1-arguments", "{a: 2, b: 3}")
        await page.select_option("#strategy", "sequential")
        await page.select_option("#order", "declared")
        await expect(page.locator("#problem-count")).to_have_text(VALID)
        await expect(page.locator("#err-t-1-arguments")).to_be_empty()
        await expect(page.locator("#preview-schema")).to_contain_text('"name"')
        await expect(page.locator("#yaml")).to_have_value(re.compile("strategy: sequential"))

        await page.click("#save")
        await expect(page.locator("h1")).to_contain_text("both")
        [stored] = await server.runtime.definitions.repo.list(None)
        assert stored.definition["strategy"] == "sequential"
        assert stored.definition["targets"][1] == {"tool": "py__multiply", "arguments": {"a": 2, "b": 3}}
        await page.fill("#arg-name", "Ada")
        await page.click("#try-form button[type=submit]")
        await expect(page.locator("#result")).to_contain_text("Hello, Ada")


async def test_build_a_workflow_in_the_form_through_toml_and_watch_its_run(
    browser: Any, tmp_path: Path
) -> None:
    async with serve_ui({"backends": [python_backend()]}, tmp_path) as server:
        page = await browser.new_page()
        await page.goto(f"{server.url}/build/workflow")
        await page.fill("#name", "greet_then_times")
        await page.fill("#description", "Greet.")
        await page.fill("#parameters", "type: object\nproperties:\n  who: {type: string}\nrequired: [who]")
        await page.fill("#s-0-id", "hello")
        await page.fill("#s-0-tool", "py/greet")
        await expect(page.locator("#hint-s-0-params")).to_contain_text("name* (string)")  # as you type
        await page.fill("#s-0-arguments", '{name: "{{ params.who }}"}')
        await page.click("#add-step")
        await expect(page.locator("#s-1-depends")).to_have_value("hello")  # a new step follows the last
        await page.fill("#s-1-id", "times")
        await page.fill("#s-1-tool", "py/multiply")
        await page.fill("#s-1-arguments", "{a: 2, b: 3}")
        await page.fill("#s-1-depends", "nobody")
        await expect(page.locator("#err-s-1-depends")).to_contain_text("unknown step")
        # an elicitation step shows its question instead of a tool
        await page.select_option("#s-1-type", "elicitation")
        await expect(page.locator("#s-1-message")).to_be_visible()
        await expect(page.locator("#s-1-tool")).to_be_hidden()
        await expect(page.locator("#err-s-1-message")).to_contain_text("required")
        await page.select_option("#s-1-type", "tool")
        await page.fill("#s-1-depends", "hello")
        await page.select_option("#s-1-on_error", "retry")
        await page.fill("#s-1-retries", "2")
        await expect(page.locator("#problem-count")).to_have_text(VALID)
        await expect(page.locator("#preview #dag g.node")).to_have_count(2)

        # the text editor as TOML; a key the form has no field for survives the trip back to the form
        await page.select_option("#format", "toml")
        await expect(page.locator("#yaml")).to_have_value(re.compile(r"\[\[composite_tools\]\]"))
        await expect(page.locator("#yaml")).to_have_value(re.compile("retryCount = 2"))
        toml = await page.locator("#yaml").input_value()
        await page.fill("#yaml", toml + 'tags = ["demo"]\n')
        await expect(page.locator('input[name="kept"]')).to_have_value(re.compile("demo"))  # refilled
        await expect(page.locator("#s-1-retries")).to_have_value("2")
        await page.fill("#description", "Greet, then multiply.")
        await expect(page.locator("#yaml")).to_have_value(re.compile(r'tags = \["demo"\]'))
        await expect(page.locator("#yaml")).to_have_value(re.compile("Greet, then multiply"))

        await page.click("#save")
        await expect(page.locator("h1")).to_contain_text("greet_then_times")
        [stored] = await server.runtime.definitions.repo.list(None)
        assert stored.definition["tags"] == ["demo"]
        assert stored.definition["steps"][1]["onError"] == {"action": "retry", "retryCount": 2}
        await page.fill("#arg-who", "Ada")
        await page.click("#try-form button[type=submit]")
        await page.click("#run-link")
        await expect(page.locator('#dag g[data-step="times"]')).to_have_class(re.compile("completed"))


async def test_a_router_rule_with_nested_conditions(browser: Any, tmp_path: Path) -> None:
    async with serve_ui({"backends": [python_backend()]}, tmp_path) as server:
        page = await browser.new_page()
        await page.goto(f"{server.url}/build/router")
        await page.fill("#name", "nested")
        await page.fill("#op-0-slug", "hello")
        await page.fill("#op-0-tool", "py__greet")
        await page.click("#add-op")
        await page.fill("#op-1-slug", "times")
        await page.fill("#op-1-tool", "py__multiply")
        await page.click("#add-rule")
        await page.select_option("#rule-0-type", "all")
        await page.fill("#rule-0-value", "[{type: exists, field: name}, {type: equals")
        await expect(page.locator("#err-rule-0-value")).to_contain_text("not valid YAML")
        await page.fill(
            "#rule-0-value", "[{type: exists, field: name}, {type: not, condition: {type: exists}}]"
        )
        await expect(page.locator("#err-rule-0-value")).to_contain_text("field")  # the nested problem, here
        await page.fill(
            "#rule-0-value",
            "[{type: exists, field: name}, {type: not, condition: {type: exists, field: a}}]",
        )
        await page.fill("#rule-0-operation", "hello")
        await page.fill("#default_operation", "times")
        await expect(page.locator("#problem-count")).to_have_text(VALID)
        await expect(page.locator("#yaml")).to_have_value(re.compile("conditions:"))
        await page.click("#save")
        await expect(page.locator("h1")).to_contain_text("nested")
        await page.fill("#arg-name", "Ada")
        await page.click("#try-form button[type=submit]")
        await expect(page.locator("#routing")).to_contain_text("hello")
        [stored] = await server.runtime.definitions.repo.list(None)
        nested = stored.definition["rules"][0]["condition"]
        assert nested["type"] == "all" and nested["conditions"][1]["type"] == "not"

        # edited again, the form shows the nested conditions in the rule's value box
        await page.click("#edit")
        await expect(page.locator("#rule-0-type")).to_have_value("all")
        await expect(page.locator("#rule-0-value")).to_have_value(re.compile(r"type: not"))


async def test_the_workflow_builder_works_with_the_keyboard_only(browser: Any, tmp_path: Path) -> None:
    async with serve_ui({"backends": [python_backend()]}, tmp_path) as server:
        page = await browser.new_page()
        await page.goto(f"{server.url}/build/workflow")
        await page.focus("#catalog-q")
        await page.keyboard.type("multiply two numbers")
        await expect(page.locator("#catalog-results button.pick").first).to_have_attribute(
            "value", "py__multiply"
        )
        await page.keyboard.press("Tab")
        await page.keyboard.press("Enter")  # the first step takes the picked tool
        await expect(page.locator("#s-0-tool")).to_have_value("py__multiply")
        await page.focus("#name")
        await page.keyboard.type("times_by_keys")
        await page.keyboard.press("Tab")
        await page.keyboard.type("Multiply two and three.")
        await page.focus("#s-0-arguments")
        await page.keyboard.type("{a: 2, b: 3}")
        await page.focus("#s-0-type")
        await page.keyboard.press("ArrowDown")  # elicitation: the question replaces the tool
        await expect(page.locator("#s-0-message")).to_be_visible()
        await page.keyboard.press("ArrowUp")
        await expect(page.locator("#s-0-tool")).to_be_visible()
        await expect(page.locator("#problem-count")).to_have_text(VALID)
        await page.focus("#save")
        await page.keyboard.press("Enter")
        await expect(page.locator("h1")).to_contain_text("times_by_keys")
        [stored] = await server.runtime.definitions.repo.list(None)
        assert stored.definition["steps"] == [
            {"id": "first", "tool": "py__multiply", "arguments": {"a": 2, "b": 3}}
        ]


async def test_editing_a_workflow_in_the_form_keeps_what_the_form_does_not_show(
    browser: Any, tmp_path: Path
) -> None:
    async with serve_ui({"backends": [python_backend()]}, tmp_path) as server:
        definition = {
            "kind": "workflow",
            "name": "kept",
            "description": "Greet, then multiply.",
            "tags": ["team-a"],
            "steps": [
                {"id": "hello", "tool": "py/greet", "arguments": {"name": "Ada"}},
                {
                    "id": "each",
                    "type": "forEach",
                    "collection": [1, 2],
                    "itemVar": "n",
                    "maxParallel": 2,
                    "step": {"tool": "py/multiply", "arguments": {"a": "{{ n }}", "b": 2}, "timeout": "5s"},
                    "dependsOn": ["hello"],
                    "onError": {"action": "continue"},
                    "defaultResults": {"text": "none"},
                },
            ],
        }
        await server.runtime.definitions.create(None, definition, "active", None)
        page = await browser.new_page()
        await page.goto(f"{server.url}/tools/kept")
        await page.click("#edit")
        await expect(page.locator("#s-1-type")).to_have_value("forEach")
        await expect(page.locator("#s-1-collection")).to_have_value("[1, 2]")
        await expect(page.locator("#s-1-tool")).to_have_value("py/multiply")
        await page.fill("#description", "Greet, then multiply each.")
        await expect(page.locator("#yaml")).to_have_value(re.compile("multiply each"))
        await page.click("#save")
        await expect(page.locator("#versions tbody tr")).to_have_count(2)
        [stored] = await server.runtime.definitions.repo.list(None)
        assert stored.definition == {**definition, "description": "Greet, then multiply each."}


async def test_a_rejected_fanout_edit_keeps_the_old_version_serving(browser: Any, tmp_path: Path) -> None:
    async with serve_ui({"backends": [python_backend()]}, tmp_path) as server:
        definition = {"kind": "fanout", "name": "hello_all", "description": "Greet.", "tools": ["py/greet"]}
        await server.runtime.definitions.create(None, definition, "active", None)
        page = await browser.new_page()
        await page.goto(f"{server.url}/tools/hello_all/edit")
        await page.fill("#t-0-tool", "py/gone")
        await page.fill("#t-0-arguments", "{name: x")
        await page.click("#save")
        await expect(page.locator("#save-problem")).to_contain_text("Not saved")
        await expect(page.locator("#err-t-0-arguments")).to_contain_text("not valid YAML")
        await page.fill("#t-0-arguments", "")
        await page.click("#save")
        await expect(page.locator("#save-problem")).to_contain_text("Not saved")
        await expect(page.locator("#err-t-0-tool")).to_contain_text("py/gone")
        await expect(page.locator("#t-0-tool")).to_have_value("py/gone")  # what was typed is kept

        async with Client(f"{server.url}/mcp") as client:
            result = await client.call_tool("hello_all", {"name": "Ada"})
            assert not result.is_error and "Hello, Ada" in str(result.content)
        [row] = await server.runtime.definitions.repo.list(None)
        assert row.version == 1 and row.definition["tools"] == ["py/greet"]


async def test_a_form_check_never_overwrites_the_text_being_typed(browser: Any, tmp_path: Path) -> None:
    async with serve_ui({"backends": [python_backend()]}, tmp_path) as server:
        page = await browser.new_page()
        await page.goto(f"{server.url}/build/fanout")
        await page.fill("#name", "from_form")  # its check is sent 400 ms later...
        text = "name: from_text\ndescription: Typed in the editor.\ntools: [py/greet]\n"
        await page.fill("#yaml", text)  # ...while the text editor has the focus and this text
        await expect(page.locator("#name")).to_have_value("from_text")  # the text won, the form followed
        await expect(page.locator("#yaml")).to_have_value(text)
        await expect(page.locator("#problem-count")).to_have_text(VALID)


async def test_an_older_check_answered_late_never_undoes_a_newer_one(browser: Any, tmp_path: Path) -> None:
    """Checks overtake each other on a busy server: only the newest may change the page (CI saw the
    editor turn back to YAML after the user chose TOML, and the TOML they then typed failed to parse)."""
    async with serve_ui({"backends": [python_backend()]}, tmp_path) as server:
        page = await browser.new_page()
        await page.goto(f"{server.url}/build/fanout")

        async def yaml_checks_answer_late(route: Any) -> None:
            if "format=yaml" in (route.request.post_data or ""):
                await asyncio.sleep(1.5)
            with contextlib.suppress(
                Exception
            ):  # the page gave up on it: what it should do with a stale check
                await route.continue_()

        await page.route("**/build/fanout/check", yaml_checks_answer_late)
        await page.fill("#name", "from_form")
        await page.wait_for_timeout(700)  # its check (in YAML) is under way, held back
        await page.select_option("#format", "toml")
        await expect(page.locator("#yaml")).to_have_value(re.compile(r"\[\[composite_tools\]\]"))
        await page.wait_for_timeout(2000)  # the older answer has had every chance to arrive
        await expect(page.locator("#yaml")).to_have_value(re.compile(r"\[\[composite_tools\]\]"))
        await expect(page.locator("#yaml")).to_have_value(re.compile("from_form"))
