"""`toolweave validate`'s look at the configured issuers: is each one reachable, does its discovery
document name it, does it publish signing keys? Each answer is a `Problem` with its config path."""

from __future__ import annotations

import asyncio

import httpx

from toolweave.config.models import Config
from toolweave.identity.errors import IssuerUnavailable
from toolweave.identity.issuer import Issuer
from toolweave.identity.resource import public_url_for
from toolweave.problems import Problem


async def issuer_problems(config: Config) -> tuple[list[Problem], list[Problem]]:
    """(problems, warnings) of `[[auth.issuers]]`: every issuer is asked at once."""
    issuers = config.auth.issuers
    warnings: list[Problem] = []
    if not issuers:
        return [], warnings
    if not config.auth.required:
        warnings.append(
            Problem("auth.issuers", "issuers are used only with auth.required = true (or serve --auth)")
        )
    settings = config.gateway
    base = public_url_for(settings.public_url, settings.host, settings.port)
    if not settings.public_url and any(not issuer.audience for issuer in issuers):
        warnings.append(
            Problem(
                "gateway.public_url", f"not set: tokens must be for {base}/mcp; set it to the URL clients use"
            )
        )
    async with httpx.AsyncClient(follow_redirects=False) as client:
        checks = [
            _check(Issuer(issuer, issuer.audience or f"{base}/mcp", client), f"auth.issuers[{index}]")
            for index, issuer in enumerate(issuers)
        ]
        found = await asyncio.gather(*checks)
        problems = [problem for problem in found if problem is not None]
        if config.auth.proxy.enabled and not problems:
            problems += await _proxy_problems(config, base, client)
    return problems, warnings


async def _proxy_problems(config: Config, base: str, client: httpx.AsyncClient) -> list[Problem]:
    """`[auth.proxy]`: Authlib installed, and the upstream issuer has the endpoints a login needs."""
    try:
        import authlib  # noqa: F401
    except ImportError:
        return [Problem("auth.proxy", "needs Authlib: pip install 'toolweave[oauth-proxy]'")]
    entry = config.auth.proxy_issuer()
    assert entry is not None  # the config's validator saw to it
    metadata = await Issuer(entry, entry.audience or f"{base}/mcp", client).metadata()
    missing = [name for name in ("authorization_endpoint", "token_endpoint") if not metadata.get(name)]
    if missing:
        return [
            Problem(
                "auth.proxy",
                f"the issuer {entry.issuer} names no {' or '.join(missing)}: people cannot log in through it",
            )
        ]
    return []


async def _check(issuer: Issuer, where: str) -> Problem | None:
    path = f"{where} ({issuer.config.issuer})"
    try:
        if not issuer.config.jwks_uri or issuer.config.client_id:
            await issuer.metadata()
        keys = await issuer.keys(None)
    except IssuerUnavailable as error:
        return Problem(path, f"unreachable or not an OpenID/OAuth issuer: {error}")
    if not keys.keys:
        return Problem(path, "its key set (jwks_uri) holds no keys: no token of it could be verified")
    return None
