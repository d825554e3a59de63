"""Try it (a form from the input schema, the call through the executor, the result explained), the
runs list and a run's page with its step timeline, and the backends page — in a real browser."""

from __future__ import annotations

import re
import time
from pathlib import Path
from typing import Any

import pytest
import tw_gates
from playwright.async_api import expect

from support.api import GREETER, SCRAPER
from support.browser import serve_ui
from support.configs import python_backend
from support.paths import PYTHON, TESTSERVER
from toolweave.runs import RunRecord, StepRecord, new_run_id
from toolweave.server.ui.run_view import MIN_BAR
from toolweave.store import Database, SqlRunStore

WORKFLOW = {
    "name": "greet_then_multiply",
    "description": "Greet someone, then multiply two numbers.",
    "parameters": {
        "type": "object",
        "properties": {"who": {"type": "string"}, "a": {"type": "number"}},
        "required": ["who", "a"],
    },
    "steps": [
        {"id": "hello", "tool": "py/greet", "arguments": {"name": "{{ params.who }}"}},
        {
            "id": "times",
            "tool": "py/multiply",
            "arguments": {"a": "{{ params.a }}", "b": 2},
            "dependsOn": ["hello"],
        },
        {
            "id": "boom",
            "tool": "py/explode",
            "arguments": {},
            "dependsOn": ["hello"],
            "onError": {"action": "continue"},
        },
    ],
}


CLOCKS_MS = 0.01
"""A step's start is wall-clock time and its duration a monotonic clock's, each rounded to 1 µs."""


async def _bar_ms(bar: Any, which: str) -> float:
    """A timeline bar's `data-start-ms` or `data-latency-ms`: what its position and width draw."""
    value = await bar.get_attribute(f"data-{which}-ms")
    assert value is not None, f"the bar has no data-{which}-ms"
    return float(value)


pytestmark = pytest.mark.usefixtures("in_process_testserver")
"""The test server behind `ts` runs in this process: the pages are the subject, not its stdio child."""


def scraper_backend() -> dict[str, Any]:
    return {"name": "ts", "command": PYTHON, "args": [str(TESTSERVER)]}


async def test_try_a_router_and_find_its_run(browser: Any, tmp_path: Path) -> None:
    raw = {"backends": [scraper_backend()], "composite_tools": [SCRAPER]}
    async with serve_ui(raw, tmp_path) as server:
        page = await browser.new_page()
        await page.goto(f"{server.url}/tools/smart_scraper")
        await expect(page.locator('label[for="arg-url"] .required')).to_be_visible()
        await page.fill("#arg-url", "https://www.linkedin.com/in/ada")
        await page.click("#try-form button[type=submit]")
        result = page.locator("#result")
        await expect(result).to_contain_text("Success")
        await expect(page.locator("#routing")).to_contain_text("linkedin")
        await expect(page.locator("#routing")).to_contain_text("contains")

        await page.click("#run-link")
        await expect(page.locator("#run-status")).to_have_text("completed")
        await expect(page.locator("#run-reason")).to_contain_text("linkedin")
        await expect(page.locator("#run-arguments")).to_contain_text("linkedin.com/in/ada")

        await page.click("nav >> text=Runs")
        await expect(page.locator("#runs tbody tr")).to_have_count(1)
        await expect(page.locator("#runs")).to_contain_text("smart_scraper")
        two_days_ago = time.time() - 2 * 86_400
        old = RunRecord(
            id=new_run_id(), tool="smart_scraper", kind="router", status="completed", started_at=two_days_ago
        )
        await server.runtime.runs.start_run(old)
        await page.goto(f"{server.url}/runs?tool=smart_scraper")
        await expect(page.locator("#runs tbody tr")).to_have_count(2)
        await page.goto(f"{server.url}/runs?since=24h&status=completed&tool=smart_scraper")
        await expect(page.locator("#runs tbody tr")).to_have_count(1)
        await expect(page.locator(f'tr[data-run="{old.id}"]')).to_have_count(0)
        await page.goto(f"{server.url}/runs?status=failed")
        await expect(page.locator(".empty")).to_have_text("No runs match.")


async def test_try_shows_is_error_and_bad_arguments_at_their_field(browser: Any, tmp_path: Path) -> None:
    raw = {"backends": [python_backend()], "composite_tools": [GREETER]}
    async with serve_ui(raw, tmp_path) as server:
        page = await browser.new_page()
        await page.goto(f"{server.url}/tools/py__multiply")
        await page.fill("#arg-a", "3")
        await page.fill("#arg-b", "2.5")
        await page.click("#try-form button[type=submit]")
        await expect(page.locator("#result")).to_contain_text("Success")
        await expect(page.locator("#result .tree-root")).to_contain_text("7.5")  # structured content

        await page.goto(f"{server.url}/tools/py__explode")
        await page.click("#try-form button[type=submit]")
        await expect(page.locator("#result")).to_have_class(re.compile("is-error"))
        await expect(page.locator("#result")).to_contain_text("isError")

        # JSON that does not parse is reported where it was typed, and nothing is called
        await page.goto(f"{server.url}/tools/greeter")
        await page.click("text=Arguments as JSON")
        await page.fill("#arg-json", "{not json")
        await page.click("#try-form button[type=submit]")
        await expect(page.locator(".field-problem")).to_contain_text("not valid JSON")
        assert await server.runtime.runs.list_runs() == []


async def test_a_workflow_run_page_draws_its_steps(browser: Any, tmp_path: Path) -> None:
    raw = {"backends": [python_backend()], "composite_tools": [WORKFLOW]}
    async with serve_ui(raw, tmp_path) as server:
        page = await browser.new_page()
        await page.goto(f"{server.url}/tools/greet_then_multiply")
        await expect(page.locator("#dag g.node")).to_have_count(3)
        times = await page.locator('#dag g[data-step="times"] rect').bounding_box()
        hello = await page.locator('#dag g[data-step="hello"] rect').bounding_box()
        assert times is not None and hello is not None and times["x"] > hello["x"]  # after its dependency
        await page.fill("#arg-who", "Ada")
        await page.fill("#arg-a", "4")
        await page.click("#try-form button[type=submit]")
        await expect(page.locator("#workflow-steps li")).to_have_count(3)
        # the result draws _meta's steps on a timeline too: times and boom start after hello ended
        await expect(page.locator("#result-timeline g.step")).to_have_count(3)
        hello, times = (
            page.locator(f'#result-timeline g[data-step="{step}"]') for step in ("hello", "times")
        )
        hello_bar, times_bar = (
            await hello.locator("rect").bounding_box(),
            await times.locator("rect").bounding_box(),
        )
        assert hello_bar is not None and times_bar is not None
        assert times_bar["x"] > hello_bar["x"]  # drawn after it...
        # ...at the time it started, which is after hello ended (read from the bars: a step far shorter
        # than the run is drawn MIN_BAR wide, longer than it took, so its drawn end says nothing)
        hello_end = await _bar_ms(hello, "start") + await _bar_ms(hello, "latency")
        assert await _bar_ms(times, "start") >= hello_end - CLOCKS_MS
        await page.click("#run-link")
        # the workflow's picture, each step coloured by its state
        await expect(page.locator("#dag g.node")).to_have_count(3)
        await expect(page.locator('#dag g[data-step="boom"]')).to_have_class(re.compile("failed"))
        await expect(page.locator('#dag g[data-step="hello"]')).to_have_class(re.compile("completed"))
        await expect(page.locator("#dag path.edge")).to_have_count(2)
        bars = page.locator("#timeline g.step")
        await expect(bars).to_have_count(3)
        await expect(page.locator('#timeline g[data-step="boom"]')).to_have_class(re.compile("failed"))
        await expect(page.locator('#timeline g[data-step="times"]')).to_have_class(re.compile("completed"))
        await expect(page.locator("#run-steps")).to_contain_text("boom")


async def test_backends_page_lists_status_and_counts(browser: Any, tmp_path: Path) -> None:
    raw = {"backends": [python_backend(), {"name": "gone", "url": "http://127.0.0.1:9/mcp"}]}
    async with serve_ui(raw, tmp_path) as server:
        page = await browser.new_page()
        await page.goto(f"{server.url}/backends")
        py = page.locator('tr[data-backend="py"]')
        await expect(py).to_contain_text("connected")
        count = len(server.runtime.gateway.backends["py"].tools)
        await expect(py.locator("td").nth(3)).to_have_text(str(count))
        gone = page.locator('tr[data-backend="gone"]')
        await expect(gone.locator(".status")).not_to_have_text("connected")
        await expect(gone.locator("td").nth(6)).not_to_be_empty()


async def test_a_read_only_key_is_offered_no_call_and_refused(browser: Any, tmp_path: Path) -> None:
    raw = {"backends": [python_backend()]}
    async with serve_ui(raw, tmp_path, require_auth=True) as server:
        key = await server.key("alice", "tools:read")
        context = await browser.new_context()
        page = await context.new_page()
        await page.goto(f"{server.url}/login")
        await page.fill("#key", key)
        await page.click("button[type=submit]")
        await page.goto(f"{server.url}/tools/py__greet")
        await expect(page.locator("h1")).to_contain_text("py__greet")
        await expect(page.locator("#try-form")).to_have_count(0)
        # posting anyway (with the session's own CSRF token) is refused by the server
        token = await page.evaluate("JSON.parse(document.body.getAttribute('hx-headers'))['X-CSRF-Token']")
        refused = await page.request.post(
            f"{server.url}/tools/py__greet/try", form={"csrf": token, "name": "x"}
        )
        assert refused.status == 403
        assert await server.runtime.runs.list_runs() == []


async def test_an_interrupted_run_is_resumed_from_its_page(browser: Any, tmp_path: Path) -> None:
    hello = {"status": "completed", "output": "Hello, Ada.", "content": [], "error": None, "attempts": 1}
    crashed = RunRecord(
        id=new_run_id(),
        tool="greet_then_multiply",
        kind="workflow",
        arguments={"who": "Ada", "a": 4},
        steps=[
            StepRecord("hello", "completed", attempts=1, output="Hello, Ada."),
            StepRecord("times", "running"),
        ],
        state={"steps": {"hello": hello}},
    )
    async with Database.from_url(f"sqlite:///{tmp_path / 'ui.db'}") as db:  # a gateway that died mid-run
        store = SqlRunStore(db)
        await store.start_run(crashed)
        await store.close()
    async with serve_ui({"backends": [python_backend()], "composite_tools": [WORKFLOW]}, tmp_path) as server:
        page = await browser.new_page()
        await page.goto(f"{server.url}/runs?status=interrupted")
        await page.click(f'tr[data-run="{crashed.id}"] a >> nth=0')
        await expect(page.locator("#run-status")).to_have_text("interrupted")
        await page.fill("#resume-arguments", "{not json")
        await page.click("#resume")
        await expect(page.locator("#resume-problem")).to_contain_text("not valid JSON")
        await page.click("#resume")
        await expect(page.locator("#result")).to_contain_text("Success")
        await page.goto(f"{server.url}/runs/{crashed.id}")
        await expect(page.locator("#run-status")).to_have_text("completed")
        await expect(page.locator("#resume")).to_have_count(0)


async def test_reconnect_a_backend_from_its_page(browser: Any, tmp_path: Path) -> None:
    raw = {"backends": [scraper_backend(), python_backend()]}
    async with serve_ui(raw, tmp_path, require_auth=True) as server:
        backend = server.runtime.gateway.backends["ts"]
        before = backend.connected_at
        reader = await browser.new_context()
        page = await reader.new_page()
        await page.goto(f"{server.url}/login")
        await page.fill("#key", await server.key("acme", "tools:read", "tools:call"))
        await page.click("button[type=submit]")
        await page.goto(f"{server.url}/backends")
        await expect(page.locator('tr[data-backend="ts"]')).to_contain_text("connected")
        await expect(page.locator("button.reconnect")).to_have_count(0)  # no tools:admin: not offered
        token = await page.evaluate("JSON.parse(document.body.getAttribute('hx-headers'))['X-CSRF-Token']")
        refused = await page.request.post(f"{server.url}/backends/ts/reconnect", form={"csrf": token})
        assert refused.status == 403 and backend.connected_at == before  # and refused by the server

        admin = await browser.new_context()
        page = await admin.new_page()
        await page.goto(f"{server.url}/login")
        await page.fill("#key", await server.key("acme"))
        await page.click("button[type=submit]")
        await page.goto(f"{server.url}/backends")
        no_token = await page.request.post(f"{server.url}/backends/ts/reconnect")
        assert no_token.status == 403 and backend.connected_at == before  # CSRF: no token, no action
        await page.click('tr[data-backend="ts"] button.reconnect')
        await expect(page.locator("#backends-notice")).to_contain_text("Reconnecting ts")
        # the table refreshes itself until the new connection is up
        await expect(page.locator('tr[data-backend="ts"] .status')).to_have_text("connected", timeout=15_000)
        assert backend.connected_at is not None and before is not None and backend.connected_at > before
        await expect(page.locator('tr[data-backend="py"] .status')).to_have_text("connected")


NAP_THEN_GREET = {
    "name": "nap_then_greet",
    "description": "Nap, greet meanwhile, then greet again after the nap.",
    "parameters": {"type": "object", "properties": {}},
    "steps": [
        {"id": "nap", "tool": "py/nap", "arguments": {"seconds": 0.4}},
        {"id": "meanwhile", "tool": "py/greet", "arguments": {"name": "meanwhile"}},
        {"id": "after", "tool": "py/greet", "arguments": {"name": "after"}, "dependsOn": ["nap"]},
    ],
}


async def test_the_run_timeline_places_steps_by_their_start(browser: Any, tmp_path: Path) -> None:
    async with serve_ui(
        {"backends": [python_backend()], "composite_tools": [NAP_THEN_GREET]}, tmp_path
    ) as server:
        page = await browser.new_page()
        await page.goto(f"{server.url}/tools/nap_then_greet")
        await page.click("#try-form button[type=submit]")
        await page.click("#run-link")
        await expect(page.locator("#timeline g.step")).to_have_count(3)

        async def box(step: str) -> dict[str, float]:
            found = await page.locator(f'#timeline g[data-step="{step}"] rect').bounding_box()
            assert found is not None
            return found

        bars = {step: await box(step) for step in ("nap", "meanwhile", "after")}
        nap, meanwhile, after = bars["nap"], bars["meanwhile"], bars["after"]
        assert after["x"] >= nap["x"] + nap["width"] - 1  # waited for the nap: starts where it ended
        assert meanwhile["x"] < nap["x"] + nap["width"] - 1  # ran alongside it
        await expect(page.locator('#run-steps tr[data-step="after"] td').nth(2)).to_have_text(
            re.compile(r"^\+\d+\.\d ms$")
        )
        # the start times are in the stored record (SQLite), not only in the page
        (record,) = await server.runtime.runs.list_runs(tool="nap_then_greet")
        assert all(step.start_ms is not None for step in record.steps)
        starts = {step.id: step.start_ms or 0.0 for step in record.steps}
        took = {step.id: step.latency_ms for step in record.steps}
        assert starts["after"] >= 400 and took["nap"] >= 400
        # every bar is drawn to the record on one scale: offsets by start, widths by duration
        # (how long a greeting takes beside the nap is the machine's business, not the page's)
        picture = await page.locator("#timeline").bounding_box()
        assert picture is not None
        min_bar = MIN_BAR * picture["width"] / 820  # the viewBox is 820 units wide
        per_ms = nap["width"] / took["nap"]
        origin = nap["x"] - starts["nap"] * per_ms
        for name, bar in bars.items():
            assert bar["x"] == pytest.approx(origin + starts[name] * per_ms, abs=1)
            assert bar["width"] == pytest.approx(max(took[name] * per_ms, min_bar), abs=1)


SLOW_WORKFLOW = {
    "name": "nap_long_then_greet",
    "description": "Nap until the test says so, then greet.",
    "parameters": {"type": "object", "properties": {}},
    "steps": [
        {"id": "nap", "tool": "gates/wait_for", "arguments": {"gate": "runs-page"}},
        {"id": "hello", "tool": "py/greet", "arguments": {"name": "later"}, "dependsOn": ["nap"]},
        {"id": "boom", "tool": "py/explode", "dependsOn": ["nap"], "onError": {"action": "continue"}},
    ],
}


async def test_a_running_runs_page_follows_it_to_the_end(browser: Any, tmp_path: Path) -> None:
    # the run's first step waits until the test has seen it running (a fixed nap races a loaded machine)
    backends = [python_backend(), python_backend("gates", module="tw_gates")]
    raw = {"backends": backends, "composite_tools": [SLOW_WORKFLOW]}
    with tw_gates.gate("runs-page"):
        async with serve_ui(raw, tmp_path) as server:
            await _follow_a_running_run(browser, server)


async def _follow_a_running_run(browser: Any, server: Any) -> None:
    """Watch the gated run from the Try page, the runs list and its own page; then let it finish."""
    context = await browser.new_context()
    trying = await context.new_page()
    await trying.goto(f"{server.url}/tools/nap_long_then_greet")
    await trying.click("#try-form button[type=submit]")
    await expect(trying.locator("#live-state")).to_contain_text("Running")

    listing = await context.new_page()  # the runs list follows the running run too
    await listing.goto(f"{server.url}/runs?tool=nap_long_then_greet")
    await expect(listing.locator("#runs tbody .status")).to_have_text("running")

    page = await context.new_page()
    await page.goto(f"{server.url}/runs?status=running")
    await page.click("#runs tbody tr a >> nth=0")
    await expect(page.locator("#run-status")).to_have_text("running")
    await expect(page.locator('#dag g[data-step="nap"]')).to_have_class(re.compile("running"))
    tw_gates.open_gate("runs-page")
    # no reload: the page refreshes itself until the run ends, each step in its state's colour
    await expect(page.locator("#run-status")).to_have_text("completed", timeout=15_000)
    await expect(page.locator('#dag g[data-step="hello"]')).to_have_class(re.compile("completed"))
    await expect(page.locator('#dag g[data-step="boom"]')).to_have_class(re.compile("failed"))
    fill = "el => getComputedStyle(el).fill"
    done = await page.locator('#dag g[data-step="hello"] rect').evaluate(fill)
    failed = await page.locator('#dag g[data-step="boom"] rect').evaluate(fill)
    plain = await page.locator('#dag g[data-step="nap"] rect').evaluate(fill)
    assert done != failed and done == plain  # coloured by state, not all alike
    await expect(page.locator("#timeline g.step")).to_have_count(3)
    await expect(listing.locator("#runs tbody .status")).to_have_text("completed", timeout=10_000)


async def test_the_operator_filters_runs_by_tenant_and_sees_errors(browser: Any, tmp_path: Path) -> None:
    async with serve_ui({"backends": [python_backend()]}, tmp_path) as server:
        for tenant in ("acme", "globex"):
            await server.runtime.runs.start_run(
                RunRecord(
                    id=new_run_id(),
                    tool="py__explode",
                    kind="direct",
                    tenant=tenant,
                    status="failed",
                    error=f"boom for {tenant}",
                )
            )
        page = await browser.new_page()
        await page.goto(f"{server.url}/runs")
        await expect(page.locator("#runs tbody tr")).to_have_count(2)
        await page.fill("#run-tenant", "acme")
        await page.click(".filters button[type=submit]")
        await expect(page.locator("#runs tbody tr")).to_have_count(1)
        await expect(page.locator("#runs tbody")).to_contain_text("acme")
        await page.click("#runs tbody tr a >> nth=0")
        await expect(page.locator("#run-error")).to_have_text("boom for acme")
