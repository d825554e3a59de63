"""The proxy's authorization endpoint: the MCP client's request is checked, the person consents on
the gateway's own page, logs in at the upstream issuer (authorization code + PKCE with the
gateway's pre-registered client), and the MCP client gets the gateway's authorization code.

Three steps, each one-time and stored hashed in the shared database (any replica serves any step):

1. `GET /oauth/authorize`: client, exact redirect URI, PKCE S256, scopes and resource checked; a
   *login* record is stored and the consent page shown. Its id travels in the form and in an
   HttpOnly cookie (SameSite=Lax, path `/oauth`): the POST must carry both, so another site cannot
   consent for the person.
2. `POST /oauth/authorize`: allow → the login record is used up and an *upstream* record (the
   upstream PKCE verifier and state) replaces it, the browser goes to the issuer; deny → the
   client gets `access_denied`.
3. `GET /oauth/proxy/callback`: the state and the cookie must match, the upstream code is exchanged
   and its access token verified as any bearer token of that issuer is; the granted scopes are
   those asked for that the person's token grants. A grant is recorded and a one-time code
   (`code_lifetime`) sent to the client's redirect URI with `state` and `iss` (RFC 9207).

Bad client or redirect URI: an error page (never a redirect to an unverified URI, RFC 6749
§4.1.2.1); anything else: a redirect to the client with a specific `error`.
"""

from __future__ import annotations

import base64
import hashlib
import re
import secrets
import time
from typing import Any
from urllib.parse import urlencode

import httpx
from authlib.oauth2 import OAuth2Error
from authlib.oauth2.rfc7636.challenge import CODE_CHALLENGE_PATTERN
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from toolweave.actor import Actor
from toolweave.config.auth import TOOLWEAVE_SCOPES
from toolweave.identity import Identity, IssuerUnavailable, TokenRejected
from toolweave.identity.fetch import fetch_json
from toolweave.identity.resource import LOGIN_SCOPES
from toolweave.server.oauth_proxy.consent import CONSENT, PROBLEM
from toolweave.server.oauth_proxy.errors import (
    AccessDenied,
    InvalidClient,
    InvalidRedirectUri,
    InvalidRequest,
    InvalidScope,
    InvalidTarget,
    UnsupportedResponseType,
    fail,
    request_actor,
)
from toolweave.store.keys import SERVER_SCOPE_RE
from toolweave.store.oauth_proxy import Grant, ProxyClient

COOKIE = "tw_oauth_login"
COOKIE_PATH = "/oauth"
MAX_STATE = 512
_TOKEN = re.compile(r"^[A-Za-z0-9_-]{20,100}$")


def s256(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()


class AuthorizeFlow:
    def __init__(self, server: Any) -> None:
        self.s = server
        """The `ProxyServer` (config, clients, authority, upstream issuer, URLs)."""

    # 1. the client's request

    async def start(self, request: Request) -> Response:
        params = request.query_params
        try:
            client, redirect_uri = await self._client(params.get("client_id"), params.get("redirect_uri"))
        except OAuth2Error as error:
            return self.problem(error)
        state = params.get("state")
        try:
            if state is not None and len(state) > MAX_STATE:
                state = None
                raise fail(InvalidRequest, f"state is longer than {MAX_STATE} characters")
            login = self._checked(params, client)
        except OAuth2Error as error:
            return self.to_client(error, redirect_uri, state)
        login |= {"redirect_uri": redirect_uri, "state": state}
        login_id = secrets.token_urlsafe(32)
        expires = time.time() + self.s.config.login_lifetime
        await self.s.repository.put_secret("login", login_id, client.client_id, login, expires)
        page = CONSENT.render(
            client_name=client.client.get("client_name") or client.client_id,
            client_id=client.client_id,
            document=client.source == "cimd",
            resource=login["resource"],
            scopes=login["scope"].split(),
            idp=self.s.idp_name,
            redirect_uri=redirect_uri,
            login=login_id,
            action=f"{self.s.base}/oauth/authorize",
        )
        response = HTMLResponse(page, headers=_PAGE_HEADERS)
        self._cookie(response, request, login_id)
        return response

    async def _client(self, client_id: str | None, redirect_uri: str | None) -> tuple[ProxyClient, str]:
        if not client_id:
            raise fail(InvalidRequest, "client_id is required")
        client = await self.s.clients.find(client_id)
        if client is None:
            raise fail(InvalidClient, "unknown client_id (register at the registration endpoint first)")
        registered = client.client.get("redirect_uris") or []
        if redirect_uri is None and len(registered) == 1:
            return client, registered[0]
        if redirect_uri is None:
            raise fail(InvalidRequest, "redirect_uri is required (the client registered several)")
        if redirect_uri not in registered:
            raise fail(InvalidRedirectUri, "redirect_uri is not one the client registered (compared exactly)")
        return client, redirect_uri

    def _checked(self, params: Any, client: ProxyClient) -> dict[str, Any]:
        if params.get("response_type") != "code":
            raise fail(UnsupportedResponseType, "response_type must be 'code'")
        challenge = params.get("code_challenge")
        if not challenge:
            raise fail(InvalidRequest, "code_challenge is required (PKCE with S256)")
        if params.get("code_challenge_method") != "S256":
            raise fail(InvalidRequest, "code_challenge_method must be S256")
        if not CODE_CHALLENGE_PATTERN.match(challenge):
            raise fail(InvalidRequest, "code_challenge is not 43-128 characters of base64url")
        requested = (params.get("scope") or " ".join(LOGIN_SCOPES)).split()
        unknown = [s for s in requested if s not in TOOLWEAVE_SCOPES and not SERVER_SCOPE_RE.match(s)]
        if unknown:
            raise fail(
                InvalidScope,
                f"unknown scope(s) {' '.join(unknown)[:200]}; toolweave's are {' '.join(TOOLWEAVE_SCOPES)}",
            )
        resources = params.getlist("resource")
        if len(resources) > 1:
            raise fail(InvalidTarget, "one resource per request")
        resource = resources[0] if resources else self.s.resource
        if not self.s.tokens.for_gateway(resource):
            raise fail(
                InvalidTarget, f"the resource {resource[:200]!r} is not an MCP endpoint of this gateway"
            )
        return {"challenge": challenge, "scope": " ".join(dict.fromkeys(requested)), "resource": resource}

    # 2. the person's decision

    async def decide(self, request: Request) -> Response:
        form = await request.form()
        login_id = form.get("login")
        cookie = request.cookies.get(COOKIE)
        if not isinstance(login_id, str) or not cookie or not secrets.compare_digest(login_id, cookie):
            return self.problem(
                fail(AccessDenied, "this consent was not given in the browser that started the login")
            )
        taken = await self.s.repository.take_secret("login", login_id)
        if taken is None or taken.reused or taken.expires_at < time.time():
            return self.problem(fail(AccessDenied, "this login is unknown, expired or already decided"))
        login = taken.data
        if form.get("decision") != "allow":
            error = fail(AccessDenied, "the person denied the request")
            return self.to_client(error, login["redirect_uri"], login["state"])
        try:
            endpoint = (await self.s.upstream.metadata()).get("authorization_endpoint")
        except IssuerUnavailable as error:
            return self.to_client(
                fail(AccessDenied, f"{self.s.idp_name} cannot be reached: {error}"),
                login["redirect_uri"],
                login["state"],
            )
        verifier, upstream_state = secrets.token_urlsafe(48), secrets.token_urlsafe(32)
        login |= {"verifier": verifier}
        expires = time.time() + self.s.config.login_lifetime
        await self.s.repository.put_secret("upstream", upstream_state, taken.client_id, login, expires)
        query = {
            "response_type": "code",
            "client_id": self.s.client_id,
            "redirect_uri": self.s.callback_url,
            "scope": " ".join(self.s.config.upstream_scopes),
            "state": upstream_state,
            "code_challenge": s256(verifier),
            "code_challenge_method": "S256",
        }
        if self.s.config.upstream_resource:
            query["resource"] = self.s.upstream.audience
        response = RedirectResponse(
            f"{endpoint}{'&' if '?' in str(endpoint) else '?'}{urlencode(query)}", 303
        )
        self._cookie(response, request, upstream_state)
        return response

    # 3. back from the upstream issuer

    async def callback(self, request: Request) -> Response:
        params = request.query_params
        state, cookie = params.get("state") or "", request.cookies.get(COOKIE) or ""
        if not _TOKEN.match(state) or not secrets.compare_digest(state, cookie):
            return self.problem(
                fail(
                    AccessDenied,
                    "this answer of the identity provider does not belong to this browser's login",
                )
            )
        taken = await self.s.repository.take_secret("upstream", state)
        if taken is None or taken.reused or taken.expires_at < time.time():
            return self.problem(fail(AccessDenied, "this login is unknown, expired or already finished"))
        login = taken.data
        try:
            if "error" in params:
                reason = params.get("error_description") or params["error"]
                raise fail(AccessDenied, f"{self.s.idp_name} refused: {reason[:200]}")
            identity = await self._redeem(params.get("code") or "", login["verifier"])
            actor = request_actor(request, identity.subject, identity.tenant, "ui")
            code = await self._issue(taken.client_id, login, identity, actor)
        except OAuth2Error as error:
            return self.to_client(error, login["redirect_uri"], login["state"])
        response = self._redirect(login["redirect_uri"], {"code": code, "state": login["state"]})
        response.delete_cookie(COOKIE, path=COOKIE_PATH)
        return response

    async def _redeem(self, code: str, verifier: str) -> Identity:
        upstream = self.s.upstream
        try:
            endpoint = (await upstream.metadata()).get("token_endpoint")
            if not isinstance(endpoint, str):
                raise IssuerUnavailable("its discovery document names no token_endpoint")
            form = {
                "grant_type": "authorization_code",
                "code": code,
                "redirect_uri": self.s.callback_url,
                "code_verifier": verifier,
            }
            if self.s.config.upstream_resource:
                form["resource"] = upstream.audience
            auth = (self.s.client_id, self.s.client_secret) if self.s.client_secret else None
            if auth is None:
                form["client_id"] = self.s.client_id
            async with httpx.AsyncClient(follow_redirects=False) as http:
                answer = await fetch_json(http, "POST", endpoint, data=form, auth=auth)
            token = answer.get("access_token")
            if not isinstance(token, str):
                raise TokenRejected("its token endpoint answered no access token")
            identity: Identity = await self.s.tokens.verify(token)
        except (IssuerUnavailable, TokenRejected) as error:
            raise fail(AccessDenied, f"the login at {self.s.idp_name} failed: {error}") from None
        if identity.issuer != upstream.config.issuer:
            raise fail(AccessDenied, "the upstream access token is another issuer's")
        return identity

    async def _issue(self, client_id: str, login: dict[str, Any], identity: Identity, actor: Actor) -> str:
        requested = login["scope"].split()
        granted = [s for s in requested if s in identity.scopes]
        if not granted:
            raise fail(
                AccessDenied,
                f"your account at {self.s.idp_name} grants none of the scopes asked for ({login['scope']})",
            )
        grant = Grant(
            id=secrets.token_hex(16),
            client_id=client_id,
            tenant=identity.tenant,
            subject=identity.subject,
            scope=" ".join(granted),
            resource=login["resource"],
            expires_at=time.time() + self.s.config.refresh_token_lifetime,
            revoked_at=None,
        )
        await self.s.repository.add_grant(grant, actor)
        code = secrets.token_urlsafe(32)
        data = {
            "redirect_uri": login["redirect_uri"],
            "challenge": login["challenge"],
            "resource": login["resource"],
            "scope": grant.scope,
            "idp": identity.issuer,
        }
        expires = time.time() + self.s.config.code_lifetime
        await self.s.repository.put_secret("code", code, client_id, data, expires, grant_id=grant.id)
        return code

    # answers

    def to_client(self, error: OAuth2Error, redirect_uri: str, state: str | None) -> Response:
        query = {"error": error.error, "error_description": error.description or "", "state": state}
        return self._redirect(redirect_uri, query)

    def _redirect(self, redirect_uri: str, query: dict[str, Any]) -> RedirectResponse:
        values = {k: v for k, v in query.items() if v is not None} | {"iss": self.s.issuer}
        joiner = "&" if "?" in redirect_uri else "?"
        return RedirectResponse(f"{redirect_uri}{joiner}{urlencode(values)}", 303, headers=_PAGE_HEADERS)

    def problem(self, error: OAuth2Error) -> Response:
        page = PROBLEM.render(error=error.error, description=error.description or "")
        return HTMLResponse(page, status_code=error.status_code or 400, headers=_PAGE_HEADERS)

    def _cookie(self, response: Response, request: Request, value: str) -> None:
        response.set_cookie(
            COOKIE,
            value,
            max_age=int(self.s.config.login_lifetime),
            path=COOKIE_PATH,
            httponly=True,
            samesite="lax",
            secure=request.url.scheme == "https",
        )


_PAGE_HEADERS = {
    "cache-control": "no-store",
    "x-frame-options": "DENY",
    "content-security-policy": "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
    "referrer-policy": "no-referrer",
}
