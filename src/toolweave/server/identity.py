"""The HTTP side of OAuth identity: the protected-resource metadata routes, and the token verifier
and resource the auth middleware is given (none of it when no issuer is configured)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from toolweave.config.models import Config
from toolweave.identity import ProtectedResource, TokenVerifier, public_url_for
from toolweave.identity.resource import METADATA_PATH
from toolweave.store.database import Database


@dataclass
class IdentityParts:
    resource: ProtectedResource | None = None
    tokens: TokenVerifier | None = None
    routes: list[Any] = field(default_factory=list)
    proxy: Any = None
    """The OAuth proxy's `ProxyServer` (`[auth.proxy] enabled`), else None."""

    @property
    def public_url(self) -> str:
        return self.resource.public_url if self.resource is not None else ""

    async def close(self) -> None:
        if self.tokens is not None:
            await self.tokens.aclose()
        if self.proxy is not None:
            await self.proxy.aclose()


def identity_parts(
    config: Config, host: str, public_url: str | None, db: Callable[[], Database] | None = None
) -> IdentityParts:
    """What serving `config`'s issuers takes; empty parts when it names none. `db`: the runtime's
    database, once started (the OAuth proxy keeps its state there)."""
    issuers = config.auth.issuers
    if not issuers:
        return IdentityParts()
    base = public_url or public_url_for(config.gateway.public_url, host, config.gateway.port)
    tokens = TokenVerifier(list(issuers), base)
    proxy = None
    if config.auth.proxy.enabled:
        if db is None:
            raise TypeError("the OAuth proxy needs the runtime's database")
        proxy = _proxy(config, base, tokens, db)
        resource = ProtectedResource(base, (proxy.issuer,))
    else:
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
    routes: list[Any] = [Route(path, metadata, methods=["GET", "OPTIONS"]) for path in paths]
    if proxy is not None:
        from toolweave.server.oauth_proxy import proxy_routes

        routes += proxy_routes(proxy)
    return IdentityParts(resource, tokens, routes, proxy)


def proxy_issuer(base: str) -> str:
    """The gateway's issuer identifier as an authorization server: its public URL as clients render
    it (pydantic's URL form, which the SDK compares metadata and `iss` against as strings)."""
    from pydantic import AnyHttpUrl

    return str(AnyHttpUrl(base))


def _proxy(config: Config, base: str, tokens: TokenVerifier, db: Callable[[], Database]) -> Any:
    try:
        from toolweave.server.oauth_proxy import ProxyServer
    except ImportError as error:
        raise RuntimeError(
            f"[auth.proxy] needs Authlib ({error}): pip install 'toolweave[oauth-proxy]'"
        ) from None
    from toolweave.identity.proxy import ProxyAuthority
    from toolweave.store.crypto import SecretBox
    from toolweave.store.oauth_proxy import OAuthProxyRepository

    boxes: list[SecretBox] = []

    def box() -> SecretBox:
        if not boxes:
            boxes.append(SecretBox.resolve(db()))
        return boxes[0]

    issuer = proxy_issuer(base)
    authority = ProxyAuthority(config.auth.proxy, issuer, lambda: OAuthProxyRepository(db()), box)
    tokens.proxy = authority
    return ProxyServer(config.auth, base, issuer, tokens, authority)
