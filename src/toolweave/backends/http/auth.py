"""Credentials of an HTTP API: API key (header, query, cookie), bearer, basic, OAuth2 client credentials.

Values come from the config (`${VAR}`) or from a tenant's connection, chosen at
call time: a connection key named like a credential field (`token`, `value`,
`username`, `password`, `client_id`, `client_secret`) replaces that field; any
other key is sent as an HTTP header. A credential left out of the config must
come from each tenant's connection.

OAuth2 tokens are fetched from the token URL on first use, cached per client
(one fetch at a time, however many calls wait for it) and fetched again shortly
before they expire, or at once when the API answers 401.

Secrets never appear in a message: every message names fields, not values, and
`Credentials.secrets` lists the values a caller must scrub from anything it
passes on (an API that echoes a key back in an error body).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import httpx2
import orjson

from toolweave.backends.errors import AuthUnavailable
from toolweave.backends.openapi.convert import supplied_key
from toolweave.common_types import str_at
from toolweave.config.http_api import CREDENTIAL_FIELDS, HttpAuth

TOKEN_MARGIN = 30.0
"""Seconds before an OAuth2 token's expiry at which it is fetched again."""
MAX_TOKEN_RESPONSE = 64 << 10


@dataclass(frozen=True, slots=True)
class AuthPlan:
    """How to authenticate (from the config, completed from the document's `securitySchemes`)."""

    type: str
    name: str | None = None
    location: str | None = None
    token_url: str | None = None
    scopes: tuple[str, ...] = ()
    audience: str | None = None
    client_auth: str = "basic"

    @property
    def param(self) -> tuple[str, str] | None:
        """`(in, name)` of an API key: the document's own parameter for it is not a tool argument."""
        if self.type == "api_key" and self.location and self.name:
            return (self.location, self.name)
        return None


@dataclass(frozen=True, slots=True)
class Credentials:
    """The values for one caller: the config's, or a tenant's connection laid over them."""

    values: Mapping[str, str] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)
    owner: str = "the gateway's config"

    @property
    def secrets(self) -> list[str]:
        return [v for v in (*self.values.values(), *self.headers.values()) if v and len(v) >= 4]

    def over(self, connection: Mapping[str, str], plan: AuthPlan | None, owner: str) -> Credentials:
        fields = CREDENTIAL_FIELDS[plan.type] if plan is not None else ()
        values = dict(self.values)
        headers = dict(self.headers)
        for key, value in connection.items():
            if key in fields:
                values[key] = value
            else:
                headers[key] = value
        return Credentials(values=values, headers=headers, owner=owner)


def plan_auth(auth: HttpAuth | None, document: Mapping[str, Any] | None) -> AuthPlan | None:
    """Raise ValueError (naming what is missing) when the config and the document leave a gap."""
    if auth is None:
        return None
    scheme = _scheme(auth, document)
    if auth.type == "api_key":
        name = auth.name or (scheme.get("name") if scheme.get("type") == "apiKey" else None)
        location = auth.in_ or (scheme.get("in") if scheme.get("type") == "apiKey" else None)
        if not name or location not in ("header", "query", "cookie"):
            raise ValueError(
                "auth type 'api_key' needs 'name' and 'in' (header, query or cookie), "
                "or an apiKey securitySchemes entry in the document to take them from"
            )
        return AuthPlan(type="api_key", name=str(name), location=str(location))
    if auth.type == "oauth2":
        token_url = auth.token_url or _token_url(scheme)
        if not token_url or not str(token_url).startswith(("http://", "https://")):
            raise ValueError(
                "auth type 'oauth2' needs 'token_url', or an oauth2 securitySchemes entry with a "
                "clientCredentials flow in the document to take it from"
            )
        return AuthPlan(
            type="oauth2",
            token_url=str(token_url),
            scopes=tuple(auth.scopes),
            audience=auth.audience,
            client_auth=auth.client_auth,
        )
    return AuthPlan(type=auth.type)


def _scheme(auth: HttpAuth, document: Mapping[str, Any] | None) -> dict[str, Any]:
    if document is None:
        return {}
    schemes = (
        (document.get("components") or {}).get("securitySchemes") or document.get("securityDefinitions") or {}
    )
    if not isinstance(schemes, dict):
        return {}
    if auth.scheme is not None:
        found = schemes.get(auth.scheme)
        if not isinstance(found, dict):
            known = ", ".join(sorted(str(k) for k in schemes)) or "none"
            raise ValueError(
                f"auth.scheme {auth.scheme!r} is not in the document's security schemes ({known})"
            )
        return found
    wanted = {"api_key": "apiKey", "oauth2": "oauth2"}.get(auth.type)
    matching = [s for s in schemes.values() if isinstance(s, dict) and s.get("type") == wanted]
    return matching[0] if len(matching) == 1 else {}


def _token_url(scheme: dict[str, Any]) -> str | None:
    if scheme.get("type") != "oauth2":
        return None
    flows = scheme.get("flows")
    if isinstance(flows, dict) and isinstance(flows.get("clientCredentials"), dict):
        return str_at(flows["clientCredentials"], "tokenUrl", None)
    if scheme.get("flow") == "application":  # Swagger 2.0
        return str_at(scheme, "tokenUrl", None)
    return None


def supplied_parameters(plan: AuthPlan | None, headers: Mapping[str, str]) -> frozenset[tuple[str, str]]:
    """The `(in, name)` of every document parameter the backend's config sends itself: its API key and
    its fixed `headers`. The agent is never asked for them (`ConvertOptions.supplied`)."""
    found = {supplied_key("header", name) for name in headers}
    if plan is not None and plan.param is not None:
        found.add(supplied_key(*plan.param))
    return frozenset(found)


def config_credentials(auth: HttpAuth | None, headers: Mapping[str, str]) -> Credentials:
    values: dict[str, str] = {}
    if auth is not None:
        for name in CREDENTIAL_FIELDS[auth.type]:
            value = auth.credential(name)
            if value:
                values[name] = value
    return Credentials(values=values, headers=dict(headers))


@dataclass(slots=True)
class _Token:
    value: str
    expires: float


class TokenCache:
    """OAuth2 client-credentials tokens, per (token URL, client, scopes); shared by a backend's tenants."""

    def __init__(self) -> None:
        self._tokens: dict[str, _Token] = {}
        self._locks: dict[str, asyncio.Lock] = {}
        self.fetches = 0
        """How many tokens were fetched (for tests and diagnostics)."""

    async def token(
        self, plan: AuthPlan, creds: Credentials, client: httpx2.AsyncClient, *, stale: str | None = None
    ) -> str:
        key = _cache_key(plan, creds)
        found = self._tokens.get(key)
        if found is not None and found.value != stale and found.expires > time.monotonic():
            return found.value
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            found = self._tokens.get(key)
            if found is not None and found.value != stale and found.expires > time.monotonic():
                return found.value
            token = await self._fetch(plan, creds, client)
            self._tokens[key] = token
            return token.value

    async def _fetch(self, plan: AuthPlan, creds: Credentials, client: httpx2.AsyncClient) -> _Token:
        assert plan.token_url is not None
        client_id, secret = creds.values["client_id"], creds.values["client_secret"]
        form = {"grant_type": "client_credentials"}
        if plan.scopes:
            form["scope"] = " ".join(plan.scopes)
        if plan.audience:
            form["audience"] = plan.audience
        headers = {"Accept": "application/json"}
        if plan.client_auth == "basic":
            pair = f"{_form_quote(client_id)}:{_form_quote(secret)}".encode()
            headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
        else:
            form |= {"client_id": client_id, "client_secret": secret}
        self.fetches += 1
        where = httpx2.URL(plan.token_url).host
        try:
            response = await client.post(plan.token_url, data=form, headers=headers)
        except httpx2.HTTPError as error:
            raise AuthUnavailable(
                f"cannot get an OAuth2 token from {where}: {type(error).__name__}"
            ) from None
        body = response.content[:MAX_TOKEN_RESPONSE]
        if response.status_code != 200:
            raise AuthUnavailable(
                f"the OAuth2 token endpoint at {where} refused the client credentials of {creds.owner} "
                f"(HTTP {response.status_code}); check client_id / client_secret"
            )
        try:
            payload = orjson.loads(body)
            token = payload["access_token"]
            lifetime = float(payload.get("expires_in") or 3600)
        except (orjson.JSONDecodeError, KeyError, TypeError, ValueError):
            raise AuthUnavailable(
                f"the OAuth2 token endpoint at {where} answered without an access_token"
            ) from None
        if not isinstance(token, str) or not token:
            raise AuthUnavailable(f"the OAuth2 token endpoint at {where} answered without an access_token")
        margin = min(TOKEN_MARGIN, lifetime / 10)
        return _Token(value=token, expires=time.monotonic() + lifetime - margin)


def _cache_key(plan: AuthPlan, creds: Credentials) -> str:
    secret = hashlib.sha256(creds.values.get("client_secret", "").encode()).hexdigest()
    return "\n".join((plan.token_url or "", creds.values.get("client_id", ""), secret, " ".join(plan.scopes)))


def _form_quote(text: str) -> str:
    from urllib.parse import quote_plus

    return quote_plus(text)


def missing_fields(plan: AuthPlan, creds: Credentials) -> list[str]:
    return [name for name in CREDENTIAL_FIELDS[plan.type] if not creds.values.get(name)]


def missing_message(backend: str, plan: AuthPlan, creds: Credentials, missing: list[str]) -> str:
    example = ", ".join(f'"{name}": "..."' for name in missing)
    return (
        f"backend {backend!r} needs {' and '.join(missing)} for its {plan.type} authentication, and "
        f"{creds.owner} gives none: store it as a connection (PUT /api/v1/connections/{backend} "
        f'with {{"headers": {{{example}}}}}) or set auth.{missing[0]} in the config. Nothing was called.'
    )


async def apply_auth(
    plan: AuthPlan,
    creds: Credentials,
    headers: dict[str, str],
    query: list[tuple[str, str]],
    cookies: list[tuple[str, str]],
    tokens: TokenCache,
    client: httpx2.AsyncClient,
    *,
    stale: str | None = None,
) -> str | None:
    """Add the credential to the request; returns the OAuth2 token used (to refresh it after a 401)."""
    from urllib.parse import quote

    values = creds.values
    if plan.type == "api_key":
        assert plan.name is not None
        if plan.location == "header":
            headers[plan.name] = values["value"]
        elif plan.location == "query":
            query.append((quote(plan.name, safe=""), quote(values["value"], safe="")))
        else:
            cookies.append((plan.name, quote(values["value"], safe="")))
        return None
    if plan.type == "bearer":
        headers["Authorization"] = f"Bearer {values['token']}"
        return None
    if plan.type == "basic":
        pair = f"{values['username']}:{values['password']}".encode()
        headers["Authorization"] = "Basic " + base64.b64encode(pair).decode()
        return None
    token = await tokens.token(plan, creds, client, stale=stale)
    headers["Authorization"] = f"Bearer {token}"
    return token
