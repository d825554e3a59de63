"""Access tokens from the configured issuers, verified into an `Identity`.

A JWT (RFC 9068 or any issuer's signed access token) is verified against its issuer's keys: the
`alg` on the issuer's allow-list (public-key algorithms only), the signature, `iss` one of ours,
`aud` this gateway's resource (RFC 8707), `exp` present and `nbf`/`iat` passed, with the issuer's
leeway. An opaque token goes to the introspection endpoint (RFC 7662) of each issuer that has one.
Either way the answer is kept, by the token's SHA-256, until the token expires: the hot path of a
known token is one hash and one dict lookup. Every refusal is a `TokenRejected` whose message says
why and never quotes the token.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any

import httpx
import orjson
from joserfc import jws, jwt
from joserfc.errors import (
    BadSignatureError,
    ExpiredTokenError,
    InvalidClaimError,
    JoseError,
    MissingClaimError,
)

from toolweave.common_types import str_at
from toolweave.config.auth import IssuerConfig
from toolweave.identity.claims import Identity, identity_from
from toolweave.identity.errors import IssuerUnavailable, TokenRejected
from toolweave.identity.issuer import Issuer, has_kid
from toolweave.identity.proxy import ProxyAuthority
from toolweave.identity.resource import VIRTUAL_PATH

MAX_TOKEN_BYTES = 16 * 1024
"""A bearer token longer than this is refused unread."""
CACHE_SIZE = 10_000
"""Verified tokens kept (least recently used dropped beyond it)."""
INTROSPECTION_CACHE_SECONDS = 300.0
"""An introspected token without `exp` is trusted this long before it is asked about again."""
INTROSPECTIONS_AT_ONCE = 8
"""Introspection requests in flight at most, across issuers: opaque tokens cannot flood an issuer."""


class TokenVerifier:
    """Every configured issuer's tokens; several issuers at once, each failing on its own."""

    def __init__(
        self, issuers: list[IssuerConfig], public_url: str, client: httpx.AsyncClient | None = None
    ) -> None:
        self._client = client or httpx.AsyncClient(follow_redirects=False)
        self.public_url = public_url.rstrip("/")
        self.resource = f"{self.public_url}/mcp"
        self.issuers = {
            config.issuer: Issuer(config, config.audience or self.resource, self._client)
            for config in issuers
        }
        self._verified: OrderedDict[bytes, Identity] = OrderedDict()
        self._introspecting = asyncio.Semaphore(INTROSPECTIONS_AT_ONCE)
        self.proxy: ProxyAuthority | None = None
        """The OAuth proxy (`[auth.proxy]`): the gateway's own tokens, whose grants can be revoked."""

    async def verify(self, token: str) -> Identity:
        if len(token) > MAX_TOKEN_BYTES:
            raise TokenRejected(f"the token is longer than {MAX_TOKEN_BYTES // 1024} KiB")
        digest = hashlib.sha256(token.encode()).digest()
        known = self._verified.get(digest)
        if known is not None:
            if known.expires_at > time.time():
                proxy = self.proxy
                if (
                    proxy is not None
                    and proxy.is_mine(known.claims)
                    and not await proxy.live(known.claims["gid"])
                ):
                    self._verified.pop(digest, None)
                    raise TokenRejected("the token has been revoked")
                return known
            del self._verified[digest]
        if token.count(".") == 2:
            identity = await self._verify_jwt(token)
        else:
            identity = await self._introspect(token)
        self._verified[digest] = identity
        while len(self._verified) > CACHE_SIZE:
            self._verified.popitem(last=False)
        return identity

    async def _verify_jwt(self, token: str) -> Identity:
        header, claims = _unverified(token)
        if self.proxy is not None and self.proxy.is_mine(claims):
            kid = header.get("kid")
            return await self.proxy.verify(token, kid if isinstance(kid, str) else None, self.for_gateway)
        issuer = self.issuers.get(str_at(claims, "iss", ""))
        if issuer is None:
            raise TokenRejected(
                f"the token's issuer {_shown(claims.get('iss'))} is not one this gateway trusts"
            )
        alg = header.get("alg")
        if alg not in issuer.config.algorithms:
            raise TokenRejected(
                f"the token is signed with alg {_shown(alg)}, which is not accepted "
                f"(accepted: {', '.join(issuer.config.algorithms)})"
            )
        kid = header.get("kid")
        try:
            keys = await issuer.keys(kid if isinstance(kid, str) else None)
        except IssuerUnavailable as error:
            raise TokenRejected(
                f"the signing keys of {issuer.config.issuer} cannot be fetched: {error}"
            ) from None
        try:
            verified = jwt.decode(token, keys, algorithms=issuer.config.algorithms)
        except BadSignatureError:
            raise TokenRejected("the token's signature does not verify") from None
        except (JoseError, ValueError) as error:
            if isinstance(kid, str) and not has_kid(keys, kid):
                raise TokenRejected(
                    f"the token names a signing key ({_shown(kid)}) its issuer does not publish"
                ) from None
            raise TokenRejected(f"the token cannot be verified ({_jose_reason(error)})") from None
        _check_claims(verified.claims, issuer)
        return identity_from(
            verified.claims, issuer.config, float(verified.claims["exp"]) + issuer.config.leeway
        )

    async def _introspect(self, token: str) -> Identity:
        introspecting = [i for i in self.issuers.values() if i.config.introspection_endpoint]
        if not introspecting:
            raise TokenRejected(
                "the token is neither an API key nor a JWT, and no issuer introspects opaque tokens"
            )
        problems: list[str] = []
        for issuer in introspecting:
            try:
                async with self._introspecting:
                    answer = await issuer.introspect(token)
            except IssuerUnavailable as error:
                problems.append(f"{issuer.config.issuer}: {error}")
                continue
            if answer.get("active") is not True:
                continue
            return _introspected(answer, issuer)
        if problems:
            raise TokenRejected("the token cannot be introspected: " + "; ".join(problems))
        raise TokenRejected("the token is not active (introspection says so): expired, revoked or unknown")

    def for_gateway(self, aud: Any) -> bool:
        """Whether `aud` is one of this gateway's resources (`/mcp` or a virtual server's)."""
        audiences = aud if isinstance(aud, list) else [aud]
        return any(
            isinstance(value, str)
            and value.startswith(self.public_url)
            and (value[len(self.public_url) :] == "/mcp" or VIRTUAL_PATH.match(value[len(self.public_url) :]))
            for value in audiences
        )

    async def aclose(self) -> None:
        await self._client.aclose()


def _unverified(token: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The header and claims as written, before anything is trusted (to pick the issuer and key)."""
    try:
        compact = jws.extract_compact(token.encode("ascii"))
        claims = orjson.loads(compact.payload)
    except (JoseError, ValueError, UnicodeError):
        raise TokenRejected("the token is malformed (not a compact JWS with a JSON payload)") from None
    header = compact.headers()
    if not isinstance(claims, dict) or not isinstance(header, dict):
        raise TokenRejected("the token is malformed (its header or payload is not a JSON object)")
    return header, claims


def _check_claims(claims: Mapping[str, Any], issuer: Issuer) -> None:
    registry = jwt.JWTClaimsRegistry(
        leeway=int(issuer.config.leeway),
        iss={"essential": True, "value": issuer.config.issuer},
        aud={"essential": True},
        exp={"essential": True},
    )
    try:
        registry.validate(dict(claims))
        if not _for_this_gateway(claims.get("aud"), issuer):
            raise InvalidClaimError("aud")
    except ExpiredTokenError:
        raise TokenRejected("the token has expired") from None
    except MissingClaimError as error:
        raise TokenRejected(f"the token lacks the claim(s) it must carry: {error.claim}") from None
    except InvalidClaimError as error:
        if error.claim == "aud":
            raise TokenRejected(
                f"the token is for audience {_shown(claims.get('aud'))}, not this gateway ({issuer.audience})"
            ) from None
        if error.claim in ("nbf", "iat"):
            raise TokenRejected(f"the token is not valid yet ({error.description})") from None
        raise TokenRejected(f"the token's {error.claim!r} claim is invalid ({error.description})") from None


def _for_this_gateway(aud: Any, issuer: Issuer) -> bool:
    """Whether `aud` names this gateway: the issuer's audience or, when that is the default (the
    gateway's `/mcp`), one of the gateway's virtual servers (`/servers/{name}/mcp`) as well."""
    audiences = aud if isinstance(aud, list) else [aud]
    if issuer.audience in audiences:
        return True
    if issuer.config.audience:
        return False
    base = issuer.audience.removesuffix("/mcp")
    return any(
        isinstance(value, str) and value.startswith(base) and VIRTUAL_PATH.match(value[len(base) :])
        for value in audiences
    )


def _introspected(answer: Mapping[str, Any], issuer: Issuer) -> Identity:
    iss = answer.get("iss")
    if iss is not None and iss != issuer.config.issuer:
        raise TokenRejected(f"the introspected token's issuer {_shown(iss)} is not {issuer.config.issuer}")
    aud = answer.get("aud")
    if aud is not None and not _for_this_gateway(aud, issuer):
        raise TokenRejected(f"the token is for audience {_shown(aud)}, not this gateway ({issuer.audience})")
    ceiling = time.time() + INTROSPECTION_CACHE_SECONDS
    exp = answer.get("exp")
    expires_at = min(float(exp), ceiling) if isinstance(exp, int | float) else ceiling
    return identity_from(answer, issuer.config, expires_at)


def _shown(value: Any) -> str:
    """A claim or header value for an error message: quoted, and short."""
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def _jose_reason(error: Exception) -> str:
    return getattr(error, "description", None) or type(error).__name__
