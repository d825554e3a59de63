"""One trusted issuer: its discovery document and signing keys, fetched lazily, cached and refreshed.

Discovery tries `/.well-known/openid-configuration` (OpenID Connect), then RFC 8414's
`/.well-known/oauth-authorization-server` (path inserted after the host), and checks the document
names this very issuer. Keys are fetched once and again only when a token names a key id the set
lacks (the issuer rotated), at most every `REFRESH_SECONDS` and one fetch at a time, so forged key
ids cannot make the gateway hammer the issuer. When the issuer cannot be reached its tokens fail
closed (`IssuerUnavailable`); nothing here touches API keys or other issuers.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any
from urllib.parse import urlsplit

import httpx
from joserfc.errors import JoseError
from joserfc.jwk import KeySet

from toolweave.config.auth import IssuerConfig
from toolweave.identity.errors import IssuerUnavailable
from toolweave.identity.fetch import fetch_json

REFRESH_SECONDS = 30.0
"""Least time between two fetches of one issuer's documents (a failed fetch waits as long)."""
METADATA_SECONDS = 3600.0
"""How long a discovery document is used before it is fetched again."""


def discovery_urls(issuer: str) -> list[str]:
    """Where an issuer's metadata may be: OpenID Connect's suffix, then RFC 8414's inserted path."""
    base = issuer.rstrip("/")
    parts = urlsplit(base)
    return [
        f"{base}/.well-known/openid-configuration",
        f"{parts.scheme}://{parts.netloc}/.well-known/oauth-authorization-server{parts.path}",
    ]


class Issuer:
    """The documents of one `[[auth.issuers]]` entry, as this gateway last fetched them."""

    def __init__(self, config: IssuerConfig, audience: str, client: httpx.AsyncClient) -> None:
        self.config = config
        self.audience = audience
        self._client = client
        self._metadata: dict[str, Any] | None = None
        self._metadata_at = 0.0
        self._keys: KeySet | None = None
        self._last_try = -REFRESH_SECONDS
        self._last_error = ""
        self._lock = asyncio.Lock()

    @property
    def name(self) -> str:
        return self.config.name or urlsplit(self.config.issuer).netloc

    async def metadata(self) -> dict[str, Any]:
        """The issuer's discovery document (cached for `METADATA_SECONDS`)."""
        if self._metadata is not None and time.monotonic() - self._metadata_at < METADATA_SECONDS:
            return self._metadata
        problems: list[str] = []
        for url in discovery_urls(self.config.issuer):
            try:
                document = await fetch_json(self._client, "GET", url)
            except IssuerUnavailable as error:
                problems.append(str(error))
                continue
            if document.get("issuer") != self.config.issuer:
                problems.append(f"{url} names issuer {document.get('issuer')!r}, not {self.config.issuer!r}")
                continue
            self._metadata, self._metadata_at = document, time.monotonic()
            return document
        if self._metadata is not None:
            return self._metadata  # stale beats none: the keys decide what is trusted
        raise IssuerUnavailable("; ".join(problems))

    async def keys(self, kid: str | None) -> KeySet:
        """The signing keys, fetched again first when `kid` is not among them (and the last fetch is old)."""
        known = self._keys
        if known is not None and (kid is None or has_kid(known, kid)):
            return known
        async with self._lock:
            known = self._keys
            if known is not None and (kid is None or has_kid(known, kid)):
                return known  # another request fetched them meanwhile
            if time.monotonic() - self._last_try < REFRESH_SECONDS:
                if known is not None:
                    return known  # the token's key id is unknown: verification says so
                raise IssuerUnavailable(self._last_error or "its keys were fetched moments ago")
            self._last_try = time.monotonic()
            try:
                self._keys = await self._fetch_keys()
            except IssuerUnavailable as error:
                self._last_error = str(error)
                if known is None:
                    raise
                return known
            return self._keys

    async def _fetch_keys(self) -> KeySet:
        uri = self.config.jwks_uri or (await self.metadata()).get("jwks_uri")
        if not isinstance(uri, str) or not uri:
            raise IssuerUnavailable(f"the discovery document of {self.config.issuer} names no jwks_uri")
        document = await fetch_json(self._client, "GET", uri)
        try:
            return KeySet.import_key_set(document)  # type: ignore[arg-type]
        except (JoseError, ValueError, TypeError, KeyError) as error:
            raise IssuerUnavailable(f"{uri} is not a usable JWK set ({error})") from None

    async def introspect(self, token: str) -> dict[str, Any]:
        """RFC 7662: the issuer's verdict on an opaque token (bounded like every fetch)."""
        endpoint = self.config.introspection_endpoint
        auth = (self.config.client_id, self.config.client_secret) if self.config.client_id else None
        return await fetch_json(
            self._client,
            "POST",
            endpoint,
            data={"token": token, "token_type_hint": "access_token"},
            auth=auth,
        )


def has_kid(keys: KeySet, kid: str) -> bool:
    return any(key.kid == kid for key in keys.keys)
