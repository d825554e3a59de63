"""The web UI tests: a real Chromium (Playwright) against a gateway served on loopback.

One Chromium serves every test of the session (a launch costs 1–3 s, more than many tests): a test
that asks for `browser` runs in the session's event loop, where that Chromium lives, and each page
it opens with `browser.new_page()` / `browser.new_context()` is its own context (its own cookies and
storage), closed when the test ends; `page` is one such page. A module sharing a gateway between its
tests (`serve_ui_for_module`) declares that fixture `@pytest_asyncio.fixture(loop_scope="session",
scope="module")` and sets `pytestmark = pytest.mark.asyncio(loop_scope="session")`: the same Chromium,
no launch of its own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from support.browser import chromium

_HERE = Path(__file__).parent


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Tests of this folder that use the shared `browser` run in the session loop (where it lives)."""
    session_loop = pytest.mark.asyncio(loop_scope="session")
    for item in items:
        if _HERE not in Path(str(item.path)).parents or "browser" not in getattr(item, "fixturenames", ()):
            continue
        chosen = item.get_closest_marker("asyncio")
        if chosen is None or "loop_scope" not in chosen.kwargs:  # a module that chose its loop keeps it
            item.add_marker(session_loop, append=False)


@pytest_asyncio.fixture(loop_scope="session", scope="session")
async def _chromium() -> AsyncIterator[Any]:
    """The session's Chromium (skips every browser test, with the reason, when none is installed)."""
    async with chromium() as found:
        yield found


@pytest_asyncio.fixture(loop_scope="session")
async def browser(_chromium: Any, api_env: None) -> AsyncIterator[Any]:
    """The shared headless Chromium; the contexts (and pages) this test opened are closed after it."""
    before = set(_chromium.contexts)
    yield _chromium
    for context in _chromium.contexts:
        if context not in before:
            await context.close()


@pytest_asyncio.fixture(loop_scope="session")
async def page(browser: Any) -> Any:
    """A page in a fresh context (its own cookies and storage) of the shared Chromium, closed after the test."""
    context = await browser.new_context()
    return await context.new_page()
