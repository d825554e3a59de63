"""The OAuth proxy's own access tokens (`[auth.proxy]`, docs/auth.md#the-oauth-proxy).

With the proxy on, MCP clients log in at the gateway, which logs the person in at the upstream
issuer and then issues its *own* access token: a JWT (RFC 9068 shape, `typ: at+jwt`) signed with a
gateway key (ES256, joserfc), `aud` the MCP resource it was asked for (RFC 8707), valid for
`access_token_lifetime`, carrying the upstream subject, the tenant and the granted scopes, and the
grant it came from (`gid`). Verifying one checks the signature, `iss`, `aud` and `exp` like any
issuer's token, and then that the grant is still live: a revoked grant (RFC 7009, a reused code
or refresh token, the tenant deleted) ends its tokens at once in this process and within
`LIVE_SECONDS` on other replicas (they ask the shared database that often per grant).

The signing keys live in the database encrypted with the gateway's secret key, so every replica
signs and verifies alike; the newest one signs, every unretired one verifies.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from typing import Any

import orjson
from joserfc import jwt
from joserfc.errors import (
    BadSignatureError,
    ExpiredTokenError,
    InvalidClaimError,
    JoseError,
    MissingClaimError,
)
from joserfc.jwk import ECKey, KeySet

from toolweave.actor import Actor
from toolweave.config.auth import ProxyConfig
from toolweave.identity.claims import Identity
from toolweave.identity.errors import TokenRejected
from toolweave.store.crypto import SecretBox
from toolweave.store.errors import SecretKeyError
from toolweave.store.oauth_proxy import Grant, OAuthProxyRepository

ALGORITHM = "ES256"
LIVE_SECONDS = 5.0
"""How long a grant found live is trusted without asking the database again."""
LIVE_CACHE_SIZE = 10_000
RELOAD_SECONDS = 10.0
"""Least time between two reloads of the signing keys on an unknown `kid`."""


class ProxyAuthority:
    """Mints and verifies the gateway's own access tokens; knows which grants are live."""

    def __init__(
        self,
        config: ProxyConfig,
        issuer: str,
        repository: Callable[[], OAuthProxyRepository],
        box: Callable[[], SecretBox],
    ) -> None:
        self.config = config
        self.issuer = issuer
        """The gateway as an authorization server (its metadata's `issuer`, its tokens' `iss`)."""
        self._repository = repository
        self._box = box
        self._keys: KeySet | None = None
        self._loaded_at = -RELOAD_SECONDS
        self._lock = asyncio.Lock()
        self._live: OrderedDict[str, float] = OrderedDict()

    @property
    def repository(self) -> OAuthProxyRepository:
        return self._repository()

    # keys

    async def ready(self) -> None:
        """At start-up: the secret key resolves (on PostgreSQL it must be set: `SecretKeyError` says
        so before any client arrives) and a signing key exists."""
        try:
            self._box()
        except SecretKeyError as error:
            raise SecretKeyError(f"[auth.proxy] stores its signing keys encrypted: {error}") from None
        await self._key_set()

    async def _key_set(self, kid: str | None = None) -> KeySet:
        keys = self._keys
        if keys is not None and (kid is None or any(k.kid == kid for k in keys.keys)):
            return keys
        async with self._lock:
            if self._keys is not None and (kid is None or any(k.kid == kid for k in self._keys.keys)):
                return self._keys
            if self._keys is not None and time.monotonic() - self._loaded_at < RELOAD_SECONDS:
                return self._keys
            self._keys = await self._load()
            self._loaded_at = time.monotonic()
            return self._keys

    async def _load(self) -> KeySet:
        found = await self.repository.signing_keys()
        live = [(kid, secret) for kid, secret, retired in found if retired is None]
        if not live:
            await self.rotate()
            found = await self.repository.signing_keys()
            live = [(kid, secret) for kid, secret, retired in found if retired is None]
        box = self._box()
        return KeySet(
            [
                ECKey.import_key(orjson.loads(box.decrypt(secret, f"the OAuth proxy's signing key {kid}")))
                for kid, secret in live
            ]
        )

    async def rotate(self, *, retire_others: bool = False) -> str:
        """A new signing key (with `retire_others`, every token signed before stops verifying)."""
        kid = f"tw-{secrets.token_hex(8)}"
        key = ECKey.generate_key("P-256", {"kid": kid, "alg": ALGORITHM, "use": "sig"}, private=True)
        secret = self._box().encrypt(orjson.dumps(key.as_dict(private=True)))
        await self.repository.add_signing_key(kid, secret, retire_others=retire_others)
        self._keys = None
        self._loaded_at = -RELOAD_SECONDS
        return kid

    async def public_keys(self) -> dict[str, Any]:
        """The JWK set of the verifying keys (public parts), for `jwks_uri`."""
        keys = await self._key_set()
        return {"keys": [key.as_dict(private=False) for key in keys.keys]}

    # tokens

    async def mint(self, grant: Grant, client_id: str, scope: str, idp: str) -> tuple[str, int]:
        """(access token, lifetime in seconds) for `grant`."""
        keys = await self._key_set()
        key = keys.keys[0]
        now = int(time.time())
        lifetime = int(self.config.access_token_lifetime)
        claims = {
            "iss": self.issuer,
            "sub": grant.subject,
            "aud": grant.resource,
            "iat": now,
            "nbf": now,
            "exp": now + lifetime,
            "jti": secrets.token_urlsafe(12),
            "client_id": client_id,
            "scope": scope,
            "tenant": grant.tenant,
            "gid": grant.id,
            "idp": idp,
        }
        header = {"alg": ALGORITHM, "kid": key.kid, "typ": "at+jwt"}
        return jwt.encode(header, claims, key, algorithms=[ALGORITHM]), lifetime

    async def decode(self, token: str, kid: str | None) -> dict[str, Any]:
        """The verified claims of a token this gateway signed (any audience, not checked for expiry)."""
        keys = await self._key_set(kid)
        try:
            return dict(jwt.decode(token, keys, algorithms=[ALGORITHM]).claims)
        except BadSignatureError:
            raise TokenRejected(
                "the token's signature does not verify (it was not issued by this gateway)"
            ) from None
        except (JoseError, ValueError) as error:
            raise TokenRejected(f"the token cannot be verified ({type(error).__name__})") from None

    async def verify(self, token: str, kid: str | None, audiences: Callable[[Any], bool]) -> Identity:
        """A gateway-issued access token → the caller, or `TokenRejected` with the reason."""
        claims = await self.decode(token, kid)
        registry = jwt.JWTClaimsRegistry(
            leeway=5,
            iss={"essential": True, "value": self.issuer},
            exp={"essential": True},
            aud={"essential": True},
            gid={"essential": True},
        )
        try:
            registry.validate(claims)
        except ExpiredTokenError:
            raise TokenRejected("the token has expired") from None
        except (MissingClaimError, InvalidClaimError) as error:
            raise TokenRejected(f"the token's {error.claim!r} claim is missing or invalid") from None
        if not audiences(claims.get("aud")):
            raise TokenRejected(f"the token is for audience {claims.get('aud')!r}, not this gateway")
        if not await self.live(str(claims["gid"])):
            raise TokenRejected("the token has been revoked")
        scopes = frozenset(str(claims.get("scope") or "").split())
        return Identity(
            tenant=str(claims["tenant"]),
            subject=str(claims["sub"]),
            scopes=scopes,
            issuer=str(claims.get("idp") or self.issuer),
            expires_at=float(claims["exp"]),
            claims=claims,
        )

    def is_mine(self, claims: Mapping[str, Any]) -> bool:
        return claims.get("iss") == self.issuer and "gid" in claims

    # grants

    async def live(self, grant_id: str) -> bool:
        """Whether a grant is live (cached `LIVE_SECONDS` when it is; a dead one is asked again)."""
        until = self._live.get(grant_id)
        if until is not None and until > time.monotonic():
            return True
        grant = await self.repository.grant(grant_id)
        if grant is None or not grant.live:
            self._live.pop(grant_id, None)
            return False
        self._live[grant_id] = time.monotonic() + LIVE_SECONDS
        self._live.move_to_end(grant_id)
        while len(self._live) > LIVE_CACHE_SIZE:
            self._live.popitem(last=False)
        return True

    async def revoke(self, grant_id: str, actor: Actor | None = None, reason: str = "") -> bool:
        self._live.pop(grant_id, None)
        return await self.repository.revoke_grant(grant_id, actor, reason)

    def forget_all(self) -> None:
        """Ask the database about every grant again (a tenant was deleted here)."""
        self._live.clear()
