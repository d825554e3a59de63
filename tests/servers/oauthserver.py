"""An MCP server that requires OAuth, with its own small authorization server (for `[backends.oauth]` tests).

- `/mcp`: streamable HTTP (the SDK's `MCPServer`), answering 401 with an RFC 9728 challenge without a
  valid bearer token; tools `whoami` (the user the token was issued to) and `whoami_slowly`.
- `/.well-known/oauth-protected-resource/mcp`, `/.well-known/oauth-authorization-server`: metadata.
- `/register` (RFC 7591, public clients), `/authorize` (approves at once, for the user named by the
  `user` query parameter the test's "browser" adds, tokens living `ttl` seconds if it adds one; PKCE S256 required; RFC 9207 `iss` in the
  redirect), `/token` (authorization_code, refresh_token; access tokens live `TOKEN_TTL` seconds),
  `/revoke` (RFC 7009).
- `/api/me` (a plain REST API that wants a bearer token: the user it was issued to, 401 without one)
  and `/api/ping` (public), described by `/api/openapi.json` (an `oauth2` authorization-code scheme)
  and `/api/openapi-oidc.json` (an `openIdConnect` scheme; `/.well-known/openid-configuration`).
- Test hooks: `POST /admin/revoke?user=` revokes every token of a user; `POST /admin/expire?user=`
  ends a user's access tokens early (their refresh tokens still work); `GET /admin/stats` counts
  grants and refreshes.

Tokens are random strings; `whoami` never returns one.
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import os
import secrets
import time
from html import escape
from typing import Any
from urllib.parse import urlencode

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ToolAnnotations
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
from starlette.routing import Mount, Route

TOKEN_TTL = int(os.environ.get("TOKEN_TTL", "3600"))
server = MCPServer("oauthserver")
access: dict[str, tuple[str, float]] = {}
"""access token → (user, expiry)."""
refresh: dict[str, str] = {}
"""refresh token → user."""
codes: dict[str, tuple[str, str, int]] = {}
"""code → (user, code_challenge, token lifetime)."""
lifetimes: dict[str, int] = {}
"""user → how long their access tokens live (the `ttl` the test's "browser" asked for)."""
stats: dict[str, int] = {"authorizations": 0, "refreshes": 0, "refused_refreshes": 0}


def _user(headers: Any) -> str | None:
    value = next((v for k, v in (headers or {}).items() if k.lower() == "authorization"), "")
    found = access.get(value.removeprefix("Bearer ").strip())
    return found[0] if found and found[1] > time.time() else None


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def whoami(ctx: Context) -> dict[str, Any]:
    """Whose token this call carried."""
    return {"user": _user(ctx.headers)}


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
async def whoami_slowly(ctx: Context, seconds: float = 1.0) -> dict[str, Any]:
    """Like whoami, answered after a pause (a call in flight while its token expires)."""
    user = _user(ctx.headers)
    await anyio.sleep(seconds)
    return {"user": user}


def _base(request: Request) -> str:
    return f"{request.url.scheme}://{request.url.netloc}"


async def protected_resource(request: Request) -> Response:
    return JSONResponse({"resource": _base(request) + "/mcp", "authorization_servers": [_base(request)]})


async def authorization_server(request: Request) -> Response:
    base = _base(request)
    return JSONResponse(
        {
            "issuer": base,
            "authorization_endpoint": base + "/authorize",
            "token_endpoint": base + "/token",
            "registration_endpoint": base + "/register",
            "revocation_endpoint": base + "/revoke",
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": ["none"],
            "authorization_response_iss_parameter_supported": True,
        }
    )


async def register(request: Request) -> Response:
    body = await request.json()
    client = {**body, "client_id": "client-" + secrets.token_hex(4), "token_endpoint_auth_method": "none"}
    client.pop("client_secret", None)
    return JSONResponse(client, status_code=201)


async def authorize(request: Request) -> Response:
    query = request.query_params
    if query.get("code_challenge_method") != "S256" or not query.get("code_challenge"):
        return JSONResponse({"error": "invalid_request", "error_description": "PKCE S256 required"}, 400)
    if "user" not in query:  # a person's browser: the sign-in page, which comes back with `user`
        hidden = "".join(
            f'<input type="hidden" name="{escape(k)}" value="{escape(v)}">' for k, v in query.items()
        )
        return HTMLResponse(
            f'<!doctype html><title>Sign in</title><form method="get" action="/authorize">{hidden}'
            '<label>User <input name="user" id="user"></label> <button type="submit">Approve</button></form>'
        )
    code = secrets.token_urlsafe(16)
    codes[code] = (query.get("user", "nobody"), query["code_challenge"], int(query.get("ttl", TOKEN_TTL)))
    stats["authorizations"] += 1
    params = {"code": code, "state": query.get("state", ""), "iss": _base(request)}
    return RedirectResponse(f"{query['redirect_uri']}?{urlencode(params)}", status_code=302)


def _tokens(user: str) -> dict[str, Any]:
    token, renew = secrets.token_urlsafe(24), secrets.token_urlsafe(24)
    ttl = lifetimes.get(user, TOKEN_TTL)
    access[token] = (user, time.time() + ttl)
    refresh[renew] = user
    return {"access_token": token, "token_type": "Bearer", "expires_in": ttl, "refresh_token": renew}


async def token(request: Request) -> Response:
    form = await request.form()
    grant = form.get("grant_type")
    if grant == "authorization_code":
        found = codes.pop(str(form.get("code")), None)
        verifier = str(form.get("code_verifier", ""))
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
        if found is None or found[1] != challenge:
            return JSONResponse({"error": "invalid_grant"}, 400)
        lifetimes[found[0]] = found[2]
        return JSONResponse(_tokens(found[0]))
    if grant == "refresh_token":
        user = refresh.pop(str(form.get("refresh_token")), None)
        if user is None:
            stats["refused_refreshes"] += 1
            return JSONResponse({"error": "invalid_grant", "error_description": "refresh token revoked"}, 400)
        stats["refreshes"] += 1
        return JSONResponse(_tokens(user))
    return JSONResponse({"error": "unsupported_grant_type"}, 400)


async def revoke(request: Request) -> Response:
    form = await request.form()
    value = str(form.get("token"))
    access.pop(value, None)
    refresh.pop(value, None)
    return Response(status_code=200)


async def admin_revoke(request: Request) -> Response:
    user = request.query_params["user"]
    for table in (refresh,):
        for key in [k for k, v in table.items() if v == user]:
            table.pop(key)
    for key in [k for k, v in access.items() if v[0] == user]:
        access.pop(key)
    return JSONResponse({"revoked": user})


async def admin_expire(request: Request) -> Response:
    user = request.query_params["user"]
    for key in [k for k, v in access.items() if v[0] == user]:
        access.pop(key)
    return JSONResponse({"expired": user})


async def admin_stats(request: Request) -> Response:
    return JSONResponse({**stats, "users": sorted({user for user, _ in access.values()})})


async def api_me(request: Request) -> Response:
    user = _user(request.headers)
    if user is None:
        return JSONResponse({"error": "invalid_token"}, 401, headers={"WWW-Authenticate": "Bearer"})
    return JSONResponse({"user": user})


async def api_ping(request: Request) -> Response:
    return JSONResponse({"pong": True})


def _api_document(base: str, scheme: dict[str, Any]) -> dict[str, Any]:
    me = {
        "operationId": "getMe",
        "summary": "Who the token belongs to",
        "security": [{"user": ["profile:read"]}],
    }
    ping = {"operationId": "ping", "summary": "Public", "security": []}
    return {
        "openapi": "3.1.0",
        "info": {"title": "people", "version": "1"},
        "servers": [{"url": base + "/api"}],
        "components": {"securitySchemes": {"user": scheme}},
        "paths": {"/me": {"get": me}, "/ping": {"get": ping}},
    }


async def api_document(request: Request) -> Response:
    base = _base(request)
    flow = {
        "authorizationUrl": base + "/authorize",
        "tokenUrl": base + "/token",
        "scopes": {"profile:read": "read your profile", "profile:write": "change it"},
    }
    return JSONResponse(_api_document(base, {"type": "oauth2", "flows": {"authorizationCode": flow}}))


async def api_document_oidc(request: Request) -> Response:
    url = _base(request) + "/.well-known/openid-configuration"
    return JSONResponse(_api_document(_base(request), {"type": "openIdConnect", "openIdConnectUrl": url}))


def app() -> Starlette:
    mcp_app = server.streamable_http_app()

    async def guarded(scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = {k.decode().lower(): v.decode() for k, v in scope["headers"]}
            if _user(headers) is None:
                base = f"http://{headers.get('host', '127.0.0.1')}"
                challenge = f'Bearer resource_metadata="{base}/.well-known/oauth-protected-resource/mcp"'
                response = JSONResponse(
                    {"error": "invalid_token"}, 401, headers={"WWW-Authenticate": challenge}
                )
                await response(scope, receive, send)
                return
        await mcp_app(scope, receive, send)

    routes = [
        Route("/.well-known/oauth-protected-resource/mcp", protected_resource),
        Route("/.well-known/oauth-authorization-server", authorization_server),
        Route("/.well-known/openid-configuration", authorization_server),
        Route("/api/me", api_me),
        Route("/api/ping", api_ping),
        Route("/api/openapi.json", api_document),
        Route("/api/openapi-oidc.json", api_document_oidc),
        Route("/register", register, methods=["POST"]),
        Route("/authorize", authorize),
        Route("/token", token, methods=["POST"]),
        Route("/revoke", revoke, methods=["POST"]),
        Route("/admin/revoke", admin_revoke, methods=["POST"]),
        Route("/admin/expire", admin_expire, methods=["POST"]),
        Route("/admin/stats", admin_stats),
        Mount("/", app=guarded),
    ]
    return Starlette(routes=routes, lifespan=lambda _app: mcp_app.router.lifespan_context(mcp_app))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", type=int, required=True)
    args = parser.parse_args()
    import uvicorn

    uvicorn.run(app(), host="127.0.0.1", port=args.http, log_level="warning")


if __name__ == "__main__":
    main()
