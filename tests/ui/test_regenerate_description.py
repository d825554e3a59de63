"""Regenerate a composite's description from its page: previewed first (nothing stored), edited,
saved as a new version; an invalid text is refused with the previous version kept; a tool of the
config file can be previewed, never saved."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from playwright.async_api import expect

from support.browser import serve_ui
from support.configs import python_backend

ROUTER = {
    "name": "greeter",
    "description": "Greet or multiply.\n\n# Old generated part\n- stale",
    "routing": "agent_driven",
    "operations": [{"slug": "greet", "tool": "py/greet"}, {"slug": "times", "tool": "py/multiply"}],
}
FILE_FANOUT = {"kind": "fanout", "name": "from_file", "description": "Both at once.", "tools": ["py/greet"]}


async def test_regenerate_a_description_preview_edit_and_save(browser: Any, tmp_path: Path) -> None:
    raw = {"backends": [python_backend()], "composite_tools": [FILE_FANOUT]}
    async with serve_ui(raw, tmp_path) as server:
        await server.runtime.definitions.create(None, ROUTER, "active", None)
        page = await browser.new_page()
        await page.goto(f"{server.url}/tools/greeter")
        await page.click("#regenerate")
        preview = page.locator("#new-description")
        await expect(preview).to_have_value(re.compile(r"greet or multiply", re.IGNORECASE))
        await expect(preview).to_have_value(re.compile("Multiply two numbers"))
        assert "stale" not in await preview.input_value()
        [row] = await server.runtime.definitions.repo.list(None)
        assert row.version == 1  # the preview saved nothing

        # an empty description is refused, and the old version keeps serving
        await page.fill("#new-description", "")
        await page.click("#describe-save-button")
        await expect(page.locator("#describe-problem")).to_contain_text("Not saved: the description is empty")
        [row] = await server.runtime.definitions.repo.list(None)
        assert row.version == 1 and "stale" in row.definition["description"]

        await page.fill("#new-description", "Greet someone, or multiply two numbers. Edited by hand.")
        await page.click("#describe-save-button")
        await expect(page.locator("#description")).to_contain_text("Edited by hand.")
        await expect(page.locator("#versions tbody tr")).to_have_count(2)
        [row] = await server.runtime.definitions.repo.list(None)
        assert row.version == 2 and row.definition["description"].endswith("Edited by hand.")

        # a composite of the config file: the preview, but nothing to save
        await page.goto(f"{server.url}/tools/from_file")
        await page.click("#regenerate")
        await expect(page.locator("#new-description")).to_have_value(re.compile("both at once"))
        await expect(page.locator("#describe-save-button")).to_have_count(0)
        await expect(page.locator("#describe")).to_contain_text("config file")
