"""Per-request dependencies: the runtime, the caller's Session, and scope checks.

The auth middleware has already turned the API key into a `Session`; routes
only ask "may this caller do X" through `require(scope)`.
"""

from __future__ import annotations

from collections.abc import Callable

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


def runtime(request: Request) -> ServerRuntime:
    found: ServerRuntime | None = getattr(request.app.state, "runtime", None)
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
