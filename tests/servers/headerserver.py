"""A streamable HTTP MCP server that reports which credentials reached it (for connection tests).

It never echoes a header value: `whoami` returns a short SHA-256 of the
`X-Token` header, so a test can tell tenants apart without the secret
showing up in a result, a run record or a log.
"""

from __future__ import annotations

import argparse
import hashlib
from typing import Annotated, Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations
from pydantic import Field

server = MCPServer("headerserver")


def fingerprint(value: str | None) -> str | None:
    return hashlib.sha256(value.encode()).hexdigest()[:12] if value else None


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def whoami(ctx: Context, topic: Annotated[str, Field(description="Anything")] = "") -> dict[str, Any]:
    """Report which token the request carried (as a fingerprint)."""
    headers = ctx.headers or {}
    token = next((v for k, v in headers.items() if k.lower() == "x-token"), None)
    return {"token": fingerprint(token), "topic": topic}


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def whoami_slowly(ctx: Context, seconds: float = 1.0) -> dict[str, Any]:
    """Like whoami, after a pause: a call that is still in flight when its session is replaced."""
    await anyio.sleep(seconds)
    return whoami(ctx)


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def trace_context(ctx: Context) -> dict[str, Any]:
    """The W3C trace context the call carried: in its `_meta`, and in the HTTP request's headers."""
    headers = {k.lower(): v for k, v in (ctx.headers or {}).items()}
    meta = ctx.request_context.meta or {}
    return {
        "meta": {k: meta[k] for k in ("traceparent", "tracestate") if k in meta},
        "headers": {k: headers[k] for k in ("traceparent", "tracestate") if k in headers},
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, required=True)
    args = parser.parse_args()
    import uvicorn

    uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=args.http, log_level="warning")


if __name__ == "__main__":
    main()
