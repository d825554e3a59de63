"""`GET /runs`, `GET /runs/{id}`: run records of the caller's tenant (arguments already redacted)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query

from toolweave.executor.executor import Session
from toolweave.server.api import present
from toolweave.server.api.deps import READ, require, runtime
from toolweave.server.api.errors import ApiError
from toolweave.server.api.models import RunList, RunOut
from toolweave.server.runtime import ServerRuntime

router = APIRouter(prefix="/runs", tags=["runs"])
RunStatus = Annotated[
    str | None,
    Query(
        max_length=32,
        description="running, completed, failed, timed_out, cancelled, interrupted or input_required",
    ),
]


@router.get("", response_model=RunList, summary="Recent runs, newest first")
async def list_runs(
    tool: Annotated[str | None, Query(max_length=200)] = None,
    status: RunStatus = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    caller: Session = Depends(require(READ)),
    rt: ServerRuntime = Depends(runtime),
) -> RunList:
    """A tenant sees exactly its own runs; without auth (no tenant) every run is listed."""
    assert rt.runs is not None
    records = await rt.runs.list_runs(tenant=caller.tenant, tool=tool, status=status, limit=limit)
    return RunList(runs=[present.run_out(record) for record in records])


@router.get("/{id}", response_model=RunOut, summary="One run with its steps")
async def get_run(
    id: Annotated[str, Path(max_length=64)],
    caller: Session = Depends(require(READ)),
    rt: ServerRuntime = Depends(runtime),
) -> RunOut:
    assert rt.runs is not None
    record = await rt.runs.get_run(id, caller.tenant)
    if record is None or (caller.tenant is not None and record.tenant != caller.tenant):
        raise ApiError(404, "not_found", f"run {id!r} not found")
    return present.run_out(record)
