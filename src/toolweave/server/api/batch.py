"""`POST /tools/batch`: `execute_batch` over HTTP — results in input order, one per call, always."""

from __future__ import annotations

from fastapi import APIRouter, Depends

from toolweave.executor import BatchCall, Session
from toolweave.server.api import present
from toolweave.server.api.deps import CALL, require, runtime
from toolweave.server.api.errors import refuse_if_rate_limited
from toolweave.server.api.models import BatchRequest, BatchResponse, BatchResultItem
from toolweave.services.runtime import ServerRuntime

router = APIRouter(tags=["tools"])


@router.post("/tools/batch", response_model=BatchResponse, summary="Run a batch of calls")
async def batch(
    body: BatchRequest, caller: Session = Depends(require(CALL)), rt: ServerRuntime = Depends(runtime)
) -> BatchResponse:
    """Same semantics as `Gateway.execute_batch`: contiguous calls of the same admission class run
    concurrently, with a barrier between runs; an unknown tool is an error result, not a failed batch."""
    calls = [
        BatchCall(id=call.id if call.id is not None else str(index), name=call.name, arguments=call.arguments)
        for index, call in enumerate(body.calls)
    ]
    results = await rt.gateway.executor(caller).execute_batch(calls)
    refuse_if_rate_limited(*results)  # a batch refused whole is a 429; a partly refused one says so per call
    return BatchResponse(
        results=[
            BatchResultItem(id=call.id, name=call.name, result=present.call_result(result))
            for call, result in zip(calls, results, strict=True)
        ]
    )
