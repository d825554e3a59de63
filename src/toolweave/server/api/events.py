"""`GET /events`: the live trace as server-sent events, one `tool_result` event per call.

A tenant's key sees its tenant's calls; the local operator (no keys) sees every call.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import orjson
from fastapi import APIRouter, Depends
from fastapi.responses import StreamingResponse

from toolweave.executor import Session
from toolweave.server.api.deps import READ, require, runtime
from toolweave.server.api.errors import ApiError
from toolweave.services.errors import StreamsBusy
from toolweave.services.events import Subscriber
from toolweave.services.runtime import ServerRuntime

router = APIRouter(tags=["events"])


@router.get(
    "/events",
    summary="Follow every call live (server-sent events)",
    response_class=StreamingResponse,
    responses={200: {"content": {"text/event-stream": {}}, "description": "`event: tool_result` per call"}},
)
async def follow_events(
    caller: Session = Depends(require(READ)), rt: ServerRuntime = Depends(runtime)
) -> StreamingResponse:
    """Each event's `data` is a JSON object: `tool`, `status` (ok | error), `duration_ms`, `source`
    (backend | python | federated | composite), `handler`, `toolkit`, `error`, `tenant`, `run_id`, `at`.
    A comment line keeps an idle stream open; `event: dropped` says how many events a slow reader lost."""
    try:
        subscriber = rt.events.subscribe(caller.tenant, everything=caller.tenant is None, label=caller.label)
    except StreamsBusy as error:
        code = "too_many_streams" if error.status == 429 else "busy"
        raise ApiError(error.status, code, str(error)) from None
    return StreamingResponse(
        _stream(rt, subscriber),
        media_type="text/event-stream",
        headers={"cache-control": "no-store", "x-accel-buffering": "no"},
    )


async def _stream(rt: ServerRuntime, subscriber: Subscriber) -> AsyncIterator[bytes]:
    yield b": following tool_result events\n\n"
    async for event in rt.events.follow(subscriber):
        if event is None:
            yield b": keepalive\n\n"
        else:
            yield b"event: " + event["type"].encode() + b"\ndata: " + orjson.dumps(event) + b"\n\n"
