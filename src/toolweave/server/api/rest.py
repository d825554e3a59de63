"""The REST API (docs/api.md) as a FastAPI app: `/api/v1/...`, OpenAPI at `/openapi.json`.

Mounted at the root of the gateway's ASGI app (after `/mcp`), so the
OpenAPI document's paths are the real ones. The routers live in small
modules; `deps` turns the auth middleware's Session into scope checks, and
`errors` gives every failure one JSON shape.
"""

from __future__ import annotations

import functools
from typing import Any

from fastapi import APIRouter, FastAPI, Request, Response
from fastapi.openapi.utils import get_openapi
from starlette.routing import BaseRoute
from starlette.types import Receive, Scope, Send

from toolweave import __version__
from toolweave.server.api import (
    audit,
    backends,
    batch,
    composites,
    connections,
    deps,
    events,
    invoke,
    keys,
    runs,
    servers,
    stats,
    tools,
)
from toolweave.server.api.errors import install_error_handlers
from toolweave.server.api.models import ErrorResponse
from toolweave.services.runtime import ServerRuntime

PREFIX = "/api/v1"
_ERRORS: dict[int | str, dict[str, Any]] = {
    status: {"model": ErrorResponse, "description": text}
    for status, text in {
        400: "Bad request",
        401: "No API key, or an unknown or revoked one",
        403: "The API key lacks the scope, or the object belongs to someone else",
        404: "Not found (or not visible to this tenant)",
        409: "Conflicts with the current state: a name clash, a read-only tool, a stale version",
        422: "Invalid input: every problem with its path",
        503: "The gateway is still starting",
    }.items()
}

DESCRIPTION = """A composite tool gateway: every backend tool and composite (fan-out, router, workflow),
their definitions, calls, runs, backends and per-tenant connections.

Authenticate with `Authorization: Bearer tw_...` when the gateway runs with `--auth`
(scopes: `tools:read`, `tools:call`, `tools:admin`). Errors are
`{"error": {"code", "message", "problems": [{"path", "message"}]}}`."""


def build_api(runtime: ServerRuntime) -> RuntimeApi:
    """The REST API serving `runtime` (see `RuntimeApi`)."""
    return RuntimeApi(shared_api(), runtime)


class RuntimeApi:
    """The process's one FastAPI app, with a gateway's runtime put in each request's scope
    (`deps.RUNTIME_KEY`) for the routes to find.

    One app per process rather than per gateway because FastAPI builds every route's parameter
    models when a router is included (~40 routes, 60-70 ms of CPU): a gateway's start, each
    `serve --workers` worker and every test serving a gateway paid it again."""

    def __init__(self, api: FastAPI, runtime: ServerRuntime) -> None:
        self.api = api
        self.runtime = runtime

    @property
    def routes(self) -> list[BaseRoute]:
        """The app's routes, for Starlette's `Mount` (`url_path_for`, listing routes)."""
        return self.api.routes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.api({**scope, deps.RUNTIME_KEY: self.runtime}, receive, send)


@functools.cache
def shared_api() -> FastAPI:
    """The REST API's FastAPI app, built on first use; it holds no gateway's state."""
    api = FastAPI(
        title="toolweave",
        version=__version__,
        description=DESCRIPTION,
        docs_url=None,  # served from vendored files by toolweave.server.ui.docs (works offline)
        redoc_url=None,
        openapi_url="/openapi.json",
    )
    install_error_handlers(api)
    v1 = APIRouter(prefix=PREFIX, responses=_ERRORS)
    modules = (
        tools,
        batch,
        invoke,
        composites,
        runs,
        backends,
        connections,
        keys,
        events,
        servers,
        audit,
        stats,
    )
    for module in modules:
        v1.include_router(module.router)
    api.include_router(v1)

    @api.get("/metrics", include_in_schema=False)
    async def metrics(request: Request) -> Response:
        """Prometheus text format; who may read it is the auth middleware's decision, what they read
        depends on who they are: a tenant's key sees that tenant's series, the operator all."""
        runtime = deps.served_runtime(request)
        body, content_type = runtime.metrics.render(runtime.gateway, deps.session(request).tenant)
        return Response(body, media_type=content_type)

    api.openapi = lambda: _openapi(api)  # type: ignore[method-assign]
    return api


def _openapi(api: FastAPI) -> dict[str, Any]:
    if api.openapi_schema is None:
        schema = get_openapi(
            title=api.title, version=api.version, description=api.description, routes=api.routes
        )
        schema.setdefault("components", {})["securitySchemes"] = {
            "apiKey": {"type": "http", "scheme": "bearer", "description": "A toolweave API key (tw_...)"}
        }
        schema["security"] = [{"apiKey": []}, {}]
        api.openapi_schema = schema
    return api.openapi_schema
