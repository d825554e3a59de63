"""`GET /backends`: each backend's status, tool counts and last error."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from toolweave.executor import Session
from toolweave.server.api.deps import READ, require, runtime
from toolweave.server.api.models import BackendList, BackendOut
from toolweave.services.runtime import ServerRuntime

router = APIRouter(tags=["backends"])


@router.get("/backends", response_model=BackendList, summary="Backends and their status")
async def list_backends(
    caller: Session = Depends(require(READ)), rt: ServerRuntime = Depends(runtime)
) -> BackendList:
    own = {summary["backend"] for summary in await rt.connections.list(caller.tenant)}
    return BackendList(
        backends=[
            BackendOut(
                name=b["name"],
                transport=b["transport"],
                status=b["status"],
                tools=b["tools"],
                resources=b.get("resources", 0),
                prompts=b.get("prompts", 0),
                lastError=b.get("last_error"),
                connection=b["name"] in own,
            )
            for b in rt.gateway.describe_backends()
        ]
    )
