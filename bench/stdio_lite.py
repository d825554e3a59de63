"""A minimal stdio MCP server in the standard library only (tools `echo` and `noop`).

Scenario G starts 20 stdio backends and measures the gateway's memory, not the
backends: this server starts in ~30 ms instead of ~0.6 s of CPU for an SDK server,
which keeps `--quick` under a minute. It speaks the 2025-11-25 handshake (it answers
`server/discover` with "method not found", so SDK clients fall back to `initialize`).
`python bench/backend_server.py --stdio` is the full SDK equivalent.
"""

from __future__ import annotations

import json
import sys
from typing import Any

PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
_READ_ONLY = {"readOnlyHint": True}
TOOLS = [
    {
        "name": "echo",
        "description": "Return the given text.",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}},
        "annotations": _READ_ONLY,
    },
    {
        "name": "noop",
        "description": "Do nothing.",
        "inputSchema": {"type": "object"},
        "annotations": _READ_ONLY,
    },
]


def _text(text: str) -> dict[str, Any]:
    return {"content": [{"type": "text", "text": text}], "isError": False}


def _initialize(params: dict[str, Any]) -> dict[str, Any]:
    requested = params.get("protocolVersion")
    return {
        "protocolVersion": requested if requested in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[0],
        "capabilities": {"tools": {"listChanged": False}},
        "serverInfo": {"name": "bench-stdio-lite", "version": "0"},
    }


def _call(params: dict[str, Any]) -> dict[str, Any]:
    name, arguments = params.get("name"), params.get("arguments") or {}
    if name == "echo":
        return _text(str(arguments.get("text", "hi")))
    if name == "noop":
        return _text("")
    return {"content": [{"type": "text", "text": f"unknown tool {name!r}"}], "isError": True}


def answer(message: dict[str, Any]) -> dict[str, Any] | None:
    """The response to one JSON-RPC message (None for notifications)."""
    if "id" not in message:
        return None
    method, params = message.get("method"), message.get("params") or {}
    handlers = {
        "initialize": lambda: _initialize(params),
        "ping": dict,
        "tools/list": lambda: {"tools": TOOLS},
        "tools/call": lambda: _call(params),
    }
    handler = handlers.get(str(method))
    if handler is None:
        error = {"code": -32601, "message": "Method not found", "data": method}
        return {"jsonrpc": "2.0", "id": message["id"], "error": error}
    return {"jsonrpc": "2.0", "id": message["id"], "result": handler()}


def main() -> None:
    out = sys.stdout
    for line in sys.stdin:
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except ValueError:
            continue
        reply = answer(message) if isinstance(message, dict) else None
        if reply is not None:
            out.write(json.dumps(reply, separators=(",", ":")) + "\n")
            out.flush()


if __name__ == "__main__":
    main()
