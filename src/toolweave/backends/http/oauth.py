"""Where an HTTP API's users authorize it (`[backends.oauth]` on an `openapi`/`http` backend).

The authorization server and the scopes come from, in order:

- the OpenAPI document's security scheme (`[backends.oauth] scheme`, else the one `oauth2` scheme
  with an `authorizationCode` flow, or the one `openIdConnect` scheme): an `oauth2` flow names its
  `authorizationUrl`, `tokenUrl` and scopes; `openIdConnect` names a discovery document, fetched;
- `issuer` in `[backends.oauth]`: its RFC 8414 or OpenID metadata, fetched (for `http` backends,
  which have no document, and to name the issuer an `oauth2` flow leaves unsaid).

Scopes: the configured `scopes`, else every scope the document's operations require of the scheme
(`openid` added for an `openIdConnect` scheme, which cannot do without it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import httpx2
from mcp.client.auth.utils import build_oauth_authorization_server_metadata_discovery_urls
from mcp.shared.auth import OAuthMetadata
from pydantic import ValidationError

from toolweave.bounded import read_bounded
from toolweave.config.oauth import BackendOAuth

MAX_METADATA_BYTES = 256 << 10


@dataclass(frozen=True, slots=True)
class ApiAuthServer:
    """The authorization server of an HTTP API, as the token flow needs it."""

    metadata: OAuthMetadata
    scope: str | None
    """What an authorization asks for (space-separated), None: nothing in particular."""
    source: str
    """Where it came from, for messages: `securitySchemes.x` or the issuer."""


async def api_auth_server(
    oauth: BackendOAuth, document: dict[str, Any] | None, client: httpx2.AsyncClient
) -> ApiAuthServer:
    """Raise ValueError naming what is missing (a config that does not fit the document)."""
    name, scheme = _scheme(oauth, document) if document is not None else (None, None)
    scopes = list(oauth.scopes or [])
    if scheme is not None and scheme.get("type") == "openIdConnect":
        metadata = await _fetch_metadata([str(scheme.get("openIdConnectUrl") or "")], client, None)
        if not oauth.scopes:
            scopes = ["openid", *(s for s in _required_scopes(document, name) if s != "openid")]
    elif scheme is not None:
        flow = scheme.get("flows", {}).get("authorizationCode") if "flows" in scheme else scheme
        if oauth.issuer is not None:
            found = await _discover(oauth.issuer, client)
            metadata = _overlay(found, flow)
        else:
            metadata = _from_flow(flow, name)
        if not oauth.scopes:
            scopes = _required_scopes(document, name)
    else:
        assert oauth.issuer is not None, "config validation: an 'http' backend's oauth names its issuer"
        metadata = await _discover(oauth.issuer, client)
    source = f"securitySchemes.{name}" if name is not None else str(metadata.issuer)
    return ApiAuthServer(metadata, " ".join(scopes) or None, source)


def _scheme(oauth: BackendOAuth, document: dict[str, Any]) -> tuple[str | None, dict[str, Any] | None]:
    schemes = (document.get("components") or {}).get("securitySchemes") or document.get("securityDefinitions")
    schemes = schemes if isinstance(schemes, dict) else {}
    if oauth.scheme is not None:
        found = schemes.get(oauth.scheme)
        if not isinstance(found, dict) or not _user_scheme(found):
            raise ValueError(
                f"[backends.oauth] scheme {oauth.scheme!r} is not an oauth2 (authorization code) or "
                f"openIdConnect security scheme of the document (it has: {_names(schemes)})"
            )
        return oauth.scheme, found
    usable = {name: s for name, s in schemes.items() if isinstance(s, dict) and _user_scheme(s)}
    if len(usable) == 1:
        return next(iter(usable.items()))
    if len(usable) > 1:
        raise ValueError(
            f"the document has several security schemes a user can authorize ({_names(usable)}); "
            "name one with [backends.oauth] scheme"
        )
    if oauth.issuer is None:
        raise ValueError(
            "the document has no oauth2 security scheme with an authorizationCode flow and no "
            f"openIdConnect one (it has: {_names(schemes)}); set [backends.oauth] issuer to the API's "
            "authorization server"
        )
    return None, None


def _user_scheme(scheme: dict[str, Any]) -> bool:
    """A scheme a person authorizes: `openIdConnect`, or `oauth2` with an authorization code flow."""
    if scheme.get("type") == "openIdConnect":
        return isinstance(scheme.get("openIdConnectUrl"), str)
    if scheme.get("type") != "oauth2":
        return False
    flows = scheme.get("flows")
    if isinstance(flows, dict):
        return isinstance(flows.get("authorizationCode"), dict)
    return scheme.get("flow") == "accessCode"  # Swagger 2.0


def _names(schemes: dict[str, Any]) -> str:
    return ", ".join(sorted(str(name) for name in schemes)) or "none"


def _from_flow(flow: dict[str, Any], name: str | None) -> OAuthMetadata:
    authorize, token = flow.get("authorizationUrl"), flow.get("tokenUrl")
    if not isinstance(authorize, str) or not isinstance(token, str):
        raise ValueError(
            f"securitySchemes.{name}: the authorization code flow needs authorizationUrl and tokenUrl"
        )
    parts = urlsplit(authorize)
    try:
        return OAuthMetadata.model_validate(
            {
                # RFC 9207 `iss` is checked against this: the flow names no issuer, so its origin
                # stands in; set [backends.oauth] issuer where the server's issuer has a path
                "issuer": f"{parts.scheme}://{parts.netloc}",
                "authorization_endpoint": authorize,
                "token_endpoint": token,
                "code_challenge_methods_supported": ["S256"],
            }
        )
    except ValidationError:
        raise ValueError(
            f"securitySchemes.{name}: authorizationUrl and tokenUrl must be absolute http(s) URLs"
        ) from None


def _overlay(found: OAuthMetadata, flow: dict[str, Any]) -> OAuthMetadata:
    """The issuer's metadata, with the endpoints the document's flow names where it names them."""
    changes = {
        key: flow[source]
        for key, source in (("authorization_endpoint", "authorizationUrl"), ("token_endpoint", "tokenUrl"))
        if isinstance(flow.get(source), str)
    }
    return OAuthMetadata.model_validate({**found.model_dump(mode="json", exclude_none=True), **changes})


async def _discover(issuer: str, client: httpx2.AsyncClient) -> OAuthMetadata:
    urls = build_oauth_authorization_server_metadata_discovery_urls(issuer, issuer)
    return await _fetch_metadata(urls, client, issuer)


async def _fetch_metadata(urls: list[str], client: httpx2.AsyncClient, issuer: str | None) -> OAuthMetadata:
    """The first authorization server metadata found at `urls` (its `issuer` must be `issuer`)."""
    tried: list[str] = []
    for url in urls:
        if not url.startswith(("http://", "https://")):
            raise ValueError(f"the OpenID discovery URL {url!r} is not an absolute http(s) URL")
        try:
            async with client.stream("GET", url, headers={"Accept": "application/json"}) as response:
                body = (
                    await read_bounded(response, MAX_METADATA_BYTES) if response.status_code == 200 else None
                )
                status = response.status_code
        except httpx2.HTTPError as error:
            tried.append(f"{url}: {type(error).__name__}")
            continue
        if body is None:
            tried.append(f"{url}: HTTP {status}" + (" (too large)" if status == 200 else ""))
            continue
        try:
            metadata = OAuthMetadata.model_validate_json(body)
        except ValidationError:
            tried.append(f"{url}: not authorization server metadata")
            continue
        if issuer is not None and str(metadata.issuer).rstrip("/") != issuer.rstrip("/"):
            raise ValueError(f"{url} names issuer {metadata.issuer}, not the configured {issuer}")
        return metadata
    raise ValueError("no authorization server metadata found (" + "; ".join(tried) + ")")


def _required_scopes(document: dict[str, Any] | None, name: str | None) -> list[str]:
    """Every scope the document's operations (or its top-level `security`) require of scheme `name`."""
    if document is None or name is None:
        return []
    requirements: list[Any] = list(document.get("security") or [])
    for item in (document.get("paths") or {}).values():
        if isinstance(item, dict):
            for operation in item.values():
                if isinstance(operation, dict):
                    requirements.extend(operation.get("security") or [])
    found: list[str] = []
    for requirement in requirements:
        scopes = requirement.get(name) if isinstance(requirement, dict) else None
        for scope in scopes if isinstance(scopes, list) else []:
            if isinstance(scope, str) and scope not in found:
                found.append(scope)
    return found
