"""The builders as a new user meets them: a form just opened is not red, a catalog search survives
each Add, and a mapping table's cells are wide enough to read — one gateway and browser per module."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from playwright.async_api import expect

from support.browser import UiServer, serve_ui_for_module
from support.configs import python_backend

pytestmark = pytest.mark.asyncio(loop_scope="session")  # where the session's Chromium lives


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[UiServer]:
    async with serve_ui_for_module({"backends": [python_backend()]}, tmp_path_factory.mktemp("ux")) as served:
        yield served


@pytest.mark.parametrize("kind", ["router", "fanout", "workflow"])
async def test_a_form_just_opened_shows_no_problem_until_touched(
    server: UiServer, page: Any, kind: str
) -> None:
    await page.goto(f"{server.url}/build/{kind}")
    await expect(page.locator("#problem-count")).to_contain_text("Fill the form")
    await expect(page.locator(".field-problem:not(:empty)")).to_have_count(0)
    await expect(page.locator(".problem")).to_have_count(0)

    # a field the user typed into speaks up; the ones still untouched stay quiet
    await page.fill("#name", "not a name!")
    await expect(page.locator("#err-name")).to_contain_text("must match")
    await expect(page.locator(".field-problem:not(:empty)")).to_have_count(1)
    await expect(page.locator("#problem-count")).to_have_class("problem")

    # a save shows every problem, each at its field or in general
    await page.click("#save")
    await expect(page.locator("#save-problem")).to_contain_text("Not saved")
    reported = int((await page.locator("#problem-count").inner_text()).split()[0])
    at_fields = await page.locator(".field-problem:not(:empty)").count()
    general = await page.locator("#general-problems li").count()
    assert at_fields + general >= reported


async def test_search_results_stay_after_each_add(server: UiServer, page: Any) -> None:
    await page.goto(f"{server.url}/build/fanout")
    await page.fill("#catalog-q", "multiply greet")
    adds = page.locator("#catalog-results button.pick")
    await expect(adds.first).to_be_visible()
    found = await adds.count()
    assert found >= 2
    await page.click('#catalog-results button[value="py__greet"]')
    await expect(page.locator("#catalog-q")).to_have_value("multiply greet")
    await expect(adds).to_have_count(found)  # still there for the next Add
    await page.click('#catalog-results button[value="py__multiply"]')
    await expect(adds).to_have_count(found)
    tools = page.locator('input[name$="-tool"]')
    assert {await tools.nth(i).input_value() for i in range(await tools.count())} >= {
        "py__greet",
        "py__multiply",
    }
    await expect(page.locator(".field-problem:not(:empty)")).to_have_count(0)  # nothing typed: nothing red


async def test_mapping_cells_show_their_whole_text(server: UiServer, page: Any) -> None:
    await page.goto(f"{server.url}/build/router")
    await page.fill("#op-0-slug", "distance")
    await page.fill("#op-0-tool", "py__squared_distance")
    cell = page.locator("#op-0-map-point")
    await expect(cell).to_be_visible()
    await cell.fill("the_unified_parameter_with_a_long_name")
    # the box is as wide as its text: nothing scrolls out of sight
    assert await cell.evaluate("e => e.scrollWidth <= e.clientWidth + 1")
    placeholder = page.locator('input[name="op-0-mapping"]')
    if await placeholder.count():
        assert await placeholder.first.evaluate("e => e.type") == "hidden"
