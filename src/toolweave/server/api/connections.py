"""`/connections/{backend}`: a tenant's credentials (HTTP headers) for an HTTP MCP backend.

Values go in and are never returned: responses carry the header names only.
A change closes the tenant's open session to that backend, here and on every
other gateway sharing the database, so the next call uses the new headers.
"""

from __future__ import annotations

import re
from typing import Annotated

from fastapi import APIRouter, Depends, Path, Response

from toolweave.actor import Actor
from toolweave.executor import Session
from toolweave.server.api.deps import ADMIN, READ, actor, require, runtime
from toolweave.server.api.errors import ApiError
from toolweave.server.api.models import ConnectionList, ConnectionOut, ConnectionPut
from toolweave.services.runtime import ServerRuntime
from toolweave.store import NotFound

router = APIRouter(prefix="/connections", tags=["connections"])
BackendPath = Annotated[str, Path(max_length=64, description="A backend name from the config")]

_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$")
_HOP_BY_HOP = {
    "host",
    "content-length",
    "content-type",
    "connection",
    "transfer-encoding",
    "accept",
    "mcp-session-id",
}
MAX_VALUE = 8192


def check_backend(rt: ServerRuntime, backend: str) -> None:
    """A connection is for a configured HTTP MCP backend or HTTP API (the REST route and the UI's form)."""
    config = rt.gateway.config.backend(backend)
    if config is None:
        raise ApiError(404, "not_found", f"no backend {backend!r} in the config")
    if config.transport != "http" and not config.is_http_api:
        raise ApiError(
            422,
            "not_http",
            f"backend {backend!r} is a {config.transport} backend; connections are for HTTP MCP backends "
            "and HTTP APIs",
            [("backend", f"is {config.transport}")],
        )


def check_headers(headers: dict[str, str]) -> None:
    """Every problem names the header, never its value."""
    problems: list[tuple[str, str]] = []
    if not headers:
        problems.append(("body.headers", "give at least one header"))
    for name, value in headers.items():
        where = f"body.headers.{name}"
        if not _HEADER_NAME.match(name):
            problems.append((where, "not a valid HTTP header name"))
        elif name.lower() in _HOP_BY_HOP:
            problems.append((where, "this header is set by the gateway itself"))
        if any(ch in value for ch in "\r\n\0") or len(value) > MAX_VALUE or not value.isprintable():
            problems.append(
                (
                    where,
                    f"the value must be printable text without line breaks, at most {MAX_VALUE} characters",
                )
            )
        elif not value.isascii():
            # HTTP sends header values as bytes: a non-ASCII value would fail at every connect
            problems.append((where, "the value must be ASCII (encode other text, e.g. percent-encoding)"))
    if problems:
        raise ApiError(422, "invalid_request", f"the connection has {len(problems)} problem(s)", problems)


@router.get("", response_model=ConnectionList, summary="The tenant's connections (names only)")
async def list_connections(
    caller: Session = Depends(require(READ)), rt: ServerRuntime = Depends(runtime)
) -> ConnectionList:
    rows = await rt.connections.list(caller.tenant)
    return ConnectionList(
        connections=[
            ConnectionOut(backend=r["backend"], keys=r["keys"], updatedAt=r["updated_at"]) for r in rows
        ]
    )


@router.get("/{backend}", response_model=ConnectionOut, summary="One connection (header names only)")
async def get_connection(
    backend: BackendPath, caller: Session = Depends(require(READ)), rt: ServerRuntime = Depends(runtime)
) -> ConnectionOut:
    for row in await rt.connections.list(caller.tenant):
        if row["backend"] == backend:
            return ConnectionOut(backend=backend, keys=row["keys"], updatedAt=row["updated_at"])
    raise ApiError(404, "not_found", f"no connection to backend {backend!r}")


@router.put("/{backend}", response_model=ConnectionOut, summary="Store the tenant's headers for a backend")
async def put_connection(
    backend: BackendPath,
    body: ConnectionPut,
    caller: Session = Depends(require(ADMIN)),
    rt: ServerRuntime = Depends(runtime),
    who: Actor = Depends(actor),
) -> ConnectionOut:
    """Replaces the whole set. Values are encrypted at rest and never returned."""
    check_backend(rt, backend)
    check_headers(body.headers)
    summary = await rt.connections.put(caller.tenant, backend, body.headers, actor=who)
    rt.connection_changed(caller.tenant, backend)
    return ConnectionOut(backend=backend, keys=summary["keys"], updatedAt=summary["updated_at"])


@router.delete("/{backend}", status_code=204, response_class=Response, summary="Delete a connection")
async def delete_connection(
    backend: BackendPath,
    caller: Session = Depends(require(ADMIN)),
    rt: ServerRuntime = Depends(runtime),
    who: Actor = Depends(actor),
) -> Response:
    try:
        await rt.connections.delete(caller.tenant, backend, actor=who)
    except NotFound:
        raise ApiError(404, "not_found", f"no connection to backend {backend!r}") from None
    rt.connection_changed(caller.tenant, backend)
    return Response(status_code=204)
