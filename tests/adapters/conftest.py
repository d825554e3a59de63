"""A gateway over the real stdio test server (`tests/servers/testserver.py`) for the adapter tests."""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from toolweave import Gateway

TESTSERVER = Path(__file__).resolve().parents[1] / "servers" / "testserver.py"


@pytest.fixture
async def gw(tmp_path: Path, in_process_testserver: None) -> AsyncIterator[Gateway]:
    """Backend `t` (the test server, in-process: the adapters are the subject, not stdio);
    `t__delete_everything` denied by policy."""
    path = tmp_path / "toolweave.toml"
    path.write_text(
        f'[[backends]]\nname = "t"\ncommand = {json.dumps(sys.executable)}\n'
        f"args = [{json.dumps(str(TESTSERVER))}]\n"
        '[policy]\ndeny = ["t__delete_everything"]\n[[policy.rules]]\ntenant = "acme"\ndeny = ["t__echo"]\n'
    )
    async with Gateway.from_config(path) as gateway:
        yield gateway
