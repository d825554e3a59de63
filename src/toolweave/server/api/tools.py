"""`GET /tools` (what MCP clients list), `GET /export` (those in an agent framework's format),
`GET /ai-tools` (every tool with type badges and `usedIn`) and `POST /tools/{name}/call`."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Body, Depends, Path, Query

from toolweave.executor import Session
from toolweave.results import joined_text
from toolweave.server.api import present
from toolweave.server.api.composites import Format
from toolweave.server.api.deps import CALL, READ, definitions, require, runtime
from toolweave.server.api.errors import ApiError, refuse_if_rate_limited
from toolweave.server.api.models import AiToolList, CallResult, ExportList, ToolList
from toolweave.services.definitions import DefinitionService
from toolweave.services.runtime import ServerRuntime

router = APIRouter(tags=["tools"])


@router.get("/tools", response_model=ToolList, summary="The tools MCP clients list")
async def list_tools(
    caller: Session = Depends(require(READ)), rt: ServerRuntime = Depends(runtime)
) -> ToolList:
    """Exactly what `tools/list` answers this caller (search mode: `find_tools`, `call_tool` and the
    pinned tools), each tool as MCP sends it. `toolweave tools` prints this list. Right after start
    it waits, as `tools/list` does, for backends still on their first connection attempt."""
    await rt.gateway.wait_for_first_connections()
    listed = rt.gateway.list_tools(caller.tenant)
    return ToolList(tools=[tool.model_dump(by_alias=True, mode="json", exclude_none=True) for tool in listed])


@router.get("/export", response_model=ExportList, summary="The tools in an agent framework's format")
async def export_tools(
    format: Annotated[
        Format, Query(description="mcp, openai, openai-responses, anthropic, langchain or universal")
    ] = "mcp",
    name: Annotated[
        list[str] | None, Query(description="Only these tools (exposed names); default: every tool")
    ] = None,
    caller: Session = Depends(require(READ)),
    rt: ServerRuntime = Depends(runtime),
) -> ExportList:
    """Composites with their mini-prompt descriptions; always a list, in listing order. An unknown
    name is a 404 naming it. `toolweave export` prints this list."""
    gateway = rt.gateway
    await gateway.wait_for_first_connections()
    listed = [entry.name for entry in gateway.catalog.listed_for(caller.tenant)]
    unknown = [wanted for wanted in name or () if wanted not in listed]
    if unknown:
        raise ApiError(404, "unknown_tool", f"no tool {unknown[0]!r} (see GET /api/v1/tools)")
    return ExportList(format=format, tools=gateway.export(format, name or listed))


@router.get("/ai-tools", response_model=AiToolList, summary="Every tool: backend tools and composites")
async def list_ai_tools(
    type: Annotated[Literal["simple", "composite"] | None, Query(description="Only this type")] = None,
    caller: Session = Depends(require(READ)),
    rt: ServerRuntime = Depends(runtime),
    service: DefinitionService = Depends(definitions),
) -> AiToolList:
    """Backend tools are `simple` (with `usedIn`: the composites calling them); fan-outs, routers and
    workflows are `composite`. API-defined composites that are not served (draft, disabled,
    degraded) are listed too, with their status."""
    gateway = rt.gateway
    await gateway.wait_for_first_connections()
    rows = {row.name: row for row in await service.repo.list(caller.tenant)}
    tools = []
    for entry in gateway.catalog.listed_for(caller.tenant):
        if type is not None and (entry.composite is not None) != (type == "composite"):
            continue
        stored = rows.pop(entry.name, None) if entry.composite is not None else None
        if stored is not None and entry.owner != stored.tenant:
            stored = None
        tools.append(present.ai_tool(gateway, entry, caller, stored))
    if type in (None, "composite"):
        listed = {tool.name for tool in tools}
        tools.extend(present.unserved_ai_tool(row) for row in rows.values() if row.name not in listed)
    return AiToolList(tools=tools)


@router.post("/tools/{name}/call", response_model=CallResult, summary="Call any tool by its exposed name")
async def call_tool(
    name: Annotated[str, Path(max_length=500)],
    arguments: Annotated[dict[str, Any] | None, Body(description="The tool's arguments")] = None,
    caller: Session = Depends(require(CALL)),
    rt: ServerRuntime = Depends(runtime),
) -> CallResult:
    """The result is the MCP `CallToolResult` (camelCase). A tool failure is a 200 with `isError: true`;
    an unknown tool is a 404."""
    gateway = rt.gateway
    result = await gateway.executor(caller).call(name, arguments if arguments is not None else {})
    refuse_if_rate_limited(result)
    catalog = gateway.catalog  # after the call: it may have waited for a backend still starting
    entry = catalog.get(name)
    if not catalog.is_search_tool(name) and (entry is None or not entry.listed_to(caller.tenant)):
        raise ApiError(404, "unknown_tool", joined_text(result))
    return present.call_result(result)
