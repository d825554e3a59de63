"""`GET /servers`, `GET /servers/{name}`, `GET /servers/{name}/tools` and `GET /servers/{name}/export`:
the virtual servers this caller may use, what each lists, and its tools in an agent framework's format.

A server another tenant defined, or one whose `access` does not admit the caller, is a 404 here
(its MCP endpoint answers 403 with the Bearer challenge, as an MCP client expects)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Query
from pydantic import BaseModel, Field

from toolweave.executor import Session
from toolweave.export import export_tools
from toolweave.server.api.composites import Format
from toolweave.server.api.deps import READ, require, runtime
from toolweave.server.api.errors import ApiError
from toolweave.server.api.models import ExportList, Problem, ToolList
from toolweave.servers import VirtualServer
from toolweave.services.runtime import ServerRuntime

router = APIRouter(tags=["servers"])
NamePath = Annotated[str, Path(description="The virtual server's name")]


class ServerTool(BaseModel):
    name: str = Field(description="The name this server lists it under")
    catalogName: str = Field(description="Its name on /mcp (differs for an alias)")
    description: str = ""


class ServerOut(BaseModel):
    name: str
    title: str | None = None
    description: str | None = None
    url: str = Field(description="Its MCP endpoint, relative to the gateway: /servers/{name}/mcp")
    source: Literal["file", "api"] = "file"
    toolExposure: Literal["all", "search"]
    tools: list[ServerTool] = Field(
        description="What it serves this caller (search mode: what find_tools finds)"
    )
    resources: int = 0
    prompts: int = 0
    access: dict[str, Any] = Field(description="Who may use it: tenants, scopes, claims (all empty: anyone)")
    definition: dict[str, Any] = Field(description="The `[[servers]]` entry")
    problems: list[Problem] = Field(
        default_factory=list, description="What in its definition selects or names nothing right now"
    )


class ServerList(BaseModel):
    servers: list[ServerOut]


def server_out(server: VirtualServer, tenant: str | None) -> ServerOut:
    view = server.catalog
    config = server.config
    tools = [
        ServerTool(
            name=entry.name,
            catalogName=server.served.get(entry.name, entry.name),
            description=entry.tool.description or "",
        )
        for entry in view.listed_for(tenant)
    ]
    return ServerOut(
        name=server.name,
        title=config.title,
        description=config.description,
        url=f"/servers/{server.name}/mcp",
        source="api" if server.owner is not None else "file",
        toolExposure="search" if server.search else "all",
        tools=tools,
        resources=len(server.resources()),
        prompts=len(server.prompts()),
        access=config.access.model_dump(),
        definition=config.model_dump(mode="json", exclude_defaults=True),
        problems=[Problem(path=p.path, message=p.message) for p in server.problems()],
    )


def usable(rt: ServerRuntime, name: str, caller: Session) -> VirtualServer:
    """The server `name` if this caller may use it, else a 404 naming the ones it may."""
    server = rt.gateway.servers.get(name)
    if server is None or not server.visible_to(caller):
        known = sorted(s.name for s in rt.gateway.servers.visible_to(caller))
        raise ApiError(404, "not_found", f"no virtual server {name!r} (yours: {', '.join(known) or 'none'})")
    return server


@router.get("/servers", response_model=ServerList, summary="The virtual servers this caller may use")
async def list_servers(
    caller: Session = Depends(require(READ)), rt: ServerRuntime = Depends(runtime)
) -> ServerList:
    """Each with its MCP URL, what it serves this caller, and what in its definition matches nothing."""
    return ServerList(servers=[server_out(s, caller.tenant) for s in rt.gateway.servers.visible_to(caller)])


@router.get("/servers/{name}", response_model=ServerOut, summary="One virtual server")
async def get_server(
    name: NamePath, caller: Session = Depends(require(READ)), rt: ServerRuntime = Depends(runtime)
) -> ServerOut:
    return server_out(usable(rt, name, caller), caller.tenant)


@router.get("/servers/{name}/tools", response_model=ToolList, summary="What the server's MCP clients list")
async def server_tools(
    name: NamePath, caller: Session = Depends(require(READ)), rt: ServerRuntime = Depends(runtime)
) -> ToolList:
    """Exactly what `tools/list` on `/servers/{name}/mcp` answers this caller."""
    listed = usable(rt, name, caller).list_tools(caller.tenant)
    return ToolList(tools=[tool.model_dump(by_alias=True, mode="json", exclude_none=True) for tool in listed])


@router.get("/servers/{name}/export", response_model=ExportList, summary="The server's tools in a format")
async def export_server(
    name: NamePath,
    format: Annotated[
        Format, Query(description="mcp, openai, openai-responses, anthropic, langchain or universal")
    ] = "mcp",
    caller: Session = Depends(require(READ)),
    rt: ServerRuntime = Depends(runtime),
) -> ExportList:
    """Every tool the server serves this caller (in search mode too: the tools behind `find_tools`),
    under the names and descriptions it gives them. `toolweave export --server NAME` prints this."""
    server = usable(rt, name, caller)
    tools = [entry.tool for entry in server.catalog.listed_for(caller.tenant)]
    return ExportList(format=format, tools=export_tools(tools, format))
