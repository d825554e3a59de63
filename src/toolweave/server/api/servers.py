"""`/servers`: the virtual servers this caller may use, what each lists, its tools in an agent
framework's format; and servers defined through the API: `POST /servers`, `PATCH /servers/{name}`
(a JSON merge patch, `expectedVersion`), `DELETE /servers/{name}`, `GET /servers/{name}/versions`.

A server another tenant defined, or one whose `access` does not admit the caller, is a 404 here
(its MCP endpoint answers 403 with the Bearer challenge, as an MCP client expects). The config
file's servers are read-only here (409 `read_only`). Every change is validated before anything
is stored, with every problem named (`toolweave.services.servers`), and audited."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, Path, Query, Request, Response
from pydantic import BaseModel, Field

from toolweave.actor import Actor
from toolweave.executor import Session
from toolweave.export import export_tools
from toolweave.server.api.composites import Format
from toolweave.server.api.deps import ADMIN, READ, actor, require, runtime
from toolweave.server.api.errors import ApiError
from toolweave.server.api.models import ExportList, Problem, RequestBody, ToolList
from toolweave.servers import VirtualServer
from toolweave.services.runtime import ServerRuntime
from toolweave.services.servers import ServerService
from toolweave.store import NotFound

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
    readOnly: bool = Field(default=True, description="Defined in the config file: change it there")
    version: int | None = Field(default=None, description="An API-defined server's current version")
    tenant: str | None = Field(default=None, description="The tenant that defined it (null: shared)")


class ServerCreate(RequestBody):
    definition: dict[str, Any] = Field(
        description="A virtual server, as a `[[servers]]` entry of the config file"
    )
    note: str | None = Field(default=None, max_length=2000, description="Kept with this version")


class ServerUpdate(RequestBody):
    definition: dict[str, Any] = Field(
        description="A JSON merge patch (RFC 7396) applied to the current definition: objects merge, "
        "lists and values replace, null removes a key"
    )
    note: str | None = Field(default=None, max_length=2000)
    expectedVersion: int | None = Field(
        default=None, ge=1, description="Refuse (409) unless still at this version"
    )


class ServerVersionOut(BaseModel):
    version: int
    definition: dict[str, Any]
    note: str | None = None
    createdAt: datetime


class ServerVersionList(BaseModel):
    versions: list[ServerVersionOut]


class ServerList(BaseModel):
    servers: list[ServerOut]


def server_out(server: VirtualServer, tenant: str | None, version: int | None = None) -> ServerOut:
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
        source="api" if server.source == "api" else "file",
        toolExposure="search" if server.search else "all",
        tools=tools,
        resources=len(server.resources()),
        prompts=len(server.prompts()),
        access=config.access.model_dump(),
        definition=config.model_dump(mode="json", exclude_defaults=True),
        problems=[Problem(path=p.path, message=p.message) for p in server.problems()],
        readOnly=server.source != "api",
        version=version,
        tenant=server.owner,
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
    return ServerList(servers=[_out(rt, s, caller.tenant) for s in rt.gateway.servers.visible_to(caller)])


@router.get("/servers/{name}", response_model=ServerOut, summary="One virtual server")
async def get_server(
    name: NamePath, caller: Session = Depends(require(READ)), rt: ServerRuntime = Depends(runtime)
) -> ServerOut:
    return _out(rt, usable(rt, name, caller), caller.tenant)


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


def _out(rt: ServerRuntime, server: VirtualServer, tenant: str | None) -> ServerOut:
    stored = rt.servers.stored(server.name) if rt.servers is not None and server.source == "api" else None
    return server_out(server, tenant, stored.version if stored is not None else None)


def servers_service(request: Request) -> ServerService:
    service = runtime(request).servers
    if service is None:
        raise ApiError(503, "starting", "the gateway is still starting; retry shortly")
    return service


def _writable(rt: ServerRuntime, name: str, caller: Session) -> VirtualServer:
    """The API server `name` this caller may change: 404 when it may not see it, 409 for the file's."""
    server = rt.gateway.servers.get(name)
    if server is not None and server.source == "file" and server.visible_to(caller):
        source = rt.config.source or "the config file"
        raise ApiError(
            409,
            "read_only",
            f"virtual server {name!r} is defined in {source} and is read-only here; change it there",
        )
    if server is None or (caller.tenant is not None and server.owner != caller.tenant):
        known = sorted(
            s.name
            for s in rt.gateway.servers.visible_to(caller)
            if s.source == "api" and (caller.tenant is None or s.owner == caller.tenant)
        )
        raise ApiError(
            404, "not_found", f"no virtual server {name!r} of yours (yours: {', '.join(known) or 'none'})"
        )
    return server


@router.post("/servers", response_model=ServerOut, status_code=201, summary="Define a virtual server")
async def create_server(
    body: ServerCreate,
    response: Response,
    caller: Session = Depends(require(ADMIN)),
    rt: ServerRuntime = Depends(runtime),
    service: ServerService = Depends(servers_service),
    who: Actor = Depends(actor),
) -> ServerOut:
    """Validated first (the `[[servers]]` model, the name, the backends it names, what its selection
    matches); stored and served at `/servers/{name}/mcp` only when valid. A tenant's server is its own."""
    stored = await service.create(caller.tenant, body.definition, body.note, actor=who)
    response.headers["Location"] = f"/api/v1/servers/{stored.name}"
    return _out(rt, rt.gateway.servers.by_name[stored.name], caller.tenant)


@router.patch("/servers/{name}", response_model=ServerOut, summary="Edit a virtual server")
async def update_server(
    name: NamePath,
    body: ServerUpdate,
    caller: Session = Depends(require(ADMIN)),
    rt: ServerRuntime = Depends(runtime),
    service: ServerService = Depends(servers_service),
    who: Actor = Depends(actor),
) -> ServerOut:
    """`definition` is merged into the current one; a rejected change stores nothing and the previous
    version keeps serving. Its MCP clients get `list_changed` when what it lists changed."""
    _writable(rt, name, caller)
    stored = await service.update(
        name, caller.tenant, body.definition, body.note, body.expectedVersion, actor=who
    )
    return _out(rt, rt.gateway.servers.by_name[stored.name], caller.tenant)


@router.delete("/servers/{name}", status_code=204, response_class=Response, summary="Delete a virtual server")
async def delete_server(
    name: NamePath,
    caller: Session = Depends(require(ADMIN)),
    rt: ServerRuntime = Depends(runtime),
    service: ServerService = Depends(servers_service),
    who: Actor = Depends(actor),
) -> Response:
    """Soft: its versions stay, its name is free again; `/servers/{name}/mcp` answers 404 at once."""
    _writable(rt, name, caller)
    await service.delete(name, caller.tenant, actor=who)
    return Response(status_code=204)


@router.get("/servers/{name}/versions", response_model=ServerVersionList, summary="An API server's versions")
async def server_versions(
    name: NamePath,
    caller: Session = Depends(require(READ)),
    rt: ServerRuntime = Depends(runtime),
    service: ServerService = Depends(servers_service),
) -> ServerVersionList:
    """Oldest first, each with its full definition (a file server has none: 409 `read_only`)."""
    _writable(rt, name, caller)
    try:
        found = await service.repo.versions(name, caller.tenant)
    except NotFound:
        raise ApiError(404, "not_found", f"no virtual server {name!r} of yours") from None
    return ServerVersionList(
        versions=[
            ServerVersionOut(version=v.version, definition=v.definition, note=v.note, createdAt=v.created_at)
            for v in found
        ]
    )
