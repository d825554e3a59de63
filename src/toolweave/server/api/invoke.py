"""`POST /composite-tools/invoke` (docs/api.md): `{tool, params}` → `{success, message, data, meta}`.

The call goes through the same executor as MCP calls (policy, validation,
admission, a run record). A tool failure is a 200 with `success: false`
and the tool's message; only an unknown tool is a 404.
"""

from __future__ import annotations

import time
import uuid
from typing import Any

from fastapi import APIRouter, Depends

from toolweave.executor import Session
from toolweave.results import META_KEY, joined_text
from toolweave.server.api.deps import CALL, definitions, require
from toolweave.server.api.errors import ApiError, refuse_if_rate_limited
from toolweave.server.api.models import InvokeMeta, InvokeRequest, InvokeResponse
from toolweave.services.definitions import DefinitionService
from toolweave.store import NotFound

router = APIRouter(tags=["composite tools"])


async def _composite_name(service: DefinitionService, tool: str, caller: Session) -> str:
    gateway = service.gateway
    entry = gateway.catalog.get(tool)
    if entry is not None and entry.composite is not None and entry.listed_to(caller.tenant):
        return tool
    try:  # an id, or the name of a stored tool that is not served right now
        stored = await service.repo.get(tool, caller.tenant)
    except NotFound:
        stored = None
    if stored is not None and service.served_entry(stored) is not None:
        return stored.name
    if stored is not None:
        problems = [("tool", problem) for problem in stored.validation_errors or ()]
        raise ApiError(
            409,
            "not_served",
            f"composite tool {stored.name!r} is {stored.status}, so it cannot be invoked",
            problems,
        )
    if entry is not None and entry.composite is None and entry.listed_to(caller.tenant):
        raise ApiError(
            404,
            "not_a_composite",
            f"{tool!r} is a backend tool, not a composite; use POST /api/v1/tools/{tool}/call",
        )
    raise ApiError(
        404, "unknown_tool", f"no composite tool {tool!r} (list them with GET /api/v1/composite-tools)"
    )


@router.post("/composite-tools/invoke", response_model=InvokeResponse, summary="Invoke a composite tool")
async def invoke(
    body: InvokeRequest,
    caller: Session = Depends(require(CALL)),
    service: DefinitionService = Depends(definitions),
) -> InvokeResponse:
    name = await _composite_name(service, body.tool, caller)
    started = time.perf_counter()
    result = await service.gateway.executor(caller).call(name, body.params)
    refuse_if_rate_limited(result)
    latency = round((time.perf_counter() - started) * 1000, 3)
    found: Any = (result.meta or {}).get(META_KEY)
    meta: dict[str, Any] = found if isinstance(found, dict) else {}
    selected, integration = _selected(service, meta.get("tool"))
    return InvokeResponse(
        success=not result.is_error,
        message=joined_text(result),
        data=result.structured_content,
        meta=InvokeMeta(
            compositeTool=name,
            kind=str(meta.get("kind") or service.gateway.catalog.get(name).kind),  # type: ignore[union-attr]
            selectedOperation=selected,
            operation=meta.get("operation"),
            routingReason=meta.get("reason"),
            integration=integration,
            requestId=f"req_{uuid.uuid4().hex[:16]}",
            runId=meta.get("run_id"),
            latencyMs=float(meta.get("latency_ms") or latency),
            steps=meta.get("steps") if isinstance(meta.get("steps"), list) else None,
            targets=meta.get("targets") if isinstance(meta.get("targets"), list) else None,
        ),
    )


def _selected(service: DefinitionService, tool: Any) -> tuple[str | None, str | None]:
    """`backend/tool` and the backend of the operation a router ran (`meta.selectedOperation`, `meta.integration`)."""
    if not isinstance(tool, str):
        return None, None
    entry = service.gateway.catalog.get(tool)
    if entry is None or entry.backend is None:
        return tool, None
    return f"{entry.backend.name}/{entry.backend_tool}", entry.backend.name
