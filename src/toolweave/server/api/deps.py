"""Per-request dependencies: the runtime, the caller's Session, and scope checks.

The auth middleware has already turned the API key into a `Session`; routes
only ask "may this caller do X" through `require(scope)`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from fastapi import Request

from toolweave.actor import Actor
from toolweave.executor import Session
from toolweave.server.actors import actor_for
from toolweave.server.api.errors import ApiError
from toolweave.server.auth import local_session
from toolweave.server.request_session import scope_session
from toolweave.services.definitions import DefinitionService
from toolweave.services.runtime import ServerRuntime

READ, CALL, ADMIN = "tools:read", "tools:call", "tools:admin"

RUNTIME_KEY = "toolweave.runtime"
"""Where `rest.build_api` puts the gateway's runtime in each request's ASGI scope: the FastAPI app is
one per process, shared by every gateway served in it."""

OPERATORS_OWN = "-"
"""`tenant=-` on a tenant filter: only the operator's own (shared, gateway-wide) records."""

Everyone = TypeVar("Everyone")


def tenant_filter(caller: Session, wanted: str | None, everyone: Everyone) -> str | Everyone | None:
    """Whose records a caller may read: a tenant's key, its own tenant's (asking for another is a
    403); the operator, the tenant asked for, `everyone` (the store's marker) when none was, or
    None (the operator's own) for `-`."""
    if caller.tenant is not None:
        if wanted is not None and wanted != caller.tenant:
            raise ApiError(
                403, "forbidden", f"this API key acts for tenant {caller.tenant!r}, not {wanted!r}"
            )
        return caller.tenant
    if wanted is None:
        return everyone
    return None if wanted == OPERATORS_OWN else wanted


def served_runtime(request: Request) -> ServerRuntime:
    """The runtime of the gateway serving this request, started or not."""
    found: ServerRuntime = request.scope[RUNTIME_KEY]
    return found


def runtime(request: Request) -> ServerRuntime:
    found: ServerRuntime | None = request.scope.get(RUNTIME_KEY)
    if found is None or not found.started:
        raise ApiError(503, "starting", "the gateway is still starting; retry shortly")
    return found


def definitions(request: Request) -> DefinitionService:
    service = runtime(request).definitions
    if service is None:
        raise ApiError(503, "starting", "the gateway is still starting; retry shortly")
    return service


def session(request: Request) -> Session:
    found = scope_session(request.scope)
    if found is not None:
        return found
    rt = runtime(request)
    if rt.require_auth:  # the middleware always sets one; never fall back to the operator's rights
        raise ApiError(401, "unauthorized", "an API key is required: send 'Authorization: Bearer tw_...'")
    return local_session()


def actor(request: Request) -> Actor:
    """Who is asking, from where: for the audit record of a change (`toolweave.store.audit`)."""
    return actor_for(session(request), request, "rest")


def require(scope: str) -> Callable[[Request], Session]:
    """A dependency returning the caller's Session, or 403 naming the missing scope."""

    def check(request: Request) -> Session:
        caller = session(request)
        if scope not in caller.scopes:
            raise ApiError(403, "forbidden", f"this API key lacks the {scope} scope")
        return caller

    check.__name__ = f"require_{scope.replace(':', '_')}"
    return check
