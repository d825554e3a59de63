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


class AuthConfig(StrictModel):
    required: bool = False
    issuers: list[IssuerConfig] = Field(default_factory=list)
    """Issuers whose access tokens are accepted (with `required`), beside API keys."""

    @field_validator("issuers")
    @classmethod
    def _distinct(cls, value: list[IssuerConfig]) -> list[IssuerConfig]:
        seen: set[str] = set()
        for issuer in value:
            if issuer.issuer in seen:
                raise ValueError(f"issuer {issuer.issuer!r} is listed twice")
            seen.add(issuer.issuer)
        return value
