"""A hand-written stdio MCP server (handshake era) that answers with malformed results on purpose.

Tools: `ok` (a valid result), `bad_shape` (a result that is not a CallToolResult), `error_reply`
(a JSON-RPC error), `noise` (non-JSON bytes on stdout and no answer at all).
"""

from __future__ import annotations

import json
import sys

TOOLS = [
    {"name": name, "description": f"raw {name}", "inputSchema": {"type": "object"}}
    for name in ("ok", "bad_shape", "error_reply", "noise")
]


def send(message: dict) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def reply(request_id: object, result: dict) -> None:
    send({"jsonrpc": "2.0", "id": request_id, "result": result})


def error(request_id: object, code: int, message: str) -> None:
    send({"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}})


def main() -> None:
    for line in sys.stdin:
        try:
            message = json.loads(line)
        except ValueError:
            continue
        if "id" not in message or "method" not in message:
            continue  # notifications and responses
        request_id, method = message["id"], message["method"]
        params = message.get("params") or {}
        if method == "initialize":
            reply(
                request_id,
                {
                    "protocolVersion": params.get("protocolVersion", "2025-11-25"),
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "rawserver", "version": "0"},
                },
            )
        elif method == "tools/list":
            reply(request_id, {"tools": TOOLS})
        elif method == "ping":
            reply(request_id, {})
        elif method == "tools/call":
            name = params.get("name")
            if name == "ok":
                reply(request_id, {"content": [{"type": "text", "text": "fine"}]})
            elif name == "bad_shape":
                reply(request_id, {"content": "this should be a list", "isError": "maybe"})
            elif name == "error_reply":
                error(request_id, -32000, "the backend exploded")
            elif name == "noise":
                sys.stdout.write("\x00\x01 not json {{{\n")
                sys.stdout.flush()
            else:
                error(request_id, -32602, f"unknown tool {name}")
        else:
            error(request_id, -32601, f"method not found: {method}")


if __name__ == "__main__":
    main()
