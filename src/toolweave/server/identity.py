"""The HTTP side of OAuth identity: the protected-resource metadata routes, and the token verifier
and resource the auth middleware is given (none of it when no issuer is configured)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from toolweave.config.models import Config
from toolweave.identity import ProtectedResource, TokenVerifier, public_url_for
from toolweave.identity.resource import METADATA_PATH


@dataclass
class IdentityParts:
    resource: ProtectedResource | None = None
    tokens: TokenVerifier | None = None
    routes: list[Any] = field(default_factory=list)

    @property
    def public_url(self) -> str:
        return self.resource.public_url if self.resource is not None else ""

    async def close(self) -> None:
        if self.tokens is not None:
            await self.tokens.aclose()


def identity_parts(config: Config, host: str, public_url: str | None) -> IdentityParts:
    """What serving `config`'s issuers takes; empty parts when it names none."""
    issuers = config.auth.issuers
    if not issuers:
        return IdentityParts()
    base = public_url or public_url_for(config.gateway.public_url, host, config.gateway.port)
    resource = ProtectedResource(base, tuple(issuer.issuer for issuer in issuers))
    document = resource.metadata()

    async def metadata(request: Request) -> Response:
        name = request.path_params.get("name")
        body = document if name is None else resource.metadata(f"/servers/{name}/mcp")
        headers = {"cache-control": "public, max-age=3600", "access-control-allow-origin": "*"}
        if request.method == "OPTIONS":
            headers["access-control-allow-methods"] = "GET, OPTIONS"
            headers["access-control-allow-headers"] = "mcp-protocol-version"
            return Response(status_code=204, headers=headers)
        return Response(body, media_type="application/json", headers=headers)

    paths = (f"{METADATA_PATH}/mcp", METADATA_PATH, f"{METADATA_PATH}/servers/{{name}}/mcp")
    routes = [Route(path, metadata, methods=["GET", "OPTIONS"]) for path in paths]
    return IdentityParts(resource, TokenVerifier(list(issuers), base), routes)
