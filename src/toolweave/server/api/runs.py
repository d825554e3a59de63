"""`GET /runs`, `GET /runs/{id}`: run records of the caller's tenant (arguments already redacted);
`POST /runs/{id}/resume`: continue an interrupted run (see `toolweave.executor.resume`)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Body, Depends, Path, Query

from toolweave.actor import Actor
from toolweave.executor import Session
from toolweave.executor.errors import ResumeError
from toolweave.executor.resume import resume_run
from toolweave.runs import MAX_LISTED
from toolweave.server.api import present, records
from toolweave.server.api.deps import CALL, READ, actor, require, runtime
from toolweave.server.api.errors import ApiError
from toolweave.server.api.models import CallResult, ResumeRequest, RunList, RunOut
from toolweave.services.runtime import ServerRuntime

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
    limit: Annotated[int, Query(ge=1, le=MAX_LISTED)] = 50,
    tenant: Annotated[
        str | None, Query(max_length=200, description="Only this tenant's runs (the operator's choice)")
    ] = None,
    caller: Session = Depends(require(READ)),
    rt: ServerRuntime = Depends(runtime),
) -> RunList:
    """A tenant sees exactly its own runs; without auth (no tenant) every run is listed, or `tenant`'s."""
    if caller.tenant is not None and tenant is not None and tenant != caller.tenant:
        raise ApiError(403, "forbidden", f"this API key acts for tenant {caller.tenant!r}, not {tenant!r}")
    wanted = caller.tenant if caller.tenant is not None else tenant
    found = await rt.runs.list_runs(tenant=wanted, tool=tool, status=status, limit=limit)
    return RunList(runs=[records.run_out(record) for record in found])


@router.get("/{id}", response_model=RunOut, summary="One run with its steps")
async def get_run(
    id: Annotated[str, Path(max_length=64)],
    caller: Session = Depends(require(READ)),
    rt: ServerRuntime = Depends(runtime),
) -> RunOut:
    record = await rt.runs.get_run(id, caller.tenant)
    if record is None:
        raise ApiError(404, "not_found", f"run {id!r} not found")
    return records.run_out(record)


@router.post("/{id}/resume", response_model=CallResult, summary="Resume an interrupted run")
async def resume(
    id: Annotated[str, Path(max_length=64)],
    body: Annotated[ResumeRequest | None, Body()] = None,
    caller: Session = Depends(require(CALL)),
    rt: ServerRuntime = Depends(runtime),
    who: Actor = Depends(actor),
) -> CallResult:
    """Continue a run its gateway left `interrupted`, as the same run: completed workflow steps are not
    run again, and a step that was in flight only when its tool is idempotent or it retries. Secret
    arguments are not kept in run records: send them again in `arguments`. The answer is the call's
    result, as for `POST /tools/{name}/call`. 404: unknown or another tenant's run; 409: not
    interrupted, already resumed, or not resumable; 422: a missing secret (named) or bad arguments."""
    try:
        result = await resume_run(
            rt.gateway.executor(caller), id, body.arguments if body is not None else None, actor=who
        )
    except ResumeError as error:
        raise ApiError(error.status, error.code, error.message, error.problems) from None
    return present.call_result(result)
