"""`GET /audit`: the audit log (scope `tools:admin`), newest first, with filters and paging;
`GET /audit/export`: every matching record as JSON lines.

A tenant's key reads its own tenant's records; the operator (auth off, or no tenant) reads every
record, or one tenant's with `tenant=`, or the gateway-wide ones with `tenant=-`.
`toolweave audit` uses these when a gateway is running.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import datetime
from typing import Annotated

import orjson
from fastapi import APIRouter, Depends, Query
from fastapi.responses import StreamingResponse

from toolweave.executor import Session
from toolweave.server.api.deps import ADMIN, require, runtime, tenant_filter
from toolweave.server.api.errors import ApiError
from toolweave.server.api.models import AuditList, AuditRecordOut
from toolweave.services.runtime import ServerRuntime
from toolweave.store import ALL_TENANTS, AuditFilter
from toolweave.store.audit import MAX_LISTED

router = APIRouter(prefix="/audit", tags=["audit"])


def _filter(
    action: Annotated[
        str | None,
        Query(max_length=64, description="An action (`key.revoked`) or every one of a kind (`key.*`)"),
    ] = None,
    objectType: Annotated[
        str | None,
        Query(max_length=32, description="composite, key, connection, run, backend, namespace, call"),
    ] = None,
    objectId: Annotated[str | None, Query(max_length=500)] = None,
    actor: Annotated[str | None, Query(max_length=500, description="Exactly as records show it")] = None,
    since: Annotated[datetime | None, Query(description="ISO 8601; records at or after")] = None,
    until: Annotated[datetime | None, Query(description="ISO 8601; records before")] = None,
) -> AuditFilter:
    for name, value in (("since", since), ("until", until)):
        if value is not None and value.tzinfo is None:
            raise ApiError(
                422, "invalid_request", f"{name} needs a timezone (e.g. Z)", [(name, "no timezone")]
            )
    return AuditFilter(
        action=action, object_type=objectType, object_id=objectId, actor=actor, since=since, until=until
    )


TenantQuery = Annotated[
    str | None,
    Query(
        max_length=200, description="Only this tenant's records (the operator's choice; `-`: gateway-wide)"
    ),
]


@router.get("", response_model=AuditList, summary="The audit log: one record per change, newest first")
async def list_audit(
    where: AuditFilter = Depends(_filter),
    tenant: TenantQuery = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LISTED)] = 50,
    before: Annotated[int | None, Query(ge=1, description="Only records older than this id (paging)")] = None,
    caller: Session = Depends(require(ADMIN)),
    rt: ServerRuntime = Depends(runtime),
) -> AuditList:
    records = await rt.audit.list(
        tenant_filter(caller, tenant, ALL_TENANTS), where, limit=limit, before=before
    )
    out = [AuditRecordOut(**record.to_dict()) for record in records]
    return AuditList(records=out, next=records[-1].id if len(records) == limit else None)


@router.get(
    "/export",
    summary="Every matching record as JSON lines (application/x-ndjson), newest first",
    response_class=StreamingResponse,
    responses={200: {"content": {"application/x-ndjson": {}}}},
)
async def export_audit(
    where: AuditFilter = Depends(_filter),
    tenant: TenantQuery = None,
    caller: Session = Depends(require(ADMIN)),
    rt: ServerRuntime = Depends(runtime),
) -> StreamingResponse:
    scope = tenant_filter(caller, tenant, ALL_TENANTS)

    async def lines() -> AsyncIterator[bytes]:
        async for record in rt.audit.export(scope, where):
            yield orjson.dumps(record.to_dict()) + b"\n"

    return StreamingResponse(lines(), media_type="application/x-ndjson")
