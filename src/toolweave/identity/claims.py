"""A verified token's claims → toolweave's identity: tenant, subject, scopes.

The tenant is the configured claim's value (or the issuer's `default_tenant`), and nothing else:
whoever can set that claim chooses the tenant (docs/auth.md). Scopes are read from the configured
claims (`scope` and `scp` by default, space-separated strings or lists); toolweave's own names
count as they are, other names count only through `scope_map`. A token granting no toolweave scope
is still a caller (it can `initialize` and `ping`) and gets 403s naming the scope it lacks.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from toolweave.config.auth import TOOLWEAVE_SCOPES, IssuerConfig
from toolweave.identity.errors import TokenRejected
from toolweave.store import check_tenant
from toolweave.store.keys import SERVER_SCOPE_RE


@dataclass(frozen=True, slots=True)
class Identity:
    """Who a verified token says calls."""

    tenant: str
    subject: str
    scopes: frozenset[str]
    issuer: str
    expires_at: float
    """Seconds since the epoch: the token's `exp` (the verified-token cache keeps it until then)."""
    claims: Mapping[str, Any] = field(default_factory=dict)
    """The token's claims as verified (a virtual server's `access.claims` admits by them)."""


def identity_from(claims: Mapping[str, Any], issuer: IssuerConfig, expires_at: float) -> Identity:
    subject = claims.get("sub") or claims.get("client_id")  # a machine's token may name only its client
    if not isinstance(subject, str) or not subject:
        raise TokenRejected("the token has no 'sub' (or 'client_id') claim")
    return Identity(
        tenant=tenant_from(claims, issuer),
        subject=subject[:256],
        scopes=scopes_from(claims, issuer),
        issuer=issuer.issuer,
        expires_at=expires_at,
        claims=dict(claims),
    )


def tenant_from(claims: Mapping[str, Any], issuer: IssuerConfig) -> str:
    value = claims.get(issuer.tenant_claim)
    if value is None or value == "":
        if issuer.default_tenant:
            return issuer.default_tenant
        raise TokenRejected(
            f"the token has no {issuer.tenant_claim!r} claim naming a tenant "
            "(set tenant_claim or default_tenant for this issuer)"
        )
    if isinstance(value, list) and len(value) == 1:
        value = value[0]
    if not isinstance(value, str):
        raise TokenRejected(f"the token's {issuer.tenant_claim!r} claim is not one tenant name")
    try:
        check_tenant(value)
    except ValueError as error:
        raise TokenRejected(f"the token's {issuer.tenant_claim!r} claim: {error}") from None
    return value


def scopes_from(claims: Mapping[str, Any], issuer: IssuerConfig) -> frozenset[str]:
    granted: set[str] = set()
    for claim in issuer.scopes_claim:
        for name in _names(claims.get(claim)):
            if name in TOOLWEAVE_SCOPES or SERVER_SCOPE_RE.match(name):
                granted.add(name)  # toolweave's own names, and `servers:<name>` (a virtual server's access)
            granted.update(issuer.scope_map.get(name, ()))
    return frozenset(granted)


def _names(value: Any) -> list[str]:
    if isinstance(value, str):
        return value.split()
    if isinstance(value, list):
        return [item for item in value if isinstance(item, str)]
    return []
