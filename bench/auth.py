"""`python -m bench.auth [--calls N]`: what an IdP access token costs beside an API key, in one run.

Two measurements, each side by side in interleaved rounds (rotating order), so the noise of a
shared machine lands on all targets alike:

1. Verification alone, in process: `KeyCache.verify` of a known key, `TokenVerifier.verify` of
   a known token (the hot path: one SHA-256 and a dictionary lookup), and of a token seen for the
   first time (signature and claims checked; the issuer's keys already fetched), and of a known
   token the OAuth proxy issued (`[auth.proxy]`, when Authlib is installed: its grant's liveness
   is asked of the database at most every 5 s). Microseconds per verification.
2. A whole request to the gateway served on loopback (uvicorn, one persistent HTTP client):
   `GET /api/v1/backends` and an MCP `ping` (in a session opened by each credential) with the API
   key vs with the token. p50 milliseconds.

The issuer is a stand-in served on loopback (a discovery document and a JWK set of an RSA key made
here): a token's source does not change what verifying it costs. Prints a table and one JSON line.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import statistics
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from joserfc import jwt
from joserfc.jwk import KeySet, RSAKey
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from bench.procs import free_port

PING = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"},
    },
}
MCP_HEADERS = {
    "accept": "application/json, text/event-stream",
    "mcp-protocol-version": "2025-11-25",
    "content-type": "application/json",
}


def issuer_app(issuer: str, key: RSAKey) -> Starlette:
    keys = KeySet([key]).as_dict(private=False)

    async def discovery(_request: Any) -> JSONResponse:
        return JSONResponse({"issuer": issuer, "jwks_uri": f"{issuer}/jwks"})

    async def jwks(_request: Any) -> JSONResponse:
        return JSONResponse(keys)

    return Starlette(routes=[Route("/.well-known/openid-configuration", discovery), Route("/jwks", jwks)])


@contextlib.asynccontextmanager
async def served(app: Starlette, port: int) -> AsyncIterator[None]:
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    task = asyncio.create_task(server.serve())
    while not server.started:  # noqa: ASYNC110 - uvicorn has no event to wait on
        await asyncio.sleep(0.01)
    try:
        yield
    finally:
        server.should_exit = True
        await task


def token_for(key: RSAKey, issuer: str, audience: str, subject: str) -> str:
    now = int(time.time())
    claims = {
        "iss": issuer,
        "aud": audience,
        "sub": subject,
        "tenant": "acme",
        "scope": "tools:read tools:call",
        "iat": now,
        "exp": now + 3600,
    }
    return jwt.encode({"alg": "RS256", "kid": key.kid, "typ": "at+jwt"}, claims, key)


async def rounds(
    targets: dict[str, Callable[[], Awaitable[Any]]], calls: int, per_round: int
) -> dict[str, list[float]]:
    """Seconds per call of each target, `per_round` calls of each per round, the order rotating."""
    names = list(targets)
    timings: dict[str, list[float]] = {name: [] for name in names}
    for index in range(max(1, calls // per_round)):
        order = names[index % len(names) :] + names[: index % len(names)]
        for name in order:
            call = targets[name]
            for _ in range(per_round):
                started = time.perf_counter()
                await call()
                timings[name].append(time.perf_counter() - started)
    return timings


async def main(calls: int) -> dict[str, Any]:
    from toolweave.config import parse_config
    from toolweave.server.app import server_app
    from toolweave.store import KeyRepository

    port = free_port()
    issuer = f"http://127.0.0.1:{port}"
    public_url = "http://127.0.0.1:1"
    key = RSAKey.generate_key(2048, {"kid": "bench-1"}, private=True)
    folder = Path(tempfile.mkdtemp(prefix="tw-bench-auth-"))
    # the database is thrown away: the proxy's signing key is encrypted with a key of this run only
    os.environ.setdefault("TOOLWEAVE_SECRET_KEY", secrets.token_urlsafe(32))
    config = parse_config(
        {
            "gateway": {"database": f"sqlite:///{folder / 'tw.db'}", "public_url": public_url},
            "auth": {
                "required": True,
                "issuers": [{"issuer": issuer}],
                "proxy": {"enabled": _has_authlib(), "client_id": "bench"},
            },
        }
    )
    assert config is not None
    gateway_port = free_port()
    async with served(issuer_app(issuer, key), port):
        app = server_app(config, require_auth=True)
        async with served(app, gateway_port):
            runtime = app.state.runtime
            _info, api_key = await KeyRepository(runtime.db).create("acme", ["tools:read", "tools:call"])
            token = token_for(key, issuer, f"{public_url}/mcp", "alice@acme")
            verifier = app.state.identity.tokens
            await verifier.verify(token)  # keys fetched, token cached
            await runtime.key_cache.verify(api_key)
            fresh = [token_for(key, issuer, f"{public_url}/mcp", f"user{i}@acme") for i in range(calls)]
            unseen = iter(fresh)

            async def first_sight() -> Any:
                return await verifier.verify(next(unseen))

            targets = {
                "API key (cached)": lambda: runtime.key_cache.verify(api_key),
                "token (cached)": lambda: verifier.verify(token),
                "token (first sight)": first_sight,
            }
            if verifier.proxy is not None:
                issued = await _proxy_token(verifier.proxy, f"{public_url}/mcp", issuer)
                await verifier.verify(issued)
                targets["gateway-issued token (cached)"] = lambda: verifier.verify(issued)
            verification = await rounds(targets, calls, 50)
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{gateway_port}") as client:
                key_auth = {"authorization": f"Bearer {api_key}"}
                token_auth = {"authorization": f"Bearer {token}"}
                for headers in (key_auth, token_auth):
                    opened = await client.post("/mcp", json=INITIALIZE, headers={**MCP_HEADERS, **headers})
                    assert opened.status_code == 200, opened.text
                    headers["mcp-session-id"] = opened.headers["mcp-session-id"]

                async def rest(headers: dict[str, str]) -> None:
                    answer = await client.get("/api/v1/backends", headers=headers)
                    assert answer.status_code == 200, answer.text

                async def ping(headers: dict[str, str]) -> None:
                    answer = await client.post("/mcp", json=PING, headers={**MCP_HEADERS, **headers})
                    assert answer.status_code == 200, answer.text

                requests = await rounds(
                    {
                        "REST GET /backends, API key": lambda: rest(key_auth),
                        "REST GET /backends, token": lambda: rest(token_auth),
                        "MCP ping, API key": lambda: ping(key_auth),
                        "MCP ping, token": lambda: ping(token_auth),
                    },
                    calls // 4,
                    25,
                )
    return {"verification_us": _p50(verification, 1e6), "request_ms": _p50(requests, 1e3)}


def _has_authlib() -> bool:
    try:
        import authlib  # noqa: F401
    except ImportError:
        return False
    return True


async def _proxy_token(authority: Any, resource: str, idp: str) -> str:
    """An access token as the OAuth proxy issues one after a login (its grant stored)."""
    from toolweave.store.oauth_proxy import Grant

    grant = Grant(
        "b" * 32,
        "bench-client",
        "acme",
        "alice@acme",
        "tools:read tools:call",
        resource,
        time.time() + 3600,
        None,
    )
    await authority.repository.add_grant(grant)
    token, _lifetime = await authority.mint(grant, "bench-client", grant.scope, idp)
    return str(token)


def _p50(timings: dict[str, list[float]], scale: float) -> dict[str, float]:
    return {name: round(statistics.median(values) * scale, 2) for name, values in timings.items()}


def render(figures: dict[str, Any]) -> str:
    lines = ["verification alone (p50, µs)"]
    lines += [f"  {name:<32} {value:>10.2f}" for name, value in figures["verification_us"].items()]
    lines.append("whole request to the gateway on loopback (p50, ms)")
    lines += [f"  {name:<32} {value:>10.3f}" for name, value in figures["request_ms"].items()]
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(prog="python -m bench.auth", description=__doc__.splitlines()[0])
    parser.add_argument(
        "--calls", type=int, default=4000, help="verifications per target (requests: a quarter)"
    )
    arguments = parser.parse_args()
    result = asyncio.run(main(arguments.calls))
    print(render(result))
    print(json.dumps(result))
