"""Logging in to the web UI through an identity provider: authorization code + PKCE against an
`[[auth.issuers]]` entry that has a `client_id` (docs/auth.md#the-web-ui).

`/login/sso/{n}` sends the browser to the issuer's authorization endpoint with a fresh `state`
and PKCE verifier, both kept in a short-lived cookie of their own (HttpOnly, SameSite=Lax: the
session cookie is SameSite=Strict, so a browser coming back from the provider does not send it;
nothing is kept on the server, so any gateway sharing the database can finish the login).
`/login/sso/callback` checks `state`, exchanges the code (with the verifier, the client's
credentials and `resource` = the gateway's MCP URL) and verifies the access token exactly as a
bearer token on `/mcp` is verified. Its tenant, subject, scopes and expiry become the browser's
session, which ends when the token would have.
"""

from __future__ import annotations

import base64
import hashlib
import secrets
from typing import Any
from urllib.parse import urlencode

import httpx
import orjson
from starlette.responses import RedirectResponse, Response

from toolweave.identity import Identity, Issuer, IssuerUnavailable, TokenRejected, TokenVerifier
from toolweave.identity.fetch import fetch_json
from toolweave.server.ui.app import PageContext, UiApp
from toolweave.server.ui.pages import safe_next

COOKIE = "tw_ui_sso"
COOKIE_PATH = "/login/sso"
COOKIE_SECONDS = 600
"""How long a started login may take at the provider."""
MAX_COOKIE = 2048


class SingleSignOn:
    def __init__(self, ui: UiApp, tokens: TokenVerifier, public_url: str) -> None:
        self.ui = ui
        self.tokens = tokens
        """The gateway's `TokenVerifier` (None: no issuers)."""
        self.redirect_uri = f"{public_url}/login/sso/callback"
        self.issuers: list[Issuer] = (
            [i for i in tokens.issuers.values() if i.config.client_id] if tokens is not None else []
        )

    def buttons(self) -> list[tuple[int, str]]:
        """(index, name) of each issuer a person can log in at."""
        return [(index, issuer.name) for index, issuer in enumerate(self.issuers)]

    async def start(self, ctx: PageContext) -> Response:
        index = _index(ctx.request.path_params.get("index", ""), len(self.issuers))
        if index is None:
            return self.ui.problem(ctx, 404, "No such login", "This gateway has no such identity provider.")
        issuer = self.issuers[index]
        try:
            endpoint = (await issuer.metadata()).get("authorization_endpoint")
        except IssuerUnavailable as error:
            return self._failed(ctx, f"{issuer.name} cannot be reached: {error}")
        if not isinstance(endpoint, str) or not endpoint.startswith(("https://", "http://")):
            return self._failed(ctx, f"{issuer.name} names no authorization endpoint")
        state, verifier = secrets.token_urlsafe(24), secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        query = {
            "response_type": "code",
            "client_id": issuer.config.client_id,
            "redirect_uri": self.redirect_uri,
            "scope": "openid tools:read tools:call tools:admin",
            "state": state,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "resource": issuer.audience,
        }
        response = RedirectResponse(f"{endpoint}{'&' if '?' in endpoint else '?'}{urlencode(query)}", 303)
        started = {
            "s": state,
            "v": verifier,
            "i": index,
            "n": safe_next(ctx.request.query_params.get("next")),
        }
        response.set_cookie(
            COOKIE,
            base64.urlsafe_b64encode(orjson.dumps(started)).decode(),
            max_age=COOKIE_SECONDS,
            path=COOKIE_PATH,
            httponly=True,
            samesite="lax",
            secure=ctx.request.url.scheme == "https",
        )
        return response

    async def callback(self, ctx: PageContext) -> Response:
        params = ctx.request.query_params
        started = _started(ctx.request.cookies.get(COOKIE))
        if started is None or _index(started.get("i"), len(self.issuers)) is None:
            return self._failed(ctx, "the login was not started here, or took longer than 10 minutes")
        if not isinstance(params.get("state"), str) or not secrets.compare_digest(
            params["state"], started["s"]
        ):
            return self._failed(ctx, "the provider's answer does not belong to this login (state differs)")
        issuer = self.issuers[started["i"]]
        if "error" in params:
            reason = params.get("error_description") or params["error"]
            return self._failed(ctx, f"{issuer.name} refused: {reason[:200]}")
        try:
            identity = await self._redeem(issuer, params.get("code") or "", started["v"])
        except (IssuerUnavailable, TokenRejected) as error:
            return self._failed(ctx, f"{issuer.name}: {error}")
        await self.ui.rotate_identity(ctx, identity)
        response = RedirectResponse(started["n"], status_code=303)
        response.delete_cookie(COOKIE, path=COOKIE_PATH)
        return response

    async def _redeem(self, issuer: Issuer, code: str, verifier: str) -> Identity:
        endpoint = (await issuer.metadata()).get("token_endpoint")
        if not isinstance(endpoint, str):
            raise IssuerUnavailable("its discovery document names no token_endpoint")
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": self.redirect_uri,
            "code_verifier": verifier,
            "resource": issuer.audience,
        }
        config = issuer.config
        auth = (config.client_id, config.client_secret) if config.client_secret else None
        if auth is None:
            form["client_id"] = config.client_id
        async with httpx.AsyncClient(follow_redirects=False) as client:
            answer = await fetch_json(client, "POST", endpoint, data=form, auth=auth)
        token = answer.get("access_token")
        if not isinstance(token, str):
            raise TokenRejected("its token endpoint answered no access token")
        identity = await self.tokens.verify(token)
        if identity.issuer != config.issuer:
            raise TokenRejected("the access token is another issuer's")
        return identity

    def _failed(self, ctx: PageContext, reason: str) -> Response:
        return self.ui.render(ctx, "login.html", http_status=401, next="/", error=f"Not logged in: {reason}")


def _index(value: Any, count: int) -> int | None:
    try:
        index = int(value)
    except (TypeError, ValueError):
        return None
    return index if 0 <= index < count else None


def _started(cookie: str | None) -> dict[str, Any] | None:
    if not cookie or len(cookie) > MAX_COOKIE:
        return None
    try:
        found = orjson.loads(base64.urlsafe_b64decode(cookie.encode()))
    except (ValueError, orjson.JSONDecodeError):
        return None
    if not isinstance(found, dict) or not all(isinstance(found.get(k), str) for k in ("s", "v", "n")):
        return None
    return found
