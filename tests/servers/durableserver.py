"""An MCP server for the durable-run tests, run as its own process so it outlives a killed gateway.

Every call of `write` and `put` is logged when it STARTS (before it waits),
so a test can count how often a step's tool was really called, across
gateway crashes and resumes. With `wait: true` a call blocks until the test
opens the gate of its label: a step stays in flight exactly as long as the
test wants, without timing.

    python durableserver.py --http PORT
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Annotated, Any

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations
from pydantic import Field

server = MCPServer("durable")
_log: list[dict[str, Any]] = []
_gates: dict[str, asyncio.Event] = {}

Secret = Annotated[str | None, Field(json_schema_extra={"format": "password", "writeOnly": True})]


def _gate(label: str) -> asyncio.Event:
    return _gates.setdefault(label, asyncio.Event())


async def _call(tool: str, label: str, wait: bool, token: str | None) -> dict[str, Any]:
    _log.append({"tool": tool, "label": label, "token_length": len(token) if token is not None else None})
    if wait:
        await _gate(label).wait()
    return {"tool": tool, "label": label, "calls": sum(1 for entry in _log if entry["label"] == label)}


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=False))
async def write(label: str, wait: bool = False, token: Secret = None) -> dict[str, Any]:
    """A write that is NOT idempotent; with `wait`, it blocks until the gate of `label` opens."""
    return await _call("write", label, wait, token)


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True))
async def put(label: str, wait: bool = False) -> dict[str, Any]:
    """An idempotent write; with `wait`, it blocks until the gate of `label` opens."""
    return await _call("put", label, wait, None)


@server.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False, idempotent_hint=True))
def open_gate(label: str) -> str:
    """Let the calls waiting on `label` (and later ones) finish."""
    _gate(label).set()
    return f"opened {label}"


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def calls(label: str) -> dict[str, Any]:
    """The calls made with `label`, in the order they started."""
    return {"calls": [entry for entry in _log if entry["label"] == label]}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, required=True, help="serve streamable HTTP on this port")
    args = parser.parse_args()
    import uvicorn

    uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=args.http, log_level="warning")


if __name__ == "__main__":
    main()
