"""The web UI tests: a real Chromium (Playwright) against a gateway served on loopback."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from support.browser import chromium


@pytest.fixture
async def browser(api_env: None) -> AsyncIterator[Any]:
    """A headless Chromium for this test (skips with the reason when none is installed)."""
    async with chromium() as found:
        yield found
