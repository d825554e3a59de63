"""Screenshots of the web UI for docs/ui.md, taken with the same browser as the UI tests.

    .venv/bin/python docs/ui/screenshots.py          # needs Playwright and Chromium (see docs/ui.md)

Serves the bundled demo (examples/demo.toml, on a throwaway database and a free loopback
port), builds a router in the builder, tries it and opens its run, answers a workflow's
question in Try it, opens a fan-out's run, the backends and the Add a backend form, saving a PNG of each
page next to this file. Run it after changing a page so the pictures stay current.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import sys
import tempfile
from pathlib import Path

import uvicorn

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
WIDTH, HEIGHT = 1280, 860


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def wait_for_backends(base: str, seconds: float = 120.0) -> None:
    """The demo's stdio backends may connect after the server starts (a loaded machine): wait for all."""
    import httpx

    async with httpx.AsyncClient(base_url=base) as client:
        for _ in range(int(seconds * 2)):
            backends = (await client.get("/api/v1/backends")).json()["backends"]
            if all(b["status"] == "connected" for b in backends):
                await asyncio.sleep(1.0)  # the catalog rebuild after the last connect
                return
            await asyncio.sleep(0.5)
    sys.exit("the demo's backends did not all connect")


async def shoot(base: str, chromium: str) -> None:
    from playwright.async_api import async_playwright

    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = await browser.new_page(viewport={"width": WIDTH, "height": HEIGHT})

        async def save(name: str) -> None:
            await page.screenshot(path=str(HERE / f"{name}.png"), full_page=False)
            print(f"wrote docs/ui/{name}.png")

        await page.goto(f"{base}/")
        await save("list")
        await page.goto(f"{base}/tools/smart_scraper")
        await save("tool")

        await page.goto(f"{base}/tools/research_note")
        await page.locator("#steps-h").scroll_into_view_if_needed()
        await save("workflow")

        await page.goto(f"{base}/build/router")
        await page.fill("#name", "note_or_search")
        await page.fill("#description", "Save a note, or search the notes, depending on the request.")
        await page.fill("#op-0-slug", "save")
        await page.fill("#op-0-tool", "notes__add_note")
        await page.click("#add-op")
        await page.fill("#op-1-slug", "find")
        await page.fill("#op-1-tool", "notes__search")
        await page.fill("#op-1-map-query", "text")  # the mapping table: `text` feeds search's query
        await page.click("#add-rule")
        await page.select_option("#rule-0-type", "exists")
        await page.fill("#rule-0-field", "title")
        await page.fill("#rule-0-operation", "save")
        await page.fill("#default_operation", "find")
        await page.wait_for_selector("#problem-count.ok")
        await save("builder")
        await page.click("#save")
        await page.wait_for_selector("#try-form")
        await page.fill("#arg-text", "deploy")
        await page.click("#try-form button[type=submit]")
        await page.wait_for_selector("#routing")
        await page.locator("#try").scroll_into_view_if_needed()
        await save("try")
        await page.click("#run-link")
        await page.wait_for_selector("#run-status")
        await save("run")

        await page.goto(f"{base}/tools/note_or_search")
        await page.click("#regenerate")
        await page.wait_for_selector("#new-description")
        await page.locator("#describe").scroll_into_view_if_needed()
        await save("describe")

        await page.goto(f"{base}/build/fanout")
        await page.fill("#name", "search_everything")
        await page.fill("#description", "Search the notes and the docs at once.")
        await page.fill("#catalog-q", "search")
        await page.click('#catalog-results button[value="notes__search"]')
        await page.fill("#catalog-q", "search documentation")
        await page.wait_for_selector('#catalog-results button[value="docs__search"]')
        await page.wait_for_selector("#problem-count.ok")
        await save("builder-fanout")

        await page.goto(f"{base}/build/workflow")
        await page.fill("#name", "search_then_note")
        await page.fill("#description", "Search the docs, then save what was found as a note.")
        await page.fill(
            "#parameters", "type: object\nproperties:\n  topic: {type: string}\nrequired: [topic]"
        )
        await page.fill("#s-0-id", "find")
        await page.fill("#s-0-tool", "docs__search")
        await page.fill("#s-0-arguments", '{query: "{{ params.topic }}"}')
        await page.click("#add-step")
        await page.fill("#s-1-id", "save")
        await page.fill("#s-1-tool", "notes__add_note")
        await page.fill(
            "#s-1-arguments", '{title: "{{ params.topic }}", body: "{{ steps.find.output.text }}"}'
        )
        await page.select_option("#s-1-on_error", "retry")
        await page.fill("#s-1-retries", "2")
        await page.wait_for_selector("#problem-count.ok")
        await save("builder-workflow")

        # Try it, live: the demo's quick_note asks for a title in the page, then saves the note
        await page.goto(f"{base}/tools/quick_note")
        await page.fill("#arg-body", "Rotate the staging keys before Friday.")
        await page.click("#try-form button[type=submit]")
        await page.wait_for_selector("#question")
        await page.locator("#try").scroll_into_view_if_needed()
        await save("question")
        await page.fill("#answer-title", "Staging keys")
        await page.click("#answer")
        await page.wait_for_selector("#result-timeline")
        await page.click("#run-link")
        await page.wait_for_selector("#timeline")
        await page.locator("#steps-h").scroll_into_view_if_needed()
        await save("run-workflow")

        await page.goto(f"{base}/tools/search_all")
        await page.fill("#arg-query", "deploy")
        await page.click("#try-form button[type=submit]")
        await page.click("#run-link")
        await page.wait_for_selector("#run-steps")
        await page.locator("#steps-h").scroll_into_view_if_needed()
        await save("run-fanout")

        await page.goto(f"{base}/backends")
        await save("backends")

        await page.goto(f"{base}/backends/new")
        await page.fill("#name", "Weather")
        await page.fill("#command", "npx")
        await page.fill("#args", "-y\n@example/weather-mcp")
        await page.fill("#env", "WEATHER_API_KEY=sk-not-shown-again")
        await page.click("#save-backend")  # refused: the name's capital W, said at its field
        await page.wait_for_selector("#err-name:not(:empty)")
        await save("backend-new")
        await browser.close()


async def main() -> None:
    chromium = os.environ.get("TOOLWEAVE_TEST_CHROMIUM") or shutil.which("chromium")
    if chromium is None:
        sys.exit("needs Chromium: apt-get install chromium (or set TOOLWEAVE_TEST_CHROMIUM)")
    with tempfile.TemporaryDirectory() as scratch:
        os.environ["TOOLWEAVE_DEMO_DB"] = str(Path(scratch) / "demo.db")
        # the demo's stdio servers are commands of this virtualenv, as with `toolweave serve` from it
        os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
        os.chdir(ROOT)
        from toolweave.config import load_config
        from toolweave.server.app import server_app

        config = load_config(ROOT / "examples" / "demo.toml")
        port = free_port()
        server = uvicorn.Server(
            uvicorn.Config(server_app(config), host="127.0.0.1", port=port, log_level="warning")
        )
        task = asyncio.create_task(server.serve())
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.05)
        try:
            await wait_for_backends(f"http://127.0.0.1:{port}")
            await shoot(f"http://127.0.0.1:{port}", chromium)
        finally:
            server.should_exit = True
            await task


if __name__ == "__main__":
    asyncio.run(main())
