"""`GET /healthz` and `GET /readyz`: what a load balancer or an orchestrator asks a replica.

Both are unauthenticated and cheap (no database query, no backend call), so a probe every
second costs nothing and never needs a key. `/healthz` is liveness: 200 whenever the process
answers at all. `/readyz` is readiness: 503 until the database is open and migrated and the
runtime has started (stored definitions loaded, change feed listening), 200 after; backends
still connecting are listed but never make it fail, since each backend's tools appear when it
connects and a gateway with one backend down still serves the others. Neither says more than
a name and a status: no URL, error text or tenant.
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from toolweave.services.runtime import ServerRuntime

NO_STORE = {"cache-control": "no-store"}


def health_routes(runtime: ServerRuntime) -> list[Route]:
    """The two probe routes of one served gateway."""

    async def healthz(_request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "instance": runtime.metrics.instance}, headers=NO_STORE)

    async def readyz(_request: Request) -> JSONResponse:
        body = readiness(runtime)
        return JSONResponse(body, status_code=200 if body["ready"] else 503, headers=NO_STORE)

    return [
        Route("/healthz", healthz, methods=["GET", "HEAD"]),
        Route("/readyz", readyz, methods=["GET", "HEAD"]),
    ]


def readiness(runtime: ServerRuntime) -> dict[str, Any]:
    """`ready`, why not, and the backends not connected yet (by name and status)."""
    waiting = [
        {"name": backend.name, "status": backend.status}
        for backend in runtime.gateway.backends.values()
        if backend.status != "connected"
    ]
    ready = runtime.database_ready and runtime.started
    body: dict[str, Any] = {
        "ready": ready,
        "instance": runtime.metrics.instance,
        "database": "open" if runtime.database_ready else "starting",
        "backends_not_connected": waiting,
    }
    if not ready:
        body["reason"] = (
            "the database is not open and migrated yet"
            if not runtime.database_ready
            else "the gateway is still starting (stored definitions, change feed)"
        )
    return body
