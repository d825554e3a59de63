"""MCP clients of the OAuth proxy: dynamic registration (RFC 7591) and Client ID Metadata Documents.

Registration metadata is validated by Authlib's `ClientMetadataClaims`, then held to what the
proxy serves: the authorization code grant (and refresh), `code` responses, `none` or a client
secret at the token endpoint, and redirect URIs that are absolute, fragment-free, and either
https, http on a loopback host (native apps, RFC 8252 §7.3), or a private-use scheme (§7.1).
Registrations are bounded: `max_clients` held and `registrations_per_minute` accepted across the
replicas. A client ID metadata document is fetched (https only, no redirects, 5 s, 16 KiB, not
from a loopback or private address, `FETCHES_AT_ONCE` at a time, counted with registrations) the
first time its URL is used as a `client_id`, must name that URL as its `client_id`, and is kept
an hour.
"""

from __future__ import annotations

import asyncio
import ipaddress
import secrets
import time
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import httpx
from authlib.oauth2.rfc7591 import ClientMetadataClaims
from joserfc.errors import JoseError

from toolweave.actor import Actor
from toolweave.config.auth import ProxyConfig
from toolweave.identity.errors import IssuerUnavailable
from toolweave.identity.fetch import fetch_json
from toolweave.server.oauth_proxy.errors import (
    InvalidClient,
    InvalidClientMetadata,
    InvalidRedirectUri,
    TemporarilyUnavailable,
    fail,
)
from toolweave.store.oauth_proxy import OAuthProxyRepository, ProxyClient, secret_hash

AUTH_METHODS = ("none", "client_secret_basic", "client_secret_post")
GRANT_TYPES = ("authorization_code", "refresh_token")
MAX_REDIRECT_URIS = 10
MAX_URI_CHARS = 2000
MAX_DOCUMENT_BYTES = 16 * 1024
FETCHES_AT_ONCE = 4
"""Client metadata documents fetched at once; an authorization request past it is refused (429)."""
DOCUMENT_SECONDS = 3600.0
"""How long a fetched client metadata document is used before it is fetched again."""
FORBIDDEN_SCHEMES = frozenset({"javascript", "data", "file", "vbscript", "about", "blob", "ftp", "ws", "wss"})
KEPT = ("client_name", "client_uri", "logo_uri", "redirect_uris", "grant_types", "response_types")


def check_redirect_uri(uri: Any) -> str:
    """`uri` when the proxy would redirect a browser to it with a code, else `InvalidRedirectUri`."""
    if not isinstance(uri, str) or not uri or len(uri) > MAX_URI_CHARS:
        raise fail(InvalidRedirectUri, f"a redirect URI is a string of 1-{MAX_URI_CHARS} characters")
    parts = urlsplit(uri)
    scheme = parts.scheme.lower()
    if not scheme or "#" in uri:
        raise fail(InvalidRedirectUri, f"{uri!r} is not an absolute URI without a fragment")
    if scheme in FORBIDDEN_SCHEMES:
        raise fail(InvalidRedirectUri, f"{uri!r}: the {scheme} scheme cannot be a redirect URI")
    if scheme == "http" and not _loopback(parts.hostname or ""):
        raise fail(InvalidRedirectUri, f"{uri!r}: plain http is allowed on loopback hosts only; use https")
    if scheme in ("http", "https") and not parts.hostname:
        raise fail(InvalidRedirectUri, f"{uri!r} names no host")
    return uri


def _loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def client_metadata(document: Any) -> dict[str, Any]:
    """The validated metadata of a registration request or a metadata document."""
    if not isinstance(document, dict):
        raise fail(InvalidClientMetadata, "the client metadata is not a JSON object")
    uris = document.get("redirect_uris")
    if not isinstance(uris, list) or not uris:
        raise fail(InvalidRedirectUri, "redirect_uris is required: the authorization code grant needs one")
    if len(uris) > MAX_REDIRECT_URIS:
        raise fail(InvalidRedirectUri, f"at most {MAX_REDIRECT_URIS} redirect_uris")
    redirect_uris = [check_redirect_uri(uri) for uri in uris]
    claims = ClientMetadataClaims(dict(document), {})
    try:
        claims.validate()
    except (JoseError, ValueError) as error:
        raise fail(InvalidClientMetadata, getattr(error, "description", None) or str(error)) from None
    method = document.get("token_endpoint_auth_method", "client_secret_basic")
    if method not in AUTH_METHODS:
        raise fail(
            InvalidClientMetadata,
            f"token_endpoint_auth_method {method!r} is not supported ({', '.join(AUTH_METHODS)})",
        )
    grants = document.get("grant_types", ["authorization_code"])
    if not isinstance(grants, list) or "authorization_code" not in grants or set(grants) - set(GRANT_TYPES):
        raise fail(
            InvalidClientMetadata, f"grant_types must include authorization_code, within {GRANT_TYPES}"
        )
    responses = document.get("response_types", ["code"])
    if responses != ["code"]:
        raise fail(InvalidClientMetadata, "response_types must be ['code'] (the authorization code grant)")
    name = document.get("client_name", "")
    if not isinstance(name, str) or len(name) > 200:
        raise fail(InvalidClientMetadata, "client_name must be a string of at most 200 characters")
    kept = {key: document[key] for key in KEPT if key in document}
    return {
        **kept,
        "redirect_uris": redirect_uris,
        "grant_types": grants,
        "response_types": ["code"],
        "token_endpoint_auth_method": method,
    }


class Clients:
    """Registered and metadata-document clients, in the shared database."""

    def __init__(self, config: ProxyConfig, repository: Callable[[], OAuthProxyRepository]) -> None:
        self.config = config
        self._repository = repository
        self._http = httpx.AsyncClient(follow_redirects=False)
        self._fetching = asyncio.Semaphore(FETCHES_AT_ONCE)

    @property
    def repository(self) -> OAuthProxyRepository:
        return self._repository()

    async def register(self, document: Any, actor: Actor | None = None) -> dict[str, Any]:
        """RFC 7591: a new client; the answer (with its secret, shown once, for a confidential one)."""
        metadata = client_metadata(document)
        held, recent = await self.repository.client_counts(time.time() - 60)
        if held >= self.config.max_clients:
            raise fail(
                TemporarilyUnavailable,
                f"this gateway holds its maximum of {self.config.max_clients} registered clients",
            )
        if recent >= self.config.registrations_per_minute:
            raise fail(
                TemporarilyUnavailable,
                f"more than {self.config.registrations_per_minute} registrations in the last minute; retry later",
            )
        client_id = f"twc_{secrets.token_urlsafe(18)}"
        secret = None
        if metadata["token_endpoint_auth_method"] != "none":
            secret = f"tws_{secrets.token_urlsafe(32)}"
        await self.repository.put_client(
            ProxyClient(client_id, secret_hash(secret) if secret else None, metadata, "dcr", None), actor
        )
        answer = {**metadata, "client_id": client_id, "client_id_issued_at": int(time.time())}
        if secret:
            answer |= {"client_secret": secret, "client_secret_expires_at": 0}
        return answer

    async def find(self, client_id: str) -> ProxyClient | None:
        """The client `client_id` names (a metadata document URL is fetched when first seen)."""
        if not client_id or len(client_id) > 512:
            return None
        found = await self.repository.client(client_id)
        if found is not None and (found.expires_at is None or found.expires_at > time.time()):
            return found
        if not self.is_document_url(client_id):
            return None
        return await self._fetch_document(client_id)

    def is_document_url(self, client_id: str) -> bool:
        if not self.config.client_metadata_documents:
            return False
        parts = urlsplit(client_id)
        schemes = ("https", "http") if self.config.allow_http_client_metadata else ("https",)
        return parts.scheme in schemes and bool(parts.hostname) and parts.path not in ("", "/")

    async def _fetch_document(self, url: str) -> ProxyClient:
        host = urlsplit(url).hostname or ""
        if not self.config.allow_http_client_metadata and _private(host):
            raise fail(InvalidClient, f"the client metadata document {url} is on a private address")
        held, recent = await self.repository.client_counts(time.time() - 60)
        if recent >= self.config.registrations_per_minute or self._fetching.locked():
            raise fail(TemporarilyUnavailable, "too many new clients at once; retry in a minute")
        try:
            async with self._fetching:
                document = await fetch_json(self._http, "GET", url, max_bytes=MAX_DOCUMENT_BYTES)
        except IssuerUnavailable as error:
            raise fail(InvalidClient, f"the client metadata document cannot be fetched: {error}") from None
        if document.get("client_id") != url:
            raise fail(
                InvalidClient, f"the client metadata document at {url} does not name itself as client_id"
            )
        metadata = client_metadata({"token_endpoint_auth_method": "none", **document})
        if metadata["token_endpoint_auth_method"] != "none":
            raise fail(InvalidClient, "a client metadata document client authenticates with 'none' here")
        if held >= self.config.max_clients:
            raise fail(
                TemporarilyUnavailable,
                f"this gateway holds its maximum of {self.config.max_clients} clients",
            )
        client = ProxyClient(url, None, metadata, "cimd", time.time() + DOCUMENT_SECONDS)
        await self.repository.put_client(client)
        return client

    async def aclose(self) -> None:
        await self._http.aclose()


def _private(host: str) -> bool:
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        return False
    return address.is_private or address.is_loopback or address.is_link_local or address.is_reserved


def authenticate(client: ProxyClient | None, secret: str | None) -> ProxyClient:
    """The token and revocation endpoints' client authentication (RFC 6749 §2.3)."""
    if client is None:
        raise fail(InvalidClient, "unknown client_id (register at the registration endpoint first)", 401)
    if client.secret_hash is None:
        if secret:
            raise fail(InvalidClient, "this client is public: it sends no client_secret", 401)
        return client
    if not secret or not secrets.compare_digest(secret_hash(secret), client.secret_hash):
        raise fail(InvalidClient, "the client_secret is missing or wrong", 401)
    return client
