"""The proxy's token endpoint (authorization code and refresh token grants) and revocation (RFC 7009).

A code is redeemed once: the conditional UPDATE in the store lets exactly one request use it; a
second use revokes the whole grant (RFC 6749 §4.1.2: tokens issued from a stolen code die too).
The redirect URI must equal the authorization request's, the PKCE verifier must hash (S256) to its
challenge, and a `resource` (RFC 8707) must be the one the code was issued for. Refresh tokens
rotate: each is used once, and a replayed one revokes its grant (RFC 9700 §4.14.2). A grant lives
`refresh_token_lifetime` from the login at most; access tokens `access_token_lifetime`.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import secrets
import time
from typing import Any, Protocol
from urllib.parse import unquote

from authlib.oauth2 import OAuth2Error
from authlib.oauth2.rfc7636.challenge import CODE_VERIFIER_PATTERN, compare_s256_code_challenge
from starlette.datastructures import FormData
from starlette.requests import Request
from starlette.responses import JSONResponse, Response

from toolweave.actor import Actor
from toolweave.identity import TokenRejected
from toolweave.identity.proxy import ProxyAuthority
from toolweave.server.oauth_proxy.clients import Clients, authenticate
from toolweave.server.oauth_proxy.errors import (
    NO_STORE,
    InvalidClient,
    InvalidGrant,
    InvalidRequest,
    InvalidScope,
    InvalidTarget,
    UnauthorizedClient,
    UnsupportedGrantType,
    error_response,
    fail,
    request_actor,
)
from toolweave.store.oauth_proxy import Grant, OAuthProxyRepository, ProxyClient, Taken

MAX_FORM_BYTES = 16 * 1024


class ProxyParts(Protocol):
    """What the token endpoint uses of the proxy (`OAuthProxy`, which imports this module)."""

    @property
    def authority(self) -> ProxyAuthority: ...

    @property
    def clients(self) -> Clients: ...

    @property
    def repository(self) -> OAuthProxyRepository: ...


class TokenEndpoint:
    def __init__(self, server: ProxyParts) -> None:
        self.s = server

    async def token(self, request: Request) -> Response:
        try:
            form = await _form(request)
            client = await self._client(request, form)
            grant_type = form.get("grant_type")
            actor = request_actor(request, f"client:{client.client_id}", None)
            if grant_type == "authorization_code":
                return await self._code(form, client, actor)
            if grant_type == "refresh_token":
                return await self._refresh(form, client, actor)
            raise fail(UnsupportedGrantType, "grant_type must be authorization_code or refresh_token")
        except OAuth2Error as error:
            return error_response(error)

    async def revoke(self, request: Request) -> Response:
        """RFC 7009: ends the grant of a refresh or access token; 200 for an unknown token too."""
        try:
            form = await _form(request)
            client = await self._client(request, form)
            token = form.get("token")
            if not isinstance(token, str) or not token:
                raise fail(InvalidRequest, "token is required")
            grant_id, owner = await self._grant_of(token)
            if grant_id is not None:
                if owner != client.client_id:
                    raise fail(UnauthorizedClient, "the token was issued to another client")
                actor = request_actor(request, f"client:{client.client_id}", None)
                await self.s.authority.revoke(grant_id, actor, "revoked by its client (RFC 7009)")
        except OAuth2Error as error:
            return error_response(error)
        return Response(status_code=200, headers=NO_STORE)

    async def _grant_of(self, token: str) -> tuple[str | None, str | None]:
        if token.count(".") == 2:
            try:
                claims = await self.s.authority.decode(token, None)
            except TokenRejected:
                return None, None
            return str(claims.get("gid")), str(claims.get("client_id"))
        found = await self.s.repository.peek_secret("refresh", token)
        return (found.grant_id, found.client_id) if found is not None else (None, None)

    async def _client(self, request: Request, form: FormData) -> ProxyClient:
        client_id, secret = _basic(request)
        if client_id is None:
            client_id = form.get("client_id")  # type: ignore[assignment]
            secret = form.get("client_secret")  # type: ignore[assignment]
        elif form.get("client_secret"):
            raise fail(InvalidRequest, "one client authentication method per request")
        if not isinstance(client_id, str) or not client_id:
            raise fail(InvalidClient, "client_id is required (in the form, or HTTP Basic)", 401)
        return authenticate(await self.s.clients.find(client_id), secret if isinstance(secret, str) else None)

    async def _code(self, form: FormData, client: ProxyClient, actor: Actor) -> Response:
        code = form.get("code")
        if not isinstance(code, str) or not code:
            raise fail(InvalidRequest, "code is required")
        taken = await self.s.repository.take_secret("code", code)
        if taken is None:
            raise fail(InvalidGrant, "the authorization code is unknown")
        if taken.reused:
            if taken.grant_id:
                await self.s.authority.revoke(taken.grant_id, actor, "its authorization code was used twice")
            raise fail(
                InvalidGrant, "the authorization code was already used: the tokens issued with it are revoked"
            )
        data = taken.data
        if taken.expires_at < time.time():
            raise fail(InvalidGrant, "the authorization code has expired")
        if taken.client_id != client.client_id:
            raise fail(InvalidGrant, "the authorization code was issued to another client")
        if form.get("redirect_uri") != data["redirect_uri"]:
            raise fail(InvalidGrant, "redirect_uri differs from the authorization request's")
        verifier = form.get("code_verifier")
        if not isinstance(verifier, str) or not CODE_VERIFIER_PATTERN.match(verifier):
            raise fail(InvalidRequest, "code_verifier is required: 43-128 characters of [A-Za-z0-9-._~]")
        if not compare_s256_code_challenge(verifier, data["challenge"]):
            raise fail(InvalidGrant, "the code_verifier does not match the code_challenge (PKCE S256)")
        _same_resource(form, data["resource"])
        grant = await self._live_grant(taken)
        return await self._tokens(grant, client, data["scope"], data["idp"])

    async def _refresh(self, form: FormData, client: ProxyClient, actor: Actor) -> Response:
        token = form.get("refresh_token")
        if not isinstance(token, str) or not token:
            raise fail(InvalidRequest, "refresh_token is required")
        taken = await self.s.repository.take_secret("refresh", token)
        if taken is None:
            raise fail(InvalidGrant, "the refresh token is unknown, revoked or expired")
        if taken.client_id != client.client_id:
            raise fail(InvalidGrant, "the refresh token was issued to another client")
        if taken.reused:
            if taken.grant_id:
                await self.s.authority.revoke(
                    taken.grant_id, actor, "a used refresh token was presented again"
                )
            raise fail(InvalidGrant, "the refresh token was already used: its grant is revoked (replay)")
        if taken.expires_at < time.time():
            raise fail(InvalidGrant, "the refresh token has expired: log in again")
        grant = await self._live_grant(taken)
        _same_resource(form, grant.resource)
        scope = grant.scope
        asked = form.get("scope")
        if isinstance(asked, str) and asked:
            extra = set(asked.split()) - set(grant.scope.split())
            if extra:
                raise fail(InvalidScope, f"scope(s) {' '.join(sorted(extra))[:200]} were not granted")
            scope = " ".join(s for s in grant.scope.split() if s in asked.split())
        return await self._tokens(grant, client, scope, taken.data["idp"])

    async def _live_grant(self, taken: Taken) -> Grant:
        grant = await self.s.repository.grant(taken.grant_id or "")
        if grant is None or not grant.live:
            raise fail(InvalidGrant, "the grant has been revoked or has expired: log in again")
        return grant

    async def _tokens(self, grant: Grant, client: ProxyClient, scope: str, idp: str) -> Response:
        granted = dataclasses.replace(grant, scope=scope)
        access, lifetime = await self.s.authority.mint(granted, client.client_id, scope, idp)
        body: dict[str, Any] = {
            "access_token": access,
            "token_type": "Bearer",
            "expires_in": lifetime,
            "scope": scope,
        }
        if "refresh_token" in client.client.get("grant_types", ()):
            refresh = secrets.token_urlsafe(32)
            await self.s.repository.put_secret(
                "refresh", refresh, client.client_id, {"idp": idp}, grant.expires_at, grant_id=grant.id
            )
            body["refresh_token"] = refresh
        return JSONResponse(body, headers=NO_STORE)


def _same_resource(form: FormData, resource: str) -> None:
    resources = form.getlist("resource")
    if len(resources) > 1 or (resources and resources[0] != resource):
        raise fail(InvalidTarget, f"resource must be {resource} (the one this grant is for)")


async def _form(request: Request) -> FormData:
    if request.method != "POST":
        raise fail(InvalidRequest, "POST the request as application/x-www-form-urlencoded", 405)
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if kind != "application/x-www-form-urlencoded":
        raise fail(InvalidRequest, "the body must be application/x-www-form-urlencoded")
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_FORM_BYTES:
        raise fail(InvalidRequest, f"the body is larger than {MAX_FORM_BYTES} bytes")
    form = await request.form(max_files=0, max_fields=32)
    for name in ("grant_type", "code", "redirect_uri", "code_verifier", "refresh_token", "token"):
        if len(form.getlist(name)) > 1:
            raise fail(InvalidRequest, f"{name} appears more than once")
    return form


def _basic(request: Request) -> tuple[str | None, str | None]:
    header = request.headers.get("authorization", "")
    kind, _, value = header.partition(" ")
    if kind.lower() != "basic":
        return None, None
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode()
    except (binascii.Error, UnicodeDecodeError):
        raise fail(InvalidClient, "the Basic authorization header is malformed", 401) from None
    client_id, sep, secret = decoded.partition(":")
    if not sep:
        raise fail(InvalidClient, "the Basic authorization header is malformed", 401)
    return unquote(client_id), unquote(secret)  # RFC 6749 §2.3.1: form-encoded, then Basic
