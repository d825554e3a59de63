"""The export tests' gateway: one home for `ts_gateway`."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from support.configs import write_ts_config
from toolweave import Gateway


@pytest.fixture
async def ts_gateway(tmp_path: Path, in_process_testserver: None) -> AsyncIterator[Gateway]:
    """A started gateway with tests/servers/testserver.py as the backend `ts` (in-process: the export
    is the subject, not stdio)."""
    async with Gateway.from_config(write_ts_config(tmp_path)) as gateway:
        yield gateway
