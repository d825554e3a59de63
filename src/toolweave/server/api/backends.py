"""`GET /backends`: each backend's status, tool counts and last error; `POST /backends/{name}/reconnect`."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from fastapi import APIRouter, Depends

from toolweave.actor import Actor
from toolweave.executor import Session
from toolweave.server.api.deps import ADMIN, READ, actor, require, runtime
from toolweave.server.api.models import BackendList, BackendOut
from toolweave.services.runtime import ServerRuntime

router = APIRouter(tags=["backends"])


def backend_out(found: dict[str, Any], own: set[str]) -> BackendOut:
    when = found.get("last_error_at")
    return BackendOut(
        name=found["name"],
        transport=found["transport"],
        status=found["status"],
        tools=found["tools"],
        resources=found.get("resources", 0),
        prompts=found.get("prompts", 0),
        lastError=found.get("last_error"),
        lastErrorAt=datetime.fromtimestamp(when, UTC) if when is not None else None,
        connection=found["name"] in own,
    )


@router.get("/backends", response_model=BackendList, summary="Backends and their status")
async def list_backends(
    caller: Session = Depends(require(READ)), rt: ServerRuntime = Depends(runtime)
) -> BackendList:
    own = {summary["backend"] for summary in await rt.connections.list(caller.tenant)}
    return BackendList(backends=[backend_out(b, own) for b in rt.gateway.describe_backends(caller.tenant)])


@router.post(
    "/backends/{name}/reconnect",
    response_model=BackendOut,
    status_code=202,
    summary="Reconnect a backend now",
    responses={
        403: {"description": "The key lacks tools:admin"},
        404: {"description": "No such backend (or another tenant's federated namespace)"},
        409: {"description": "A federated backend the caller sees (its clients connect to the gateway)"},
        429: {"description": "A tenant's key, a shared backend, reconnected by a tenant under 30 s ago"},
    },
)
async def reconnect_backend(
    name: str,
    caller: Session = Depends(require(ADMIN)),
    rt: ServerRuntime = Depends(runtime),
    who: Actor = Depends(actor),
) -> BackendOut:
    """Drop this gateway's connection to the backend and connect again at once (no backoff wait).
    Answers as the new attempt begins (`status` is then `reconnecting`, or already `connected`);
    calls in flight on the old connection fail as on any lost connection. While an attempt is under way
    asking again changes nothing; a tenant's key may reconnect a shared backend once every 30 s."""
    found = await rt.reconnect_backend(name, caller.tenant, actor=who)
    own = {summary["backend"] for summary in await rt.connections.list(caller.tenant)}
    return backend_out(found, own)
