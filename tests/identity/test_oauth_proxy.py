"""The OAuth proxy (`[auth.proxy]`) against a real, certified OpenID Provider (npm `oidc-provider` 9)
with dynamic registration OFF, as at Entra ID or Okta: the gateway's own client is registered there
by hand. The official SDK's OAuth client discovers the gateway as its authorization server from the
401, registers at the gateway, the person consents on the gateway's page and logs in at the IdP,
and the client's tools/list runs on the gateway's own token; then refresh, revocation, and every
bad request refused with its own OAuth error."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import re
import secrets
import time
from collections.abc import Iterator
from html import unescape
from typing import Any
from urllib.parse import parse_qs, urlencode, urljoin, urlsplit

import httpx
import pytest
from authlib.oauth2.rfc8414 import AuthorizationServerMetadata
from joserfc import jwt
from joserfc.jwk import KeySet
from mcp import Client
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client
from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata
from sqlalchemy import update

from identity.test_oidc import Memory
from support.api import GREETER, AppFactory, database_url, drop_schema
from support.configs import python_backend
from support.npm_documents import Unavailable
from support.oidc import SECRET, OidcProvider, oidc_provider_folder, running
from support.oidc import Client as IdpClient
from support.processes import free_port
from support.results import names
from support.serving import serve_asgi
from toolweave.config.loader import parse_config
from toolweave.identity.proxy import LIVE_SECONDS
from toolweave.store.audit import ALL_TENANTS, AuditRepository
from toolweave.store.tables import oauth_proxy_tokens
from toolweave.store.tenants import TenantRepository

API = "/api/v1"
CLIENT_REDIRECT = "http://127.0.0.1:1/callback"
GATEWAY_CLIENT = "toolweave-gateway"
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
MCP_HEADERS = {"accept": "application/json, text/event-stream"}
_FORM_ACTION = re.compile(r'<form[^>]*action="([^"]+)"', re.I)
_LOGIN_FIELD = re.compile(r'name="login" value="([^"]+)"')


@pytest.fixture(scope="module")
def port() -> int:
    """The gateway's port: its callback is registered at the IdP by hand, before the IdP starts."""
    return free_port()


@pytest.fixture(scope="module")
def idp(port: int) -> Iterator[OidcProvider]:
    try:
        oidc_provider_folder()
    except Unavailable as error:
        pytest.skip(str(error))
    callback = f"http://127.0.0.1:{port}/oauth/proxy/callback"
    gateway_client = IdpClient(GATEWAY_CLIENT, None, "tools:read tools:call", redirect_uris=[callback])
    with running(OidcProvider([gateway_client], registration=False)) as provider:
        yield provider


def proxy_config(idp: OidcProvider, port: int, **proxy: Any) -> dict[str, Any]:
    return {
        "backends": [python_backend()],
        "gateway": {"public_url": f"http://127.0.0.1:{port}"},
        "auth": {
            "issuers": [{"issuer": idp.issuer}],
            "proxy": {"enabled": True, "client_id": GATEWAY_CLIENT, "client_secret": SECRET, **proxy},
        },
    }


async def person(authorization_url: str, login: str, decision: str = "allow") -> dict[str, str]:
    """Play the person in a browser: the gateway's consent page, the IdP's login and consent pages,
    until the browser is sent to the MCP client's redirect URI; that redirect's query."""
    async with httpx.AsyncClient(follow_redirects=False, timeout=30) as browser:
        url = authorization_url
        for _ in range(16):
            page = await browser.get(url)
            if page.status_code in (302, 303):
                url = urljoin(url, page.headers["location"])
                if url.startswith(CLIENT_REDIRECT):
                    return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
                continue
            assert page.status_code == 200, page.text[:500]
            action = _FORM_ACTION.search(page.text)
            assert action, page.text[:500]
            target = urljoin(url, unescape(action.group(1)))
            if 'name="decision"' in page.text:  # the gateway's consent page
                found = _LOGIN_FIELD.search(page.text)
                assert found and "127.0.0.1:1/callback" in page.text and "tools:read" in page.text
                fields: dict[str, str] = {"login": found.group(1), "decision": decision}
            elif 'name="prompt" value="consent"' in page.text:
                fields = {"prompt": "consent"}
            else:
                fields = {"prompt": "login", "login": login, "password": "any"}
            posted = await browser.post(target, data=fields)
            assert posted.status_code in (302, 303), posted.text[:500]
            url = urljoin(target, posted.headers["location"])
            if url.startswith(CLIENT_REDIRECT):
                return {k: v[0] for k, v in parse_qs(urlsplit(url).query).items()}
    raise AssertionError("the login did not end at the client's redirect URI")


def sdk_oauth(server_url: str, storage: Memory, login: str) -> OAuthClientProvider:
    visited: list[str] = []

    async def redirect(url: str) -> None:
        visited.append(url)

    async def callback() -> AuthorizationCodeResult:
        answer = await person(visited[-1], login)
        return AuthorizationCodeResult(code=answer["code"], state=answer.get("state"), iss=answer.get("iss"))

    return OAuthClientProvider(
        server_url=server_url,
        client_metadata=OAuthClientMetadata(
            redirect_uris=[CLIENT_REDIRECT],  # type: ignore[list-item]
            client_name="an MCP client",
            token_endpoint_auth_method="none",
            grant_types=["authorization_code", "refresh_token"],
        ),
        storage=storage,
        redirect_handler=redirect,
        callback_handler=callback,
    )


async def test_an_mcp_client_logs_in_through_the_proxy_and_can_refresh_and_revoke(
    sqlite_app: AppFactory, idp: OidcProvider, port: int
) -> None:
    # the IdP takes no dynamic registration: only the gateway's hand-registered client
    async with httpx.AsyncClient() as http:
        refused = await http.post(f"{idp.issuer}/reg", json={"redirect_uris": [CLIENT_REDIRECT]})
    assert refused.status_code == 404, refused.text
    api = await sqlite_app(proxy_config(idp, port), require_auth=True)
    async with api.client(await api.key("acme")) as acme, api.client(await api.key("globex")) as globex:
        assert (await acme.post(f"{API}/composite-tools", json={"definition": GREETER})).status_code == 201
        other = {**GREETER, "name": "globex_greeter"}
        assert (await globex.post(f"{API}/composite-tools", json={"definition": other})).status_code == 201
    app = api.app
    await api.runtime.close()
    storage = Memory()
    async with serve_asgi(app, port=port) as base:
        issuer = f"{base}/"
        async with httpx.AsyncClient(base_url=base) as http:
            prm = (await http.get("/.well-known/oauth-protected-resource/mcp")).json()
            assert prm["authorization_servers"] == [issuer]  # the gateway, not the IdP
            asm = (await http.get("/.well-known/oauth-authorization-server")).json()
            assert asm["issuer"] == issuer and asm["code_challenge_methods_supported"] == ["S256"]
        oauth = sdk_oauth(f"{base}/mcp", storage, "alice@acme")
        http_client = create_mcp_http_client(auth=oauth)
        async with Client(streamable_http_client(f"{base}/mcp", http_client=http_client)) as client:
            listed = names((await client.list_tools()).tools)
            greeted = await client.call_tool("greeter", {"operation": "multiply", "a": 2, "b": 3})
        assert "greeter" in listed and "globex_greeter" not in listed and "py__greet" in listed
        assert greeted.structured_content == {"product": 6.0}
        assert storage.client is not None and storage.client.client_id.startswith("twc_")  # the gateway's DCR
        assert storage.tokens is not None and storage.tokens.refresh_token
        access = storage.tokens.access_token
        async with httpx.AsyncClient(base_url=base) as http:
            published = KeySet.import_key_set((await http.get("/oauth/jwks")).json())
        claims = jwt.decode(access, published).claims
        assert claims["iss"] == issuer and claims["aud"] == f"{base}/mcp" and claims["sub"] == "alice@acme"
        assert claims["tenant"] == "acme" and claims["idp"] == idp.issuer
        assert set(claims["scope"].split()) == {"tools:read", "tools:call"}
        assert claims["exp"] - claims["iat"] == 600
        async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {access}"}) as rest:
            runs = (await rest.get(f"{API}/runs")).json()["runs"]
            assert [(run["tool"], run["subject"]) for run in runs] == [("greeter", "alice@acme")]

        client_id = storage.client.client_id
        async with httpx.AsyncClient(base_url=base) as http:
            # refresh: a new access token and a new refresh token; the old refresh token is spent
            old_refresh = storage.tokens.refresh_token
            form = {"grant_type": "refresh_token", "refresh_token": old_refresh, "client_id": client_id}
            refreshed = (await http.post("/oauth/token", data=form)).json()
            assert refreshed["token_type"] == "Bearer" and refreshed["refresh_token"] != old_refresh
            fresh = refreshed["access_token"]
            assert (await _list(http, fresh)).status_code == 200
            # revocation (RFC 7009) of the access token ends the grant: the next call is a 401
            revoked = await http.post("/oauth/revoke", data={"token": fresh, "client_id": client_id})
            assert revoked.status_code == 200
            after = await _list(http, fresh)
            assert after.status_code == 401 and "revoked" in after.headers["www-authenticate"]
            assert (await _list(http, access)).status_code == 401  # every token of the grant
            again = await http.post(
                "/oauth/token", data={**form, "refresh_token": refreshed["refresh_token"]}
            )
            assert again.status_code == 400 and again.json()["error"] == "invalid_grant"
        records = await AuditRepository(app.state.runtime.db).list(ALL_TENANTS)
        proxy = [
            (r.action, r.tenant, r.actor, r.via)
            for r in reversed(records)
            if r.object_type.startswith("oauth_")
        ]
        assert proxy == [
            ("oauth_client.registered", None, "anonymous", "rest"),
            ("oauth_proxy.granted", "acme", "alice@acme", "ui"),
            ("oauth_proxy.revoked", "acme", f"client:{client_id}", "rest"),
        ]
        assert records[0].detail == {"reason": "revoked by its client (RFC 7009)"}


async def _list(http: httpx.AsyncClient, token: str) -> httpx.Response:
    """An MCP request with `token` (`initialize`: it needs no session)."""
    return await http.post(
        "/mcp", json=INITIALIZE, headers={**MCP_HEADERS, "Authorization": f"Bearer {token}"}
    )


def _pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
    return verifier, challenge


class Flow:
    """A hand-driven client of the proxy, for the requests a good client never sends."""

    def __init__(self, base: str, http: httpx.AsyncClient, client_id: str) -> None:
        self.base, self.http, self.client_id = base, http, client_id

    def authorize_url(self, challenge: str, **extra: str) -> str:
        query = {
            "response_type": "code",
            "client_id": self.client_id,
            "redirect_uri": CLIENT_REDIRECT,
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "state": "s-1",
            "scope": "tools:read tools:call",
            "resource": f"{self.base}/mcp",
            **extra,
        }
        return f"{self.base}/oauth/authorize?{urlencode(query)}"

    async def code(self, login: str = "bob@acme") -> tuple[str, str]:
        """(code, verifier) of a fresh login."""
        verifier, challenge = _pkce()
        answer = await person(self.authorize_url(challenge), login)
        assert answer["state"] == "s-1" and answer["iss"] == f"{self.base}/", answer
        return answer["code"], verifier

    async def redeem(self, code: str, verifier: str, **extra: str) -> httpx.Response:
        form = {
            "grant_type": "authorization_code",
            "code": code,
            "redirect_uri": CLIENT_REDIRECT,
            "code_verifier": verifier,
            "client_id": self.client_id,
            "resource": f"{self.base}/mcp",
            **extra,
        }
        return await self.http.post("/oauth/token", data=form)


def _error(response: httpx.Response, status: int, error: str) -> str:
    assert response.status_code == status, response.text
    assert response.headers["cache-control"] == "no-store"
    body = response.json()
    assert body["error"] == error, body
    return str(body.get("error_description", ""))


def _redirected_error(response: httpx.Response) -> dict[str, str]:
    assert response.status_code == 303, response.text
    location = response.headers["location"]
    assert location.startswith(CLIENT_REDIRECT)
    return {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}


async def test_every_bad_request_gets_its_own_oauth_error(
    sqlite_app: AppFactory, idp: OidcProvider, port: int
) -> None:
    api = await sqlite_app(proxy_config(idp, port, registrations_per_minute=4), require_auth=True)
    app = api.app
    await api.runtime.close()
    async with serve_asgi(app, port=port) as base, httpx.AsyncClient(base_url=base) as http:
        # registration: metadata checked, each refusal named
        bad = {
            "no redirect": ({}, "invalid_redirect_uri"),
            "http off loopback": ({"redirect_uris": ["http://example.com/cb"]}, "invalid_redirect_uri"),
            "javascript": ({"redirect_uris": ["javascript:alert(1)"]}, "invalid_redirect_uri"),
            "fragment": ({"redirect_uris": ["https://a.example/cb#x"]}, "invalid_redirect_uri"),
            "client credentials": (
                {"redirect_uris": [CLIENT_REDIRECT], "grant_types": ["client_credentials"]},
                "invalid_client_metadata",
            ),
            "private_key_jwt": (
                {"redirect_uris": [CLIENT_REDIRECT], "token_endpoint_auth_method": "private_key_jwt"},
                "invalid_client_metadata",
            ),
        }
        for case, (document, error) in bad.items():
            assert _error(await http.post("/oauth/register", json=document), 400, error), case
        assert _error(await http.post("/oauth/register", content=b"{"), 400, "invalid_client_metadata")
        good = {
            "redirect_uris": [CLIENT_REDIRECT],
            "token_endpoint_auth_method": "none",
            "client_name": "cli",
        }
        registered = await http.post("/oauth/register", json=good)
        assert registered.status_code == 201 and "client_secret" not in registered.json()
        client_id = registered.json()["client_id"]
        confidential = await http.post(
            "/oauth/register", json={**good, "token_endpoint_auth_method": "client_secret_basic"}
        )
        assert confidential.status_code == 201 and confidential.json()["client_secret"].startswith("tws_")
        for _ in range(2):
            assert (await http.post("/oauth/register", json=good)).status_code == 201
        limited = await http.post("/oauth/register", json=good)  # a fifth within the minute
        assert "registrations in the last minute" in _error(limited, 429, "temporarily_unavailable")

        flow = Flow(base, http, client_id)
        verifier, challenge = _pkce()
        # authorization: a bad client or redirect URI is an error page, never a redirect
        wrong = await http.get(flow.authorize_url(challenge, redirect_uri="http://127.0.0.1:2/elsewhere"))
        assert wrong.status_code == 400 and "invalid_redirect_uri" in wrong.text
        assert "location" not in wrong.headers
        unknown = await http.get(flow.authorize_url(challenge, client_id="twc_nobody"))
        assert unknown.status_code == 400 and "invalid_client" in unknown.text
        # ... anything else goes back to the client with its error
        cases = {
            "code_challenge is required": {"code_challenge": ""},
            "code_challenge_method must be S256": {"code_challenge_method": "plain"},
            "response_type must be": {"response_type": "token"},
            "unknown scope": {"scope": "tools:read email"},
            "not an MCP endpoint": {"resource": "https://other.example/mcp"},
        }
        errors = {"response_type must be": "unsupported_response_type", "unknown scope": "invalid_scope"}
        for words, extra in cases.items():
            query = _redirected_error(await http.get(flow.authorize_url(challenge, **extra)))
            expected = errors.get(words, "invalid_target" if "MCP" in words else "invalid_request")
            assert query["error"] == expected and words in query["error_description"], query
            assert query["state"] == "s-1" and query["iss"] == f"{base}/"
        denied = await person(flow.authorize_url(challenge), "bob@acme", decision="deny")
        assert denied["error"] == "access_denied" and denied["state"] == "s-1"

        # the token endpoint
        code, verifier = await flow.code()
        assert "PKCE" in _error(await flow.redeem(code, _pkce()[0]), 400, "invalid_grant")
        code, verifier = await flow.code()
        wrong_uri = await flow.redeem(code, verifier, redirect_uri="http://127.0.0.1:1/other")
        assert "redirect_uri" in _error(wrong_uri, 400, "invalid_grant")
        code, verifier = await flow.code()
        wrong_resource = await flow.redeem(code, verifier, resource=f"{base}/servers/x/mcp")
        assert _error(wrong_resource, 400, "invalid_target")
        code, verifier = await flow.code()
        other = confidential.json()
        stolen = await flow.redeem(code, verifier, client_id=other["client_id"], client_secret="wrong")
        assert _error(stolen, 401, "invalid_client") and stolen.headers["www-authenticate"].startswith(
            "Basic"
        )
        code, verifier = await flow.code()
        async with app.state.runtime.db.write() as conn:  # the code waited past its lifetime
            await conn.execute(
                update(oauth_proxy_tokens).where(oauth_proxy_tokens.c.kind == "code").values(expires_at=1.0)
            )
        assert "expired" in _error(await flow.redeem(code, verifier), 400, "invalid_grant")

        code, verifier = await flow.code()
        first = await flow.redeem(code, verifier)
        assert first.status_code == 200, first.text
        token = first.json()["access_token"]
        assert (await _list(http, token)).status_code == 200
        reused = await flow.redeem(code, verifier)
        assert "already used" in _error(reused, 400, "invalid_grant")
        assert (await _list(http, token)).status_code == 401  # the tokens of a reused code are revoked

        unsupported = await http.post("/oauth/token", data={"grant_type": "password", "client_id": client_id})
        assert _error(unsupported, 400, "unsupported_grant_type")
        assert _error(await http.post("/oauth/token", json={"grant_type": "x"}), 400, "invalid_request")
        assert _error(await http.post("/oauth/revoke", data={"client_id": client_id}), 400, "invalid_request")


async def test_deleting_a_tenant_or_the_operator_revokes_peoples_tokens(
    sqlite_app: AppFactory, idp: OidcProvider, port: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("toolweave.identity.proxy.LIVE_SECONDS", 0.0)  # as another replica would see it
    api = await sqlite_app(proxy_config(idp, port), require_auth=True)
    app = api.app
    await api.runtime.close()
    async with serve_asgi(app, port=port) as base, httpx.AsyncClient(base_url=base) as http:
        good = {"redirect_uris": [CLIENT_REDIRECT], "token_endpoint_auth_method": "none"}
        flow = Flow(base, http, (await http.post("/oauth/register", json=good)).json()["client_id"])
        tokens = {}
        for login in ("carol@acme", "dave@globex"):
            code, verifier = await flow.code(login)
            tokens[login] = (await flow.redeem(code, verifier)).json()["access_token"]
            assert (await _list(http, tokens[login])).status_code == 200
        await TenantRepository(app.state.runtime.db).delete("acme")
        assert (await _list(http, tokens["carol@acme"])).status_code == 401
        assert (await _list(http, tokens["dave@globex"])).status_code == 200
        # the operator's command ends a person's grants on every gateway on the database
        from typer.testing import CliRunner

        from toolweave.cli import app as cli

        def revoke(*args: str) -> Any:
            return CliRunner().invoke(cli, ["proxy", "revoke", *args, "--database", api.url])

        assert (await asyncio.to_thread(revoke)).exit_code == 2  # nothing named
        done = await asyncio.to_thread(revoke, "--subject", "dave@globex")
        assert done.exit_code == 0 and done.stdout.strip() == "1", done.output
        assert (await _list(http, tokens["dave@globex"])).status_code == 401


async def test_a_client_id_metadata_document_is_a_client(
    sqlite_app: AppFactory, idp: OidcProvider, port: int
) -> None:
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    document: dict[str, Any] = {}
    documents = Starlette(routes=[Route("/client.json", lambda _r: JSONResponse(document))])
    config = proxy_config(idp, port, allow_http_client_metadata=True, registrations_per_minute=1)
    api = await sqlite_app(config, require_auth=True)
    app = api.app
    await api.runtime.close()
    async with serve_asgi(documents) as doc_base, serve_asgi(app, port=port) as base:
        url = f"{doc_base}/client.json"
        async with httpx.AsyncClient(base_url=base) as http:
            # a document that does not name itself is no client
            document.update(
                client_id="https://elsewhere.example/client.json", redirect_uris=[CLIENT_REDIRECT]
            )
            page = await http.get(Flow(base, http, url).authorize_url(_pkce()[1]))
            assert page.status_code == 400 and "does not name itself" in page.text
            document.update(client_id=url, client_name="Doc Client")
            flow = Flow(base, http, url)
            code, verifier = await flow.code()
            redeemed = await flow.redeem(code, verifier)
            assert redeemed.status_code == 200, redeemed.text
            assert (await _list(http, redeemed.json()["access_token"])).status_code == 200
            # new documents count with registrations: the next one within the minute waits
            document["client_id"] = f"{url}?v=2"
            page = await http.get(Flow(base, http, f"{url}?v=2").authorize_url(_pkce()[1]))
            assert page.status_code == 429 and "too many new clients" in page.text


async def test_the_metadata_is_rfc_8414_and_the_proxy_is_off_by_default(sqlite_app: AppFactory) -> None:
    issuer = "https://idp.example.com"
    config = {
        "gateway": {"public_url": "https://tools.example.com"},
        "auth": {"issuers": [{"issuer": issuer, "client_id": "gw"}], "proxy": {"enabled": True}},
    }
    api = await sqlite_app(config, require_auth=True)
    async with api.client() as http:
        document = (await http.get("/.well-known/oauth-authorization-server")).json()
        AuthorizationServerMetadata(document).validate()  # Authlib's RFC 8414 checks
        assert document["issuer"] == "https://tools.example.com/"
        assert document["registration_endpoint"] == "https://tools.example.com/oauth/register"
        prm = (await http.get("/.well-known/oauth-protected-resource/mcp")).json()
        assert prm["authorization_servers"] == ["https://tools.example.com/"]
    await sqlite_app.close(api)
    off = await sqlite_app({**config, "auth": {"issuers": [{"issuer": issuer}]}}, require_auth=True)
    async with off.client() as http:
        prm = (await http.get("/.well-known/oauth-protected-resource/mcp")).json()
        assert prm["authorization_servers"] == [issuer]
        assert (await http.get("/.well-known/oauth-authorization-server")).status_code == 404
        assert (await http.post("/oauth/register", json={})).status_code == 404


@pytest.mark.parametrize(
    ("proxy", "issuers", "message"),
    [
        ({"enabled": True}, [], "needs an [[auth.issuers]] entry"),
        ({"enabled": True}, [{"issuer": "https://a.example"}], "needs the gateway's client"),
        (
            {"enabled": True, "client_id": "x"},
            [{"issuer": "https://a.example"}, {"issuer": "https://b.example"}],
            "must name one of",
        ),
        (
            {"enabled": True, "client_id": "x", "issuer": "https://c.example"},
            [{"issuer": "https://a.example"}],
            "is not one of",
        ),
        (
            {"enabled": True, "client_id": "x", "access_token_lifetime": "2d"},
            [{"issuer": "https://a.example"}],
            "between",
        ),
    ],
)
def test_a_proxy_config_that_cannot_work_is_refused(
    proxy: dict[str, Any], issuers: list[dict[str, Any]], message: str
) -> None:
    issues: list[Any] = []
    assert parse_config({"auth": {"issuers": issuers, "proxy": proxy}}, issues=issues) is None
    assert any(message in str(issue) for issue in issues), issues


@pytest.fixture
async def shared_database(tmp_path: Any, api_env: None) -> Any:
    """Apps on one PostgreSQL schema: replicas of one gateway."""
    url, schema = database_url("postgres", tmp_path)
    factory = AppFactory(url)
    try:
        yield factory
    finally:
        await factory.close_all()
        if schema is not None:
            await drop_schema(url.split("?")[0], schema)


@pytest.mark.postgres
async def test_replicas_share_registrations_codes_keys_and_revocations(
    shared_database: AppFactory, idp: OidcProvider, port: int
) -> None:
    first = await shared_database(proxy_config(idp, port), require_auth=True)
    second = await shared_database(proxy_config(idp, port), require_auth=True)
    await first.runtime.close()
    await second.runtime.close()
    async with (
        serve_asgi(first.app, port=port) as base,
        serve_asgi(second.app) as second_base,
        httpx.AsyncClient(base_url=base) as http,
        httpx.AsyncClient(base_url=second_base) as other,
    ):
        good = {"redirect_uris": [CLIENT_REDIRECT], "token_endpoint_auth_method": "none"}
        client_id = (await other.post("/oauth/register", json=good)).json()["client_id"]  # at the second
        code, verifier = await Flow(base, http, client_id).code()  # authorized at the first
        redeemed = await Flow(base, other, client_id).redeem(code, verifier)  # redeemed at the second
        assert redeemed.status_code == 200, redeemed.text
        token = redeemed.json()["access_token"]
        assert (await _list(http, token)).status_code == 200  # signed by one, verified by the other
        assert (await _list(other, token)).status_code == 200
        revoked = await http.post("/oauth/revoke", data={"token": token, "client_id": client_id})
        assert revoked.status_code == 200
        assert (await _list(http, token)).status_code == 401  # at once where it was revoked
        started = time.monotonic()
        while (await _list(other, token)).status_code == 200:  # within LIVE_SECONDS elsewhere
            assert time.monotonic() - started < LIVE_SECONDS + 2
            await asyncio.sleep(0.2)


async def test_validate_checks_the_proxys_issuer_can_log_people_in(
    idp: OidcProvider, port: int, tmp_path: Any
) -> None:
    from starlette.applications import Starlette
    from starlette.responses import JSONResponse
    from starlette.routing import Route
    from typer.testing import CliRunner

    from toolweave.cli import app

    def validate() -> Any:
        return CliRunner().invoke(app, ["validate", "-c", str(config)])

    config = tmp_path / "toolweave.toml"
    config.write_text(
        f"""
[gateway]
database = "sqlite:///{tmp_path / "tw.db"}"
public_url = "http://127.0.0.1:{port}"
[auth]
required = true
[[auth.issuers]]
issuer = "{idp.issuer}"
[auth.proxy]
enabled = true
client_id = "{GATEWAY_CLIENT}"
"""
    )
    done = await asyncio.to_thread(validate)
    assert done.exit_code == 0, done.output
    # an issuer that only publishes keys (no authorization endpoint): nobody could log in through it
    issuer_port = free_port()
    issuer = f"http://127.0.0.1:{issuer_port}"
    document = {"issuer": issuer, "jwks_uri": f"{issuer}/jwks"}
    keys = KeySet([idp.signing_key]).as_dict(private=False)
    keys_only = Starlette(
        routes=[
            Route("/.well-known/openid-configuration", lambda _r: JSONResponse(document)),
            Route("/jwks", lambda _r: JSONResponse(keys)),
        ]
    )
    config.write_text(config.read_text().replace(idp.issuer, issuer))
    async with serve_asgi(keys_only, port=issuer_port):
        done = await asyncio.to_thread(validate)
    printed = " ".join(done.output.split())
    assert done.exit_code == 1, printed
    assert f"auth.proxy: the issuer {issuer} names no authorization_endpoint or token_endpoint" in printed


@pytest.mark.postgres
async def test_without_a_shared_secret_key_the_proxy_says_so_at_start(
    shared_database: AppFactory,
    idp: OidcProvider,
    port: int,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Replicas on PostgreSQL must share the key its signing keys are encrypted with: a gateway
    without one refuses to start instead of failing its first token request."""
    from toolweave.store.errors import SecretKeyError

    api = await shared_database(proxy_config(idp, port), require_auth=True)
    await api.runtime.close()
    monkeypatch.delenv("TOOLWEAVE_SECRET_KEY")
    with pytest.raises(
        SecretKeyError, match=r"\[auth.proxy\] stores its signing keys encrypted: set TOOLWEAVE_SECRET_KEY"
    ):
        async with api.app.router.lifespan_context(api.app):  # the start-up uvicorn runs
            pass
