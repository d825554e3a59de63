"""An MCP server whose tools need the client mid-call: stdio by default, streamable HTTP with `--http PORT`.

`ask_model` asks for sampling (`ask_model_patiently` with a progress token), `ask_user` for an elicitation, `list_roots` for the client's roots,
`ask_all` asks all three the way that works on both revisions (`Resolve`: standalone requests on
2025-11-25, an `InputRequiredResult` on 2026-07-28), `chatty` logs at two levels, `log_later` after its call, `hang` answers only a cancellation; the `greet` prompt completes its `name` argument.
"""

from __future__ import annotations

import argparse
import asyncio
from typing import Annotated

import mcp_types as types
from mcp.server.mcpserver import Context, Elicit, ListRoots, MCPServer, Resolve, Sample
from mcp.shared.message import ServerMessageMetadata
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
async def ask_model_patiently(question: str, ctx: Context) -> str:
    """Ask the client's model with a progress token; report the progress the client sent on it."""
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text=question))
    request = types.CreateMessageRequest(
        params=types.CreateMessageRequestParams(messages=[message], max_tokens=50)
    )
    answer = await ctx.session.send_request(
        request,
        types.CreateMessageResult,
        metadata=ServerMessageMetadata(related_request_id=ctx.request_id),
        progress_callback=on_progress,
    )
    return f"model said: {answer.content.text}; progress: {seen}"  # type: ignore[union-attr]


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


def _model(question: str) -> Sample:
    message = types.SamplingMessage(role="user", content=types.TextContent(type="text", text=question))
    return Sample([message], max_tokens=50)


def _user() -> Elicit[Name]:
    return Elicit("What is your name?", Name)


def _roots() -> ListRoots:
    return ListRoots()


@server.tool()
async def ask_all(
    question: str,
    model: Annotated[types.CreateMessageResult, Resolve(_model)],
    user: Annotated[Name, Resolve(_user)],
    roots: Annotated[types.ListRootsResult, Resolve(_roots)],
) -> str:
    """Ask the model, the user and the client's roots, on either revision."""
    said = model.content.text  # type: ignore[union-attr]
    return f"model said: {said}; name: {user.name}; roots: {', '.join(str(r.uri) for r in roots.roots)}"


@server.tool()
async def ask_name(user: Annotated[Name, Resolve(_user)]) -> str:
    """Ask the user only, on either revision (an elicitation a page can answer)."""
    return f"hello, {user.name}"


@server.tool()
async def chatty(ctx: Context) -> str:
    """Log once at debug and once at warning, then answer."""
    await ctx.log("debug", "a debug detail")
    await ctx.log("warning", {"disk": "almost full"}, logger_name="storage")
    return "logged"


STOPPED: set[str] = set()
"""The `tag`s of `hang` calls the client cancelled."""
_LATER: set[asyncio.Task[None]] = set()


@server.tool()
async def hang(tag: str = "") -> str:
    """Never answers: a call that stays in flight until it is cancelled (then `stopped(tag)` says so)."""
    try:
        await asyncio.Event().wait()
    except asyncio.CancelledError:
        STOPPED.add(tag)
        raise
    return "unreachable"


@server.tool()
def stopped(tag: str) -> bool:
    """Whether the `hang` call of `tag` was cancelled."""
    return tag in STOPPED


@server.tool()
async def log_later(ctx: Context) -> str:
    """Answer at once, then log at debug and at warning outside any call (on the session, no request)."""
    session = ctx.session

    async def later() -> None:
        await asyncio.sleep(0.1)
        await session.send_log_message("debug", "a detail, later")
        await session.send_log_message("warning", "after the call", logger="later")

    task = asyncio.get_running_loop().create_task(later())
    _LATER.add(task)
    task.add_done_callback(_LATER.discard)
    return "scheduled"


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
