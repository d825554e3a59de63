"""The benchmark's backend MCP server: cheap, deterministic tools over streamable HTTP or stdio.

Tools: `echo` (small result), `big` (a 100 KB text result), `sleep50` (waits 50 ms),
`noop` (empty result) and, with `--extra-tools N`, N dummy tools `dummy_000`...
for the tools/list scenario.

Run as a script so that it needs nothing but the `mcp` SDK:

    python bench/backend_server.py --port 9001            # http://127.0.0.1:9001/mcp
    python bench/backend_server.py --stdio                # stdio MCP server

The harness waits for the port to accept connections.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp_types import ToolAnnotations

BIG_RESULT_BYTES = 100 * 1024
_BIG_TEXT = ("0123456789abcdef" * (BIG_RESULT_BYTES // 16 + 1))[:BIG_RESULT_BYTES]


# Read-only tools: the gateway's admission control puts them in the concurrent read pool.
_READ_ONLY = ToolAnnotations(readOnlyHint=True)


def _register_core_tools(server: MCPServer) -> None:
    @server.tool(description="Return the given text.", annotations=_READ_ONLY, structured_output=False)
    async def echo(text: str = "hi") -> str:
        return text

    @server.tool(description="Return a 100 KB text result.", annotations=_READ_ONLY, structured_output=False)
    async def big() -> str:
        return _BIG_TEXT

    @server.tool(
        description="Wait 50 ms, then return 'slept'.", annotations=_READ_ONLY, structured_output=False
    )
    async def sleep50() -> str:
        await asyncio.sleep(0.05)
        return "slept"

    @server.tool(description="Do nothing.", annotations=_READ_ONLY, structured_output=False)
    async def noop() -> str:
        return ""


def _dummy_tool(index: int) -> Callable[..., Awaitable[str]]:
    async def dummy(query: str = "", limit: int = 10) -> str:
        return f"dummy {index}: {query[:limit]}"

    return dummy


def build_server(extra_tools: int = 0, name: str = "bench-backend") -> MCPServer:
    """An MCPServer with the core tools and `extra_tools` dummy tools."""
    server = MCPServer(name, log_level="WARNING")
    _register_core_tools(server)
    for index in range(extra_tools):
        server.add_tool(
            _dummy_tool(index),
            name=f"dummy_{index:03d}",
            description=f"Dummy tool number {index} for the tools/list benchmark. Searches nothing.",
            annotations=_READ_ONLY,
            structured_output=False,
        )
    return server


def _http_app(server: MCPServer, args: argparse.Namespace) -> Any:
    return server.streamable_http_app(json_response=args.json_response, stateless_http=args.stateless)


async def _serve_http(server: MCPServer, args: argparse.Namespace) -> None:
    import uvicorn

    config = uvicorn.Config(
        _http_app(server, args),
        host=args.host,
        port=args.port,
        log_level="warning",
        access_log=False,
        lifespan="on",
    )
    await uvicorn.Server(config).serve()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stdio", action="store_true", help="serve MCP over stdin/stdout")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=9001)
    parser.add_argument("--extra-tools", type=int, default=0, help="register N dummy tools")
    parser.add_argument("--json-response", action="store_true", help="answer POSTs with JSON, not SSE")
    parser.add_argument("--stateless", action="store_true", help="stateless streamable HTTP")
    parser.add_argument("--name", default="bench-backend")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        sys.exit("the bench backend only binds loopback addresses")
    server = build_server(args.extra_tools, args.name)
    if args.stdio:
        server.run("stdio")
    else:
        asyncio.run(_serve_http(server, args))


if __name__ == "__main__":
    main()
