"""The gateway's tools as LangChain tools (extra `langchain`).

    async with Gateway.from_config("toolweave.toml") as gw:
        tools = as_langchain_tools(gw)
        agent = create_agent(model, tools)

Each tool is a `StructuredTool` whose name, description and JSON-Schema
`args_schema` come from the `langchain` export format (provider-safe names,
mini-prompt descriptions), and which calls back through `gateway.call` — so
policy, validation, admission and run records apply exactly as for an MCP
client. The arguments are handed to the gateway untouched: the gateway
validates them against the tool's schema and answers a bad call with an error
the agent can read.

Results: the text blocks of the result joined by newlines (the structured
content as JSON when there is no text). An `isError` result raises
`ToolException`; the tools are built with `handle_tool_error=True`, so an
agent receives the error text as the tool's output and can correct itself
instead of the run aborting.

Sync and async: `coroutine` is the real implementation. The sync `func`
runs it on the gateway's event loop when that loop is running in another
thread (an agent running tools in a worker thread), and with `asyncio.run`
when no loop is running at all. Called synchronously on the very thread
whose loop is running, it raises `RuntimeError` — blocking there would stall
the loop the gateway's backends live on; use `ainvoke`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import mcp_types as types

from toolweave.export.formats import export_tools

try:
    from langchain_core.tools import StructuredTool, ToolException
except ImportError as exc:
    raise ImportError(
        "toolweave.integrations.langchain needs langchain-core: pip install 'toolweave[langchain]'"
    ) from exc

if TYPE_CHECKING:
    from toolweave.gateway import Gateway

INSTALL_HINT = "pip install 'toolweave[langchain]'"


class GatewayTool(StructuredTool):
    """A `StructuredTool` that passes the model's arguments to its functions untouched.

    `StructuredTool._run` / `_arun` reserve the keyword arguments `config` and
    `run_manager`, so a gateway tool with a parameter of either name could not
    be called through them; these overrides take only the tool's arguments.
    """

    def _run(self, *args: Any, **kwargs: Any) -> Any:
        if self.func is None:
            raise NotImplementedError(f"tool {self.name!r} has no sync function")
        return self.func(*args, **kwargs)

    async def _arun(self, *args: Any, **kwargs: Any) -> Any:
        if self.coroutine is None:
            raise NotImplementedError(f"tool {self.name!r} has no coroutine")
        return await self.coroutine(*args, **kwargs)


def as_langchain_tools(gateway: Gateway, names: Sequence[str] | None = None) -> list[StructuredTool]:
    """LangChain tools for what the gateway lists (or for `names`), calling through `gateway`.

    Call it inside the running gateway (`async with Gateway...`) so sync calls
    from worker threads can reach the gateway's loop. Raises ValueError for
    unknown names and for names that collide once made provider-safe.
    """
    tools = _selected_tools(gateway, names)
    entries = export_tools(tools, "langchain")
    loop = _LoopRef(_running_loop())
    return [
        _langchain_tool(_GatewayCall(gateway, tool.name, loop), entry)
        for tool, entry in zip(tools, entries, strict=True)
    ]


def result_text(name: str, result: types.CallToolResult) -> str:
    """What the agent reads: the text blocks joined, or the structured content; errors raise."""
    text = "\n".join(item.text for item in result.content if isinstance(item, types.TextContent))
    if result.is_error:
        raise ToolException(text or f"tool {name!r} failed")
    if text or result.structured_content is None:
        return text
    return json.dumps(result.structured_content, ensure_ascii=False)


def _selected_tools(gateway: Gateway, names: Sequence[str] | None) -> list[types.Tool]:
    listed = gateway.list_tools()
    if names is None:
        return listed
    by_name = {tool.name: tool for tool in listed}
    chosen: list[types.Tool] = []
    unknown: list[str] = []
    for name in names:
        tool = by_name.get(name) or _catalog_tool(gateway, name)
        if tool is None:
            unknown.append(name)
        else:
            chosen.append(tool)
    if unknown:
        raise ValueError(f"unknown tool(s) {unknown}; see gateway.list_tools() for what can be called")
    return chosen


def _catalog_tool(gateway: Gateway, name: str) -> types.Tool | None:
    """A callable tool not in the listing (search mode lists only find_tools / call_tool)."""
    entry = gateway.catalog.get(name)
    return None if entry is None or entry.hidden else entry.tool


def _langchain_tool(call: _GatewayCall, entry: dict[str, Any]) -> StructuredTool:
    return GatewayTool(
        name=entry["name"],
        description=entry["description"],
        args_schema=entry["args_schema"],
        func=call.sync,
        coroutine=call.run,
        handle_tool_error=True,
        metadata={"toolweave_tool": call.name},
    )


@dataclass(slots=True)
class _LoopRef:
    """The event loop the gateway runs on, as last seen (shared by one batch of tools)."""

    loop: asyncio.AbstractEventLoop | None


@dataclass(frozen=True, slots=True)
class _GatewayCall:
    gateway: Gateway
    name: str
    """The gateway's name for the tool (the LangChain name may be the provider-safe form)."""
    loop: _LoopRef

    async def run(self, **arguments: Any) -> str:
        if not _is_live(self.loop.loop):
            self.loop.loop = asyncio.get_running_loop()
        result = await self.gateway.call(self.name, arguments)
        return result_text(self.name, result)

    def sync(self, **arguments: Any) -> str:
        return _run_blocking(lambda: self.run(**arguments), self.loop.loop)


def _run_blocking(
    start: Callable[[], Coroutine[Any, Any, str]], loop: asyncio.AbstractEventLoop | None
) -> str:
    """Run a gateway call to completion from synchronous code (see the module docstring)."""
    current = _running_loop()
    if loop is not None and _is_live(loop) and loop is not current:
        return asyncio.run_coroutine_threadsafe(start(), loop).result()
    if current is not None:
        raise RuntimeError(
            "a toolweave LangChain tool was invoked synchronously on the thread running the "
            "gateway's event loop; use `await tool.ainvoke(...)` instead"
        )
    return asyncio.run(start())


def _running_loop() -> asyncio.AbstractEventLoop | None:
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


def _is_live(loop: asyncio.AbstractEventLoop | None) -> bool:
    return loop is not None and loop.is_running() and not loop.is_closed()


def _accepts_json_schema() -> bool:
    """Whether this langchain-core takes a JSON Schema dict as `args_schema` (newer releases do)."""
    try:
        StructuredTool(name="probe", description="", args_schema={"type": "object", "properties": {}})
    except (TypeError, ValueError):
        return False
    return True


if not _accepts_json_schema():
    raise ImportError(
        "this langchain-core release does not accept a JSON Schema as a tool's args_schema; "
        f"upgrade it: pip install -U langchain-core (or {INSTALL_HINT})"
    )
