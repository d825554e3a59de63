"""A stdio MCP server that serves dumped tools (`catalog/*.json`) again, for benches and tests.

`python -m bench.search.replay [--limit N] DUMP.json...`: every tool of the dumps, named
`<server>__<tool>` so tools of different servers never collide, up to N of them. A call answers
with one text item naming the tool and echoing its arguments. Newline-delimited JSON-RPC, no SDK:
it must cost next to nothing, so a bench through the gateway measures the gateway.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

PROTOCOL = "2025-06-18"


def load_tools(paths: list[Path], limit: int | None) -> list[dict]:
    tools = []
    for path in paths:
        dump = json.loads(path.read_text())
        tools += [{**tool, "name": f"{dump['server']}__{tool['name']}"} for tool in dump["tools"]]
    return tools[:limit] if limit else tools


def answer(message: dict, tools: list[dict], names: set[str]) -> dict | None:
    method, ident, params = message.get("method"), message.get("id"), message.get("params") or {}
    if ident is None:
        return None  # a notification
    if method == "initialize":
        version = params.get("protocolVersion", PROTOCOL)
        result: dict = {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": "replay", "version": "1"},
        }
    elif method == "tools/list":
        result = {"tools": tools}
    elif method == "tools/call":
        name = params.get("name")
        if name not in names:
            return {
                "jsonrpc": "2.0",
                "id": ident,
                "error": {"code": -32602, "message": f"unknown tool {name}"},
            }
        text = f"replayed {name} {json.dumps(params.get('arguments') or {})}"
        result = {"content": [{"type": "text", "text": text}]}
    elif method == "ping":
        result = {}
    else:
        return {"jsonrpc": "2.0", "id": ident, "error": {"code": -32601, "message": f"no method {method}"}}
    return {"jsonrpc": "2.0", "id": ident, "result": result}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("dumps", nargs="+", type=Path)
    parser.add_argument("--limit", type=int, default=None)
    args = parser.parse_args()
    tools = load_tools(args.dumps, args.limit)
    names = {tool["name"] for tool in tools}
    for line in sys.stdin:
        if not line.strip():
            continue
        reply = answer(json.loads(line), tools, names)
        if reply is not None:
            sys.stdout.write(json.dumps(reply) + "\n")
            sys.stdout.flush()


if __name__ == "__main__":
    main()
