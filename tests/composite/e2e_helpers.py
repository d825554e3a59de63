"""Helpers for the composite end-to-end tests: TOML configs with real stdio backends, the MCP front over HTTP.

Each e2e module starts ONE gateway (three stdio testserver processes) for all
of its tests (module-scoped fixtures on a module-scoped event loop), so every
test is a handful of real MCP round trips, not a process start-up.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import mcp_types as types
import uvicorn

from toolweave import Gateway
from toolweave.server import create_app
from tw_testing import PYTHON, TESTSERVER, free_port


def toml_value(value: Any) -> str:
    """A TOML literal for a JSON-like value (strings via JSON escapes, which TOML accepts)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list):
        return "[" + ", ".join(toml_value(item) for item in value) + "]"
    if isinstance(value, dict):
        return (
            "{ " + ", ".join(f"{json.dumps(key)} = {toml_value(item)}" for key, item in value.items()) + " }"
        )
    raise TypeError(f"no TOML form for {value!r}")


def stdio_testserver(name: str, **extra: Any) -> str:
    """A `[[backends]]` table running tests/servers/testserver.py over stdio as `name`."""
    lines = [
        "[[backends]]",
        f"name = {toml_value(name)}",
        f"command = {toml_value(PYTHON)}",
        f"args = {toml_value([str(TESTSERVER)])}",
        f"env = {toml_value({'TESTSERVER_NAME': name})}",
        *(f"{key} = {toml_value(value)}" for key, value in extra.items()),
    ]
    return "\n".join(lines) + "\n"


def write_toml(directory: Path, text: str, name: str = "toolweave.toml") -> Path:
    path = directory / name
    path.write_text(text)
    return path


def texts(result: types.CallToolResult) -> list[str]:
    return [item.text for item in result.content if isinstance(item, types.TextContent)]


def meta(result: types.CallToolResult) -> dict[str, Any]:
    return dict((result.meta or {}).get("toolweave") or {})


async def inner_records(gateway: Gateway, tool: str, status: str | None = None) -> list[Any]:
    """Run records of direct calls to `tool` (the configs set `record_direct_calls`)."""
    return await gateway.runs.list_runs(tool=tool, status=status, limit=1000)


@contextlib.asynccontextmanager
async def serve_http(gateway: Gateway) -> AsyncIterator[str]:
    """The MCP front of an already started gateway under uvicorn on loopback; yields the /mcp URL."""
    app = create_app(gateway, start_gateway=False)
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", lifespan="on")
    )
    server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign]  # pytest owns signals
    task = asyncio.create_task(server.serve())
    try:
        async with asyncio.timeout(15):
            while not server.started:
                if task.done():
                    task.result()
                    raise RuntimeError("uvicorn stopped before it started")
                await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        with contextlib.suppress(Exception):
            await asyncio.wait_for(task, 10)
