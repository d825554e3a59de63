"""A run's page as a user reads it: a fan-out's targets with what each answered, an interrupted
run's timeline, a workflow's picture whose labels stay inside their boxes — one gateway and one
browser for the whole module."""

from __future__ import annotations

import re
import time
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from playwright.async_api import expect

from support.browser import UiServer, serve_ui_for_module
from support.configs import python_backend
from toolweave.runs import RunRecord, StepRecord, new_run_id
from toolweave.store import SqlRunStore

pytestmark = pytest.mark.asyncio(loop_scope="session")  # where the session's Chromium lives

FANOUT = {
    "name": "ask_everyone",
    "description": "Greet, multiply and explode at once.",
    "kind": "fanout",
    "input_schema": {"type": "object", "properties": {"who": {"type": "string"}}, "required": ["who"]},
    "targets": [
        {"tool": "py/greet", "arguments": {"name": "{{ who }}"}},
        {"tool": "py/multiply", "arguments": {"a": 6, "b": 7}},
        {"tool": "py/explode", "arguments": {"message": "target on fire"}},
    ],
}
LONG_LABELS = {
    "name": "long_labels",
    "description": "A workflow whose step ids and tool names are long.",
    "parameters": {"type": "object", "properties": {"who": {"type": "string"}}},
    "steps": [
        {
            "id": "say_hello_to_the_person_named_in_the_parameters",
            "tool": "py/greet",
            "arguments": {"name": "{{ params.who }}"},
        },
        {
            "id": "MEASURE_THE_SQUARED_DISTANCE_OF_THE_POINT",  # wide letters: wider than its box
            "tool": "py/squared_distance",
            "arguments": {"point": {"x": 1, "y": 2}},
            "dependsOn": ["say_hello_to_the_person_named_in_the_parameters"],
            "condition": "{{ steps.say_hello_to_the_person_named_in_the_parameters.status == 'completed' }}",
        },
    ],
}


SECOND = "MEASURE_THE_SQUARED_DISTANCE_OF_THE_POINT"


@pytest_asyncio.fixture(loop_scope="session", scope="module")
async def server(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[UiServer]:
    raw = {"backends": [python_backend()], "composite_tools": [FANOUT, LONG_LABELS]}
    async with serve_ui_for_module(raw, tmp_path_factory.mktemp("run-pages")) as served:
        yield served


async def test_a_fanout_run_shows_each_target_and_what_it_answered(server: UiServer, page: Any) -> None:
    await page.goto(f"{server.url}/tools/ask_everyone")
    await page.fill("#arg-who", "Ada")
    await page.click("#try-form button[type=submit]")
    await expect(page.locator("#result")).to_contain_text("isError")
    await page.click("#run-link")
    await expect(page.locator("#steps-h")).to_have_text("Targets")
    rows = page.locator("#run-steps tbody tr")
    await expect(rows).to_have_count(3)
    greet, multiply, explode = (page.locator(f'#run-steps tr[data-step="py__{n}"]') for n in FANOUT_TOOLS)
    await expect(greet.locator(".status")).to_have_text("completed")
    await expect(greet.locator("td a")).to_have_attribute("href", "/tools/py__greet")
    await expect(greet.locator(".step-output summary")).to_contain_text("Hello, Ada")
    await expect(multiply.locator(".step-output summary")).to_contain_text("42")
    await multiply.locator(".step-output summary").click()
    await expect(multiply.locator(".step-output pre")).to_be_visible()
    await expect(explode.locator(".status")).to_have_text("failed")
    await expect(explode.locator(".step-error")).to_contain_text("target on fire")
    await expect(page.locator('#timeline g[data-step="py__explode"]')).to_have_count(1)


FANOUT_TOOLS = ("greet", "multiply", "explode")


async def test_an_interrupted_run_draws_its_step_where_it_began_for_as_long_as_it_ran(
    server: UiServer, page: Any
) -> None:
    began = time.time() - 5.0
    run = RunRecord(id=new_run_id(), tool="long_labels", kind="workflow", started_at=began)
    first = "say_hello_to_the_person_named_in_the_parameters"
    done = StepRecord(id=first, status="completed", attempts=1, latency_ms=400.0, start_ms=0.0)
    waiting = StepRecord(id=SECOND, status="running", start_ms=1000.0)
    gone = SqlRunStore(server.runtime.db)  # another gateway on this database, stopped mid-run
    await gone.start_run(run)
    await gone.checkpoint(run.id, done)
    await gone.checkpoint(run.id, waiting)
    await gone.close()

    await page.goto(f"{server.url}/runs/{run.id}")
    await expect(page.locator("#run-status")).to_have_text("interrupted")
    row = page.locator(f'#run-steps tr[data-step="{waiting.id}"]')
    await expect(row.locator(".status")).to_have_text("interrupted")
    elapsed = float(re.sub(r"[^0-9.]", "", await row.locator("td >> nth=4").inner_text()))
    assert 3500 <= elapsed <= 60_000, elapsed  # from +1 s to the gateway's stop (~5 s after the start)
    bar = page.locator(f'#timeline g[data-step="{waiting.id}"]')
    await expect(bar.locator("text.label")).to_contain_text("interrupted")
    box = await bar.locator("rect").bounding_box()
    other = await page.locator(f'#timeline g[data-step="{first}"] rect').bounding_box()
    assert box is not None and other is not None
    assert box["x"] > other["x"] + other["width"]  # it began after the first step ended...
    assert box["width"] > 4 * other["width"]  # ...and ran (about 4 s) far longer than its 0.4 s
    await expect(page.locator(f'#dag g[data-step="{waiting.id}"]')).to_have_class(re.compile("interrupted"))


async def test_workflow_picture_labels_stay_inside_their_boxes(server: UiServer, page: Any) -> None:
    await page.goto(f"{server.url}/tools/long_labels")
    nodes = page.locator("#dag g.node")
    await expect(nodes).to_have_count(2)
    for index in range(2):
        node = nodes.nth(index)
        box = await node.locator("rect").bounding_box()
        assert box is not None
        for label in ("step-id", "step-detail"):
            inner = await node.locator(f".{label}").bounding_box()
            assert inner is not None
            assert box["x"] <= inner["x"] and inner["x"] + inner["width"] <= box["x"] + box["width"], (
                label,
                index,
            )
            assert box["y"] <= inner["y"] and inner["y"] + inner["height"] <= box["y"] + box["height"], (
                label,
                index,
            )
    wide = page.locator(f'#dag g[data-step="{SECOND}"]')
    # cut short with an ellipsis, and the whole name (with its tool and condition) in its tooltip
    assert await wide.locator(".step-id .cut").evaluate("e => e.scrollWidth > e.clientWidth")
    assert await wide.locator(".step-id .cut").evaluate("e => getComputedStyle(e).textOverflow") == "ellipsis"
    await expect(wide.locator("title")).to_contain_text(f"{SECOND}: py/squared_distance — if")
    await expect(wide.locator(".cond")).to_be_visible()  # the condition's mark is never cut off
