"""`/keys`: list, create (the key is in the answer once) and revoke API keys; scope `tools:admin`.

A tenant's admin key sees and manages its own tenant's keys only, and cannot hand out a scope it lacks;
the operator (auth off, or no tenant) manages every tenant's. Creating and revoking go through the
runtime (`keys.create`, `revoke_key`), as the admin page does, so a revocation is refused here at once
and on the other gateways sharing the database as soon as the change feed says so.
`toolweave keys` uses these when a gateway is running.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Path, Query

from toolweave.actor import Actor
from toolweave.executor import Session
from toolweave.server.api import records
from toolweave.server.api.deps import ADMIN, actor, require, runtime
from toolweave.server.api.errors import ApiError
from toolweave.server.api.models import KeyCreate, KeyCreated, KeyList, KeyOut
from toolweave.services.runtime import ServerRuntime
from toolweave.store import NotFound, StoreError

router = APIRouter(prefix="/keys", tags=["keys"])


def _tenant_for(caller: Session, wanted: str | None) -> str | None:
    """The tenant a request is about: a tenant's key may only name its own (403 otherwise)."""
    if caller.tenant is None:
        return wanted
    if wanted is not None and wanted != caller.tenant:
        raise ApiError(403, "forbidden", f"this API key acts for tenant {caller.tenant!r}, not {wanted!r}")
    return caller.tenant


@router.get("", response_model=KeyList, summary="API keys (never the keys themselves), oldest first")
async def list_keys(
    tenant: Annotated[str | None, Query(max_length=200, description="Only this tenant's keys")] = None,
    caller: Session = Depends(require(ADMIN)),
    rt: ServerRuntime = Depends(runtime),
) -> KeyList:
    keys = await rt.keys.list(_tenant_for(caller, tenant))
    return KeyList(keys=[records.key_out(info) for info in keys])


@router.post("", response_model=KeyCreated, status_code=201, summary="Create a key (shown once)")
async def create_key(
    body: KeyCreate,
    caller: Session = Depends(require(ADMIN)),
    rt: ServerRuntime = Depends(runtime),
    who: Actor = Depends(actor),
) -> KeyCreated:
    """The answer's `secret` is the key: store it now, only its hash is kept. 403: another tenant, or a
    scope the caller's own key lacks; 422: no tenant named (operator), an invalid tenant or scope."""
    tenant = _tenant_for(caller, body.tenant)
    if tenant is None:
        raise ApiError(422, "invalid", "name the tenant the key acts for", [("body.tenant", "required")])
    beyond = sorted(set(body.scopes) - caller.scopes)
    if beyond and caller.tenant is not None:
        raise ApiError(403, "forbidden", f"this API key cannot grant scope(s) it lacks: {', '.join(beyond)}")
    try:
        info, secret = await rt.keys.create(tenant, body.scopes, body.name, actor=who)
    except (ValueError, StoreError) as error:
        raise ApiError(422, "invalid", str(error)) from None
    return KeyCreated(key=records.key_out(info), secret=secret)


@router.post("/{id}/revoke", response_model=KeyOut, summary="Revoke a key now")
async def revoke_key(
    id: Annotated[str, Path(max_length=64)],
    caller: Session = Depends(require(ADMIN)),
    rt: ServerRuntime = Depends(runtime),
    who: Actor = Depends(actor),
) -> KeyOut:
    """Revoking twice keeps the first revocation time. 404: unknown, or another tenant's key."""
    try:
        info = await rt.revoke_key(id, caller.tenant, actor=who)
    except NotFound:
        raise ApiError(404, "not_found", f"no API key {id!r}") from None
    return records.key_out(info)
