"""Access tokens from a real, certified OpenID Provider (npm `oidc-provider` 9, started here): the
official SDK's OAuth client logging a person in from the gateway's 401, tenants and scopes with IdP
tokens over MCP and REST, every kind of bad token, and the IdP going away mid-run."""

from __future__ import annotations

import base64
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from joserfc import jwt
from joserfc.jwk import RSAKey
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)

from support.api import GREETER, ApiApp, AppFactory
from support.configs import python_backend
from support.npm_documents import Unavailable
from support.oidc import Client as IdpClient
from support.oidc import OidcProvider, oidc_provider_folder, running, user_login
from support.processes import free_port
from support.results import names
from support.serving import serve_asgi

API = "/api/v1"
CLIENTS = [
    IdpClient("acme-bot", "acme", "tools:read tools:call"),
    IdpClient("acme-reader", "acme", "tools:read"),
    IdpClient("globex-admin", "globex", "tools:read tools:call tools:admin"),
    IdpClient("nobody-bot", None, "tools:read tools:call"),
]
LIST = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
CALL = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "py__greet", "arguments": {}}}


@pytest.fixture(scope="module")
def installed() -> None:
    """oidc-provider and Node 22, found (or installed) before a test moves HOME."""
    try:
        oidc_provider_folder()
    except Unavailable as error:
        pytest.skip(str(error))


@pytest.fixture(scope="module")
def idp(installed: None) -> Iterator[OidcProvider]:
    """One provider for the module's tests."""
    with running(OidcProvider(CLIENTS)) as provider:
        yield provider


async def gateway(make: AppFactory, port: int, *issuers: str) -> ApiApp:
    config = {
        "backends": [python_backend()],
        "gateway": {"public_url": f"http://127.0.0.1:{port}"},
        "auth": {"issuers": [{"issuer": issuer} for issuer in issuers]},
    }
    return await make(config, require_auth=True)


class Memory:
    """The SDK's token storage, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


def sdk_oauth(server_url: str, storage: Memory, login: str, issuer: str) -> OAuthClientProvider:
    """The official SDK's OAuth client, the test playing `login` at the IdP's pages."""
    visited: list[str] = []

    async def redirect(url: str) -> None:
        visited.append(url)

    async def callback() -> AuthorizationCodeResult:
        code, state = await user_login(visited[-1], login)  # the person logs in at the IdP
        return AuthorizationCodeResult(code=code, state=state, iss=issuer)

    return OAuthClientProvider(
        server_url=server_url,
        client_metadata=OAuthClientMetadata(
            redirect_uris=["http://127.0.0.1:1/callback"],  # type: ignore[list-item]
            client_name="an MCP client",
            token_endpoint_auth_method="none",
        ),
        storage=storage,
        redirect_handler=redirect,
        callback_handler=callback,
    )


async def test_an_mcp_client_logs_its_user_in_from_the_gateways_401(
    sqlite_app: AppFactory, idp: OidcProvider
) -> None:
    port = free_port()
    api = await gateway(sqlite_app, port, idp.issuer)
    async with api.client(await api.key("acme")) as acme, api.client(await api.key("globex")) as globex:
        assert (await acme.post(f"{API}/composite-tools", json={"definition": GREETER})).status_code == 201
        other = {**GREETER, "name": "globex_greeter"}
        assert (await globex.post(f"{API}/composite-tools", json={"definition": other})).status_code == 201
    app = api.app
    await api.runtime.close()
    storage = Memory()
    async with serve_asgi(app, port=port) as base:
        oauth = sdk_oauth(f"{base}/mcp", storage, "alice@acme", idp.issuer)
        http = create_mcp_http_client(auth=oauth)
        async with Client(streamable_http_client(f"{base}/mcp", http_client=http)) as client:
            listed = names((await client.list_tools()).tools)
            greeted = await client.call_tool("greeter", {"operation": "multiply", "a": 2, "b": 3})
        assert "greeter" in listed and "globex_greeter" not in listed and "py__greet" in listed
        assert greeted.structured_content == {"product": 6.0}
        assert storage.client is not None and storage.client.client_id  # registered dynamically
        assert storage.tokens is not None
        token = storage.tokens.access_token
        async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {token}"}) as rest:
            mine = (await rest.get(f"{API}/composite-tools")).json()["compositeTools"]
            assert [tool["name"] for tool in mine] == ["greeter"]  # the same token on REST, the same tenant
            runs = (await rest.get(f"{API}/runs")).json()["runs"]
            assert [(run["tool"], run["subject"]) for run in runs] == [("greeter", "alice@acme")]
            assert {event["subject"] for event in runs[0]["events"]} == {"alice@acme"}


async def test_tenants_and_scopes_hold_for_idp_tokens(sqlite_app: AppFactory, idp: OidcProvider) -> None:
    port = free_port()
    api = await gateway(sqlite_app, port, idp.issuer)
    resource = f"http://127.0.0.1:{port}/mcp"
    admin = idp.token("globex-admin", resource, "tools:read tools:call tools:admin")
    acme, reader = idp.token("acme-bot", resource), idp.token("acme-reader", resource, "tools:read")
    async with api.client(admin) as g, api.client(acme) as a, api.client(reader) as r:
        created = await g.post(f"{API}/composite-tools", json={"definition": GREETER})
        assert created.status_code == 201 and created.json()["tenant"] == "globex"
        assert (await a.get(f"{API}/composite-tools")).json()["compositeTools"] == []
        assert (await a.get(f"{API}/composite-tools/greeter")).status_code == 404
        refused = await a.post(f"{API}/composite-tools", json={"definition": {**GREETER, "name": "mine"}})
        assert refused.status_code == 403 and "tools:admin" in refused.text
        assert (await a.post(f"{API}/tools/py__greet/call", json={"name": "x"})).status_code == 200
        assert (await r.post(f"{API}/tools/py__greet/call", json={"name": "x"})).status_code == 403
        # over MCP a token lacking a method's scope is told which, so its client can step up
        stepped = await r.post("/mcp", json=CALL, headers={"accept": "application/json, text/event-stream"})
        assert stepped.status_code == 403
        challenge = stepped.headers["www-authenticate"]
        assert 'error="insufficient_scope"' in challenge and 'scope="tools:call"' in challenge
        assert (
            f'resource_metadata="http://127.0.0.1:{port}/.well-known/oauth-protected-resource/mcp"'
            in challenge
        )
        assert (
            stepped.json()["error"]["message"]
            == "this access token lacks the tools:call scope, which tools/call needs"
        )
    app = api.app
    await api.runtime.close()
    async with serve_asgi(app, port=port) as base:
        async with httpx.AsyncClient(base_url=base, timeout=10) as http:  # the events stream
            async with http.stream(
                "GET", f"{API}/events", headers={"Authorization": f"Bearer {reader}"}
            ) as events:
                assert events.status_code == 200
                assert events.headers["content-type"].startswith("text/event-stream")
            async with http.stream(
                "GET", f"{API}/events", headers={"Authorization": "Bearer a.b.c"}
            ) as events:
                assert events.status_code == 401
        for mode in ("legacy", "auto"):  # both protocol revisions
            http = create_mcp_http_client(headers={"Authorization": f"Bearer {acme}"})
            async with Client(streamable_http_client(f"{base}/mcp", http_client=http), mode=mode) as client:
                listed = names((await client.list_tools()).tools)
            assert "py__greet" in listed and "greeter" not in listed, mode
            http = create_mcp_http_client(headers={"Authorization": f"Bearer {reader}"})
            async with Client(streamable_http_client(f"{base}/mcp", http_client=http), mode=mode) as client:
                assert "py__greet" in names((await client.list_tools()).tools)
                with pytest.raises(Exception, match="tools:call"):
                    await client.call_tool("py__greet", {"name": "x"})


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def _signed(key: RSAKey, claims: dict[str, Any], kid: str | None = None) -> str:
    return jwt.encode({"alg": "RS256", "kid": kid or key.kid}, claims, key)


async def test_every_bad_token_is_a_401_with_its_reason(
    sqlite_app: AppFactory, idp: OidcProvider, caplog: pytest.LogCaptureFixture
) -> None:
    port = free_port()
    api = await gateway(sqlite_app, port, idp.issuer)
    resource = f"http://127.0.0.1:{port}/mcp"
    good = idp.token("acme-bot", resource)
    head, body, signature = good.split(".")
    claims = orjson.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
    now = int(time.time())
    stranger = RSAKey.generate_key(2048, {"kid": idp.signing_key.kid}, private=True)
    none, hmac = _b64(orjson.dumps({"alg": "none"})), _b64(orjson.dumps({"alg": "HS256", "typ": "JWT"}))
    forged_tenant = _b64(orjson.dumps({**claims, "tenant": "globex"}))
    bad = {
        "expired": (_signed(idp.signing_key, {**claims, "iat": now - 900, "exp": now - 600}), "has expired"),
        "not yet valid": (_signed(idp.signing_key, {**claims, "nbf": now + 600}), "not valid yet"),
        "wrong audience": (idp.token("acme-bot", "http://127.0.0.1:1/mcp"), "not this gateway"),
        "wrong issuer": (
            _signed(stranger, {**claims, "iss": "http://127.0.0.1:9/other"}),
            "not one this gateway trusts",
        ),
        "claims changed": (f"{head}.{forged_tenant}.{signature}", "signature does not verify"),
        "signature truncated": (f"{head}.{body}.{signature[:-20]}", "signature does not verify"),
        "signed by another key": (_signed(stranger, claims), "signature does not verify"),
        "alg none": (f"{none}.{body}.", "alg 'none'"),
        "alg HS256": (f"{hmac}.{body}.{signature}", "alg 'HS256'"),
        "oversized": (_signed(idp.signing_key, {**claims, "pad": "x" * 17000}), "longer than 16 KiB"),
        "malformed": ("abc.def.ghi", "malformed"),
        "not a JWT": ("opaque-token-of-nobody", "no issuer introspects"),
        "no tenant": (idp.token("nobody-bot", resource), "no 'tenant' claim"),
    }
    caplog.set_level(logging.INFO, logger="toolweave.auth")
    async with api.client() as anonymous:
        assert (
            await anonymous.get(f"{API}/backends", headers={"Authorization": f"Bearer {good}"})
        ).status_code == 200
        for case, (token, reason) in bad.items():
            headers = {"Authorization": f"Bearer {token}"}
            over_mcp = await anonymous.post("/mcp", json=LIST, headers=headers)
            over_rest = await anonymous.get(f"{API}/backends", headers=headers)
            assert over_mcp.status_code == over_rest.status_code == 401, case
            challenge = over_mcp.headers["www-authenticate"]
            assert 'error="invalid_token"' in challenge and reason in challenge, (case, challenge)
            assert reason in over_mcp.json()["error"]["message"], case
            assert reason in over_rest.json()["error"]["message"], case
    logged = "\n".join(record.getMessage() for record in caplog.records)
    for case, (token, reason) in bad.items():
        assert reason in logged, case
        assert token[-16:] not in logged, case  # never the token


async def test_an_issuer_going_away_fails_closed_alone(installed: None, sqlite_app: AppFactory) -> None:
    port = free_port()
    resource = f"http://127.0.0.1:{port}/mcp"
    with running(OidcProvider(CLIENTS)) as first, running(OidcProvider(CLIENTS)) as second:
        api = await gateway(sqlite_app, port, first.issuer, second.issuer)
        key = await api.key("acme")
        from_first, from_second = first.token("acme-bot", resource), second.token("acme-bot", resource)
        async with api.client(from_second) as client:
            assert (await client.get(f"{API}/backends")).status_code == 200
        first.stop()  # the IdP goes away mid-run, before the gateway has fetched its keys
        for token, status in ((from_first, 401), (from_second, 200), (key, 200)):
            async with api.client(token) as client:
                answer = await client.get(f"{API}/backends")
            assert answer.status_code == status, answer.text
            if status == 401:
                assert "signing keys of" in answer.json()["error"]["message"]


def test_validate_names_the_issuer_it_cannot_reach(idp: OidcProvider, tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from toolweave.cli import app

    config = tmp_path / "toolweave.toml"
    config.write_text(
        f"""
[gateway]
database = "sqlite:///{tmp_path / "tw.db"}"
public_url = "https://tools.example.com"
[auth]
required = true
[[auth.issuers]]
issuer = "{idp.issuer}"
[[auth.issuers]]
issuer = "http://127.0.0.1:9/realms/gone"
"""
    )
    done = CliRunner().invoke(app, ["validate", "-c", str(config)])
    printed = " ".join(done.output.split())
    assert done.exit_code == 1, printed
    assert "auth.issuers[1] (http://127.0.0.1:9/realms/gone): unreachable" in printed
    assert "auth.issuers[0]" not in printed
    config.write_text(config.read_text().split('[[auth.issuers]]\nissuer = "http://127.0.0.1:9')[0])
    done = CliRunner().invoke(app, ["validate", "-c", str(config)])
    assert done.exit_code == 0, done.output


async def test_the_web_ui_logs_a_person_in_through_the_idp(sqlite_app: AppFactory, idp: OidcProvider) -> None:
    port = free_port()
    callback = f"http://127.0.0.1:{port}/login/sso/callback"
    async with httpx.AsyncClient() as http:
        registered = await http.post(
            f"{idp.issuer}/reg",
            json={
                "redirect_uris": [callback],
                "grant_types": ["authorization_code"],
                "response_types": ["code"],
                "token_endpoint_auth_method": "client_secret_basic",
                "client_name": "toolweave UI",
            },
        )
    assert registered.status_code == 201, registered.text
    client = registered.json()
    config = {
        "backends": [python_backend()],
        "gateway": {"public_url": f"http://127.0.0.1:{port}"},
        "auth": {
            "issuers": [
                {
                    "issuer": idp.issuer,
                    "name": "Acme IdP",
                    "client_id": client["client_id"],
                    "client_secret": client["client_secret"],
                }
            ]
        },
    }
    api = await sqlite_app(config, require_auth=True)
    async with api.client() as browser:
        login = await browser.get("/login?next=/runs")
        assert login.status_code == 200 and "Log in with Acme IdP" in login.text
        assert 'name="key"' in login.text  # API-key login kept
        started = await browser.get("/login/sso/0?next=/runs")
        assert started.status_code == 303 and started.headers["location"].startswith(f"{idp.issuer}/auth?")
        code, state = await user_login(started.headers["location"], "bob@globex")
        forged = await browser.get("/login/sso/callback", params={"code": code, "state": "not-the-state"})
        assert forged.status_code == 401 and "state differs" in forged.text
        back = await browser.get("/login/sso/callback", params={"code": code, "state": state})
        assert back.status_code == 303 and back.headers["location"] == "/runs", back.text
        home = await browser.get("/runs")
        assert home.status_code == 200
        assert "globex · tools:admin, tools:call, tools:read" in home.text
    async with api.client() as stranger:
        assert (await stranger.get("/runs")).status_code == 303  # no session: the login page


async def test_an_mcp_client_logs_in_to_a_virtual_server_as_to_mcp(
    sqlite_app: AppFactory, idp: OidcProvider
) -> None:
    port = free_port()
    config = {
        "backends": [python_backend()],
        "gateway": {"public_url": f"http://127.0.0.1:{port}"},
        "auth": {"issuers": [{"issuer": idp.issuer}]},
        "servers": [{"name": "greetings", "tools": ["py__greet"], "access": {"tenants": ["acme"]}}],
    }
    api = await sqlite_app(config, require_auth=True)
    app = api.app
    await api.runtime.close()
    async with serve_asgi(app, port=port) as base:
        url = f"{base}/servers/greetings/mcp"
        async with httpx.AsyncClient() as raw:
            refused = await raw.post(url, json=LIST)
            metadata = (
                await raw.get(f"{base}/.well-known/oauth-protected-resource/servers/greetings/mcp")
            ).json()
        assert refused.status_code == 401
        assert (
            "/.well-known/oauth-protected-resource/servers/greetings/mcp"
            in refused.headers["www-authenticate"]
        )
        assert metadata["resource"] == url
        storage = Memory()
        http = create_mcp_http_client(auth=sdk_oauth(url, storage, "carol@acme", idp.issuer))
        async with Client(streamable_http_client(url, http_client=http)) as client:
            assert names((await client.list_tools()).tools) == ["py__greet"]
        assert storage.tokens is not None  # a token for the virtual server's resource, accepted here
        token = storage.tokens.access_token
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as rest:
            assert (await rest.get(f"{base}/api/v1/backends")).status_code == 200


async def test_an_opaque_token_is_introspected_once_while_it_lives(
    sqlite_app: AppFactory, idp: OidcProvider
) -> None:
    from support.oidc import SECRET
    from toolweave.identity import Issuer

    port = free_port()
    issuer = {
        "issuer": idp.issuer,
        "introspection_endpoint": f"{idp.issuer}/token/introspection",
        "client_id": "acme-bot",
        "client_secret": SECRET,
    }
    config = {
        "backends": [python_backend()],
        "gateway": {"public_url": f"http://127.0.0.1:{port}"},
        "auth": {"issuers": [issuer]},
    }
    api = await sqlite_app(config, require_auth=True)
    async with httpx.AsyncClient() as http:  # no resource: the provider issues an opaque token
        answer = await http.post(
            f"{idp.issuer}/token",
            auth=("acme-bot", SECRET),
            data={"grant_type": "client_credentials", "scope": "tools:read tools:call"},
        )
    opaque = answer.json()["access_token"]
    assert opaque.count(".") == 0
    asked = 0
    original = Issuer.introspect

    async def counting(self: Issuer, token: str) -> dict[str, Any]:
        nonlocal asked
        asked += 1
        return await original(self, token)

    Issuer.introspect = counting  # type: ignore[method-assign]
    try:
        async with api.client(opaque) as client:
            for _ in range(3):
                assert (await client.get(f"{API}/backends")).status_code == 200
            ran = await client.post(f"{API}/tools/py__greet/call", json={"name": "x"})
            assert ran.status_code == 200, ran.text
        async with api.client("not-a-token-anyone-issued") as client:
            refused = await client.get(f"{API}/backends")
    finally:
        Issuer.introspect = original  # type: ignore[method-assign]
    assert asked == 2  # the live token once, the unknown one once
    assert refused.status_code == 401 and "not active" in refused.json()["error"]["message"]
