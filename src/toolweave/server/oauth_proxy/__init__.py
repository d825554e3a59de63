"""The OAuth proxy (`[auth.proxy]`, docs/auth.md#the-oauth-proxy): the gateway as the MCP clients'
authorization server, for identity providers without dynamic client registration.

Routes: RFC 8414 metadata at `/.well-known/oauth-authorization-server` (the protected-resource
metadata then names the gateway as the authorization server), registration (RFC 7591) at
`/oauth/register`, the authorization endpoint with its consent page at `/oauth/authorize`, the
upstream issuer's redirect back at `/oauth/proxy/callback`, `/oauth/token`, revocation (RFC 7009)
at `/oauth/revoke` and the signing keys at `/oauth/jwks`.

Authlib supplies the protocol pieces (error types, client metadata validation, PKCE, the metadata
model); the endpoints are Starlette's and async, because Authlib's server classes call their
storage synchronously and this state lives in the database every replica shares.
"""

from __future__ import annotations

from typing import Any

import orjson
from authlib.oauth2 import OAuth2Error
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from toolweave.config.auth import TOOLWEAVE_SCOPES, AuthConfig
from toolweave.identity import Issuer, TokenVerifier
from toolweave.identity.proxy import ProxyAuthority
from toolweave.server.oauth_proxy.clients import AUTH_METHODS, Clients
from toolweave.server.oauth_proxy.errors import (
    NO_STORE,
    InvalidClientMetadata,
    error_response,
    fail,
    request_actor,
)
from toolweave.server.oauth_proxy.flow import AuthorizeFlow
from toolweave.server.oauth_proxy.token import TokenEndpoint
from toolweave.store.oauth_proxy import OAuthProxyRepository

METADATA_PATH = "/.well-known/oauth-authorization-server"
MAX_REGISTRATION_BYTES = 16 * 1024


class ProxyServer:
    """Everything the proxy's endpoints share."""

    def __init__(
        self, auth: AuthConfig, base: str, issuer: str, tokens: TokenVerifier, authority: ProxyAuthority
    ) -> None:
        self.config = auth.proxy
        self.base = base
        self.issuer = issuer
        self.tokens = tokens
        self.authority = authority
        self.resource = tokens.resource
        entry = auth.proxy_issuer()
        assert entry is not None  # the config's validator saw to it
        self.upstream: Issuer = tokens.issuers[entry.issuer]
        self.idp_name = self.upstream.name
        self.client_id, self.client_secret = auth.proxy_client()
        self.callback_url = f"{base}/oauth/proxy/callback"
        self.clients = Clients(self.config, lambda: authority.repository)
        self.flow = AuthorizeFlow(self)
        self.endpoint = TokenEndpoint(self)

    @property
    def repository(self) -> OAuthProxyRepository:
        return self.authority.repository

    def metadata(self) -> dict[str, Any]:
        """RFC 8414 authorization server metadata (validated by Authlib's model in the tests)."""
        base = self.base
        document: dict[str, Any] = {
            "issuer": self.issuer,
            "authorization_endpoint": f"{base}/oauth/authorize",
            "token_endpoint": f"{base}/oauth/token",
            "registration_endpoint": f"{base}/oauth/register",
            "revocation_endpoint": f"{base}/oauth/revoke",
            "jwks_uri": f"{base}/oauth/jwks",
            "scopes_supported": list(TOOLWEAVE_SCOPES),
            "response_types_supported": ["code"],
            "response_modes_supported": ["query"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "token_endpoint_auth_methods_supported": list(AUTH_METHODS),
            "revocation_endpoint_auth_methods_supported": list(AUTH_METHODS),
            "code_challenge_methods_supported": ["S256"],
            "authorization_response_iss_parameter_supported": True,
            "client_id_metadata_document_supported": self.config.client_metadata_documents,
        }
        return document

    async def register(self, request: Request) -> Response:
        try:
            body = await request.body()
            if len(body) > MAX_REGISTRATION_BYTES:
                raise fail(
                    InvalidClientMetadata, f"the registration is larger than {MAX_REGISTRATION_BYTES} bytes"
                )
            try:
                document = orjson.loads(body)
            except orjson.JSONDecodeError:
                raise fail(InvalidClientMetadata, "the registration is not JSON") from None
            answer = await self.clients.register(document, request_actor(request, "anonymous", None))
        except OAuth2Error as error:
            return _cors(error_response(error))
        return _cors(JSONResponse(answer, status_code=201, headers=NO_STORE))

    async def aclose(self) -> None:
        await self.clients.aclose()


def proxy_routes(server: ProxyServer) -> list[Route]:
    document = orjson.dumps(server.metadata())

    async def metadata(request: Request) -> Response:
        if request.method == "OPTIONS":
            return _cors(Response(status_code=204))
        return _cors(
            Response(
                document, media_type="application/json", headers={"cache-control": "public, max-age=3600"}
            )
        )

    async def jwks(_request: Request) -> Response:
        return _cors(
            JSONResponse(
                await server.authority.public_keys(), headers={"cache-control": "public, max-age=300"}
            )
        )

    async def authorize(request: Request) -> Response:
        if request.method == "POST":
            return await server.flow.decide(request)
        return await server.flow.start(request)

    async def token(request: Request) -> Response:
        if request.method == "OPTIONS":
            return _cors(Response(status_code=204))
        return _cors(await server.endpoint.token(request))

    async def revoke(request: Request) -> Response:
        if request.method == "OPTIONS":
            return _cors(Response(status_code=204))
        return _cors(await server.endpoint.revoke(request))

    async def register(request: Request) -> Response:
        if request.method == "OPTIONS":
            return _cors(Response(status_code=204))
        return await server.register(request)

    routes = [
        Route(METADATA_PATH, metadata, methods=["GET", "OPTIONS"]),
        Route("/oauth/jwks", jwks, methods=["GET"]),
        Route("/oauth/register", register, methods=["POST", "OPTIONS"]),
        Route("/oauth/authorize", authorize, methods=["GET", "POST"]),
        Route("/oauth/proxy/callback", server.flow.callback, methods=["GET"]),
        Route("/oauth/token", token, methods=["POST", "OPTIONS"]),
        Route("/oauth/revoke", revoke, methods=["POST", "OPTIONS"]),
    ]
    path = server.issuer.split("://", 1)[1].partition("/")[2].rstrip("/")
    if path:  # RFC 8414 §3.1: an issuer with a path has its metadata under the path too
        routes.append(Route(f"{METADATA_PATH}/{path}", metadata, methods=["GET", "OPTIONS"]))
    return routes


def _cors(response: Response) -> Response:
    """Browser-based MCP clients read metadata and call these endpoints from their own origin (the
    endpoints take no cookies, so a wildcard origin grants nothing a script could not do anyway)."""
    response.headers["access-control-allow-origin"] = "*"
    response.headers["access-control-allow-methods"] = "GET, POST, OPTIONS"
    response.headers["access-control-allow-headers"] = "authorization, content-type, mcp-protocol-version"
    return response
