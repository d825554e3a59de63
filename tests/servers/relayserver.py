"""An MCP server whose tools need the client mid-call: stdio by default, streamable HTTP with `--http PORT`.

`ask_model` asks for sampling, `ask_user` for an elicitation, `list_roots` for the client's roots,
`chatty` logs at two levels, `hang` never answers; the `greet` prompt completes its `name` argument.
"""

from __future__ import annotations

import argparse
import asyncio

import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel

server = MCPServer("relayserver")


class Name(BaseModel):
    name: str


@server.tool()
async def ask_model(question: str, ctx: Context) -> str:
    """Ask the client's model (sampling/createMessage)."""
    answer = await ctx.session.create_message(
        [types.SamplingMessage(role="user", content=types.TextContent(type="text", text=question))],
        max_tokens=50,
        related_request_id=ctx.request_id,
    )
    return f"model said: {answer.content.text}"  # type: ignore[union-attr]


@server.tool()
async def ask_user(ctx: Context) -> str:
    """Ask the user (elicitation/create)."""
    answer = await ctx.elicit("What is your name?", Name)
    return f"{answer.action}: {answer.data.name if answer.action == 'accept' else '-'}"  # type: ignore[union-attr]


@server.tool()
async def list_roots(ctx: Context) -> str:
    """The client's roots (roots/list)."""
    roots = await ctx.session.list_roots()
    return ", ".join(str(root.uri) for root in roots.roots)


@server.tool()
async def chatty(ctx: Context) -> str:
    """Log once at debug and once at warning, then answer."""
    await ctx.log("debug", "a debug detail")
    await ctx.log("warning", {"disk": "almost full"}, logger_name="storage")
    return "logged"


@server.tool()
async def hang() -> str:
    """Never answers (until the caller gives up): a call that stays in flight."""
    await asyncio.Event().wait()
    return "unreachable"


@server.prompt(description="Greet someone")
def greet(name: str) -> str:
    return f"Say hello to {name}."


@server.completion()
async def complete(ref: types.PromptReference | types.ResourceTemplateReference, argument, context):  # type: ignore[no-untyped-def]
    if isinstance(ref, types.PromptReference) and ref.name == "greet" and argument.name == "name":
        names = ["Ada", "Alan", "Grace"]
        return types.Completion(values=[n for n in names if n.startswith(argument.value)])
    return None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, default=None, help="serve streamable HTTP on this port")
    args = parser.parse_args()
    if args.http is None:
        server.run("stdio")
    else:
        import uvicorn

        uvicorn.run(server.streamable_http_app(), host="127.0.0.1", port=args.http, log_level="warning")


if __name__ == "__main__":
    main()
