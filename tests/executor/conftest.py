"""Executor unit tests: gateways over `tests/servers/testserver.py`, run in-process (support/inprocess.py).

The executor's stages (admission, approval, policy, batches) are what is under test, not the stdio
transport, which tests/backends and the server tests cover with real processes.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from support.executor import MakeGateway, backend
from toolweave import Gateway


@pytest.fixture(autouse=True)
def _in_process(in_process_testserver: None) -> None:
    """Every executor test runs the test server in-process."""


@pytest.fixture
async def make_gateway(tmp_path: Path) -> AsyncIterator[MakeGateway]:
    """`await make_gateway(toml_text, **Gateway options)` → a started gateway, stopped after the test."""
    async with contextlib.AsyncExitStack() as stack:
        count = 0

        async def make(toml: str, **options: Any) -> Gateway:
            nonlocal count
            count += 1
            path = tmp_path / f"toolweave-{count}.toml"
            path.write_text(toml)
            return await stack.enter_async_context(Gateway.from_config(path, **options))

        yield make


@pytest.fixture
async def gw(make_gateway: MakeGateway) -> Gateway:
    """One test-server backend named `t`, default policy."""
    return await make_gateway(backend())
