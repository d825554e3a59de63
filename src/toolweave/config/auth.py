"""The `[auth]` table: whether a credential is required, and the OpenID/OAuth issuers whose access
tokens the gateway accepts beside its API keys (docs/auth.md)."""

from __future__ import annotations

import re
from typing import Any

from pydantic import Field, field_validator, model_validator

from toolweave.fields import Duration, StrictModel

TOOLWEAVE_SCOPES = ("tools:read", "tools:call", "tools:admin", "tools:federate")
ASYMMETRIC_ALGORITHMS = (
    "RS256",
    "RS384",
    "RS512",
    "PS256",
    "PS384",
    "PS512",
    "ES256",
    "ES384",
    "ES512",
    "EdDSA",
)
"""Signature algorithms an access token may use: public-key ones only (never `none`, never an HMAC
that a public key could be fed to as the secret)."""
_SERVER = re.compile(r"^servers:[a-z0-9][a-z0-9_-]{0,63}$")
"""A virtual server's scope (the store checks keys' scopes with the same pattern)."""


def _http_url(value: str, what: str) -> str:
    value = value.strip()
    if value and not value.startswith(("https://", "http://")):
        raise ValueError(f"{what} must be an http(s) URL, not {value!r}")
    return value


class IssuerConfig(StrictModel):
    """One `[[auth.issuers]]`: an OpenID Provider / OAuth authorization server trusted to say who calls."""

    issuer: str
    """The issuer identifier, exactly as its tokens' `iss` claim says it."""
    audience: str = ""
    """The `aud` its tokens must carry (RFC 8707 resource); empty: `gateway.public_url` + `/mcp`."""
    tenant_claim: str = "tenant"
    """The claim naming the caller's tenant: whoever controls it decides which tenant a caller is."""
    default_tenant: str = ""
    """The tenant of a token without the tenant claim; empty: such a token is refused."""
    scopes_claim: list[str] = Field(default_factory=lambda: ["scope", "scp"])
    """Claims read for scopes (space-separated strings or lists): `scope`, `scp`, `roles`, `groups`..."""
    scope_map: dict[str, list[str]] = Field(default_factory=dict)
    """An IdP scope, role or group name → the toolweave scopes it grants (toolweave's own names pass as is)."""
    jwks_uri: str = ""
    """Where its signing keys are; empty: from its discovery document."""
    introspection_endpoint: str = ""
    """RFC 7662 endpoint for opaque (non-JWT) tokens; empty: opaque tokens are not accepted."""
    client_id: str = ""
    """This gateway's client at the issuer: authenticates introspection, and the UI's "Log in with"."""
    client_secret: str = ""
    name: str = ""
    """Shown on the UI's login button ("Log in with <name>"); empty: the issuer's host."""
    algorithms: list[str] = Field(default_factory=lambda: list(ASYMMETRIC_ALGORITHMS))
    leeway: Duration = 30.0
    """Clock skew allowed on `exp`, `nbf` and `iat`."""

    @field_validator("issuer")
    @classmethod
    def _issuer_url(cls, value: str) -> str:
        value = _http_url(value, "issuer")
        if not value:
            raise ValueError("issuer is required: the URL its tokens' `iss` claim names")
        return value

    @field_validator("audience", "jwks_uri", "introspection_endpoint")
    @classmethod
    def _urls(cls, value: str, info: Any) -> str:
        return _http_url(value, info.field_name)

    @field_validator("tenant_claim")
    @classmethod
    def _claim_name(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("tenant_claim names a claim (default 'tenant')")
        return value.strip()

    @field_validator("scopes_claim", mode="before")
    @classmethod
    def _one_or_many(cls, value: Any) -> Any:
        return [value] if isinstance(value, str) else value

    @field_validator("scope_map")
    @classmethod
    def _known_scopes(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        unknown = sorted(
            {
                s
                for granted in value.values()
                for s in granted
                if s not in TOOLWEAVE_SCOPES and not _SERVER.match(s)
            }
        )
        if unknown:
            raise ValueError(
                f"scope_map grants unknown scope(s) {', '.join(unknown)}; toolweave's scopes are "
                + ", ".join(TOOLWEAVE_SCOPES)
                + " and servers:<name> (a virtual server's access.scopes)"
            )
        return value

    @field_validator("algorithms")
    @classmethod
    def _public_key_algorithms(cls, value: list[str]) -> list[str]:
        bad = [alg for alg in value if alg not in ASYMMETRIC_ALGORITHMS]
        if bad or not value:
            raise ValueError(
                f"algorithms must be public-key signature algorithms ({', '.join(ASYMMETRIC_ALGORITHMS)}); "
                f"not {', '.join(bad) or 'an empty list'} (never 'none' or an HMAC)"
            )
        return value

    @model_validator(mode="after")
    def _secret_needs_id(self) -> IssuerConfig:
        if self.client_secret and not self.client_id:
            raise ValueError("client_secret is set without client_id")
        return self


class ProxyConfig(StrictModel):
    """`[auth.proxy]`: the gateway as the MCP clients' authorization server, for IdPs without dynamic
    client registration (Entra ID, Okta): clients register here, a person consents here and logs in
    at the upstream issuer, and the gateway issues its own short-lived tokens (docs/auth.md)."""

    enabled: bool = False
    issuer: str = ""
    """The `[[auth.issuers]]` entry people log in at (its claims, tenant and scope mapping apply);
    empty: the only issuer configured."""
    client_id: str = ""
    """The gateway's own client registered at that issuer (empty: the issuer entry's `client_id`)."""
    client_secret: str = ""
    upstream_scopes: list[str] = Field(default_factory=lambda: ["openid", "tools:read", "tools:call"])
    """Scopes the gateway asks the upstream issuer for (Entra ID: `api://<app>/...` names)."""
    upstream_resource: bool = True
    """Send `resource` = the issuer entry's audience upstream (RFC 8707); Entra ID v2 wants it off."""
    access_token_lifetime: Duration = 600.0
    refresh_token_lifetime: Duration = 86400.0
    code_lifetime: Duration = 60.0
    """How long an authorization code issued to an MCP client may wait to be exchanged."""
    login_lifetime: Duration = 600.0
    """How long a person may take between the consent page and returning from the upstream login."""
    max_clients: int = Field(default=1000, ge=1, le=1_000_000)
    """Registered clients kept at most (dynamic registrations and fetched metadata documents)."""
    registrations_per_minute: int = Field(default=20, ge=1, le=10_000)
    """Dynamic registrations accepted per minute, across every replica sharing the database."""
    client_metadata_documents: bool = True
    """Accept an https URL as `client_id` (Client ID Metadata Documents) and fetch the client's metadata."""
    allow_http_client_metadata: bool = False
    """Test and development only: fetch client metadata documents from http:// URLs too."""

    @field_validator("issuer")
    @classmethod
    def _issuer_url(cls, value: str) -> str:
        return _http_url(value, "auth.proxy.issuer")

    @field_validator("upstream_scopes", mode="before")
    @classmethod
    def _scope_words(cls, value: Any) -> Any:
        return value.split() if isinstance(value, str) else value

    @model_validator(mode="after")
    def _lifetimes(self) -> ProxyConfig:
        if self.client_secret and not self.client_id:
            raise ValueError("auth.proxy.client_secret is set without client_id")
        bounds = {
            "access_token_lifetime": (self.access_token_lifetime, 30.0, 86400.0),
            "refresh_token_lifetime": (self.refresh_token_lifetime, 60.0, 90 * 86400.0),
            "code_lifetime": (self.code_lifetime, 5.0, 600.0),
            "login_lifetime": (self.login_lifetime, 30.0, 3600.0),
        }
        for name, (value, low, high) in bounds.items():
            if not low <= value <= high:
                raise ValueError(
                    f"auth.proxy.{name} must be between {low:g} s and {high:g} s, not {value:g} s"
                )
        return self


class AuthConfig(StrictModel):
    required: bool = False
    issuers: list[IssuerConfig] = Field(default_factory=list)
    """Issuers whose access tokens are accepted (with `required`), beside API keys."""
    proxy: ProxyConfig = Field(default_factory=ProxyConfig)
    """`[auth.proxy]`: the OAuth proxy for IdPs without dynamic client registration (off by default)."""

    @model_validator(mode="after")
    def _proxy_issuer(self) -> AuthConfig:
        proxy = self.proxy
        if not proxy.enabled:
            return self
        if not self.issuers:
            raise ValueError("auth.proxy needs an [[auth.issuers]] entry: the IdP people log in at")
        if not proxy.issuer and len(self.issuers) > 1:
            raise ValueError(
                "auth.proxy.issuer must name one of the [[auth.issuers]] (several are configured)"
            )
        entry = self.proxy_issuer()
        if entry is None:
            raise ValueError(f"auth.proxy.issuer {proxy.issuer!r} is not one of the [[auth.issuers]]")
        if not (proxy.client_id or entry.client_id):
            raise ValueError(
                "auth.proxy needs the gateway's client at the issuer: set auth.proxy.client_id "
                "(or the issuer's client_id)"
            )
        return self

    def proxy_issuer(self) -> IssuerConfig | None:
        """The issuer entry the proxy logs people in at (None: the proxy names none that exists)."""
        if not self.proxy.issuer:
            return self.issuers[0] if len(self.issuers) == 1 else None
        return next((i for i in self.issuers if i.issuer == self.proxy.issuer), None)

    def proxy_client(self) -> tuple[str, str]:
        """(client_id, client_secret) of the gateway at the proxy's issuer."""
        entry = self.proxy_issuer()
        if self.proxy.client_id:
            return self.proxy.client_id, self.proxy.client_secret
        return (entry.client_id, entry.client_secret) if entry else ("", "")

    @field_validator("issuers")
    @classmethod
    def _distinct(cls, value: list[IssuerConfig]) -> list[IssuerConfig]:
        seen: set[str] = set()
        for issuer in value:
            if issuer.issuer in seen:
                raise ValueError(f"issuer {issuer.issuer!r} is listed twice")
            seen.add(issuer.issuer)
        return value
