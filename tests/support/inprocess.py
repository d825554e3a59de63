"""The test MCP server (tests/servers/testserver.py) in this process, for unit tests.

A stdio backend costs a Python child that imports the MCP SDK: 1–3 s per gateway on this 2-core
machine, which is most of an executor unit test. `in_process_testservers(monkeypatch)` makes every
backend whose config runs tests/servers/testserver.py connect instead to a fresh copy of that same
module loaded in this process (the SDK's `Client` takes a server object). The tools, their
annotations, the protocol negotiation and the per-process state (a fresh module per connection, as
a fresh child per connection) are the real ones; only the process boundary is gone.

What needs the boundary stays on real processes (integration tests): `crash` (it would end pytest)
and `garbage` (it writes to this process's stdout) answer an error saying so here, and
`TESTSERVER_START_DELAY` is honoured with an asyncio sleep, `TESTSERVER_START_GATE` by polling.
"""

from __future__ import annotations

import asyncio
import importlib.util
import itertools
import os
from types import ModuleType
from typing import Any
from unittest import mock

import pytest
from mcp.server.mcpserver.exceptions import ToolError

from support.paths import PYTHON, TESTSERVER
from toolweave import gateway as gateway_module
from toolweave.backends import create_backend
from toolweave.backends.mcp import MCPBackend
from toolweave.config.models import BackendConfig

_copies = itertools.count()


def load_testserver(name: str) -> ModuleType:
    """A fresh copy of tests/servers/testserver.py calling itself `name`: its own server and state."""
    spec = importlib.util.spec_from_file_location(f"_testserver_{next(_copies)}", TESTSERVER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    with mock.patch.dict(os.environ, {"TESTSERVER_NAME": name}):
        spec.loader.exec_module(module)
    _needs_a_process(module, "crash", "it exits the server's process")
    _needs_a_process(module, "garbage", "it writes to the server's stdout")
    return module


def _needs_a_process(module: ModuleType, tool: str, why: str) -> None:
    """Replace a tool that only makes sense in a child process by one that says so."""

    def refuse() -> str:
        raise ToolError(f"the in-process test server cannot run {tool!r} ({why}): use a stdio backend")

    module.server.remove_tool(tool)
    module.server.add_tool(refuse, name=tool, description=f"(needs a real process: {why})")


def runs_testserver(config: BackendConfig) -> bool:
    """Whether a backend config starts tests/servers/testserver.py over stdio."""
    return config.command == PYTHON and list(config.args) == [str(TESTSERVER)]


class InProcessTestServer(MCPBackend):
    """An MCP backend whose server is a fresh testserver module in this process (one per connection)."""

    async def _transport(self) -> Any:
        env = self.config.env or {}
        delay = float(env.get("TESTSERVER_START_DELAY", "0"))
        if delay:
            await asyncio.sleep(delay)
        gate = env.get("TESTSERVER_START_GATE")
        while gate and not os.path.exists(gate):  # noqa: ASYNC110, ASYNC240 - a stat; the test makes it
            await asyncio.sleep(0.02)
        module = load_testserver(env.get("TESTSERVER_NAME", "testserver"))
        return module.server  # the SDK's Client connects to a server object in-process


def in_process_testservers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Gateways made from now on run their testserver backends in-process (see the module doc)."""

    def create(config: BackendConfig, **options: Any) -> Any:
        if runs_testserver(config) and config.oauth is None:
            return InProcessTestServer(config)
        return create_backend(config, **options)

    monkeypatch.setattr(gateway_module, "create_backend", create)
