"""`[backends.oauth]` against a real local OAuth-protected MCP server (tests/servers/oauthserver.py):
per-user grants, the authorize-then-retry path of a served gateway, refresh, revocation, and where
tokens must never appear."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
import mcp_types as types
import pytest
from mcp import Client
from starlette.applications import Starlette

from support.processes import oauth_server as start_oauth_server
from support.serving import serve_mcp
from toolweave import Gateway
from toolweave.config import parse_config
from toolweave.credentials.backends import LOCAL, OAuthBackends
from toolweave.executor.session import Session
from toolweave.server.oauth_callback import callback_route
from toolweave.store import Database, OAuthTokenRepository, PendingAuthorizations, SecretBox

CALLBACK = "http://127.0.0.1:9/oauth/callback"


@pytest.fixture(scope="module")
def oauth_server() -> Iterator[str]:
    with start_oauth_server() as url:
        yield url


def _config(url: str, **gateway: Any) -> Any:
    return parse_config({"gateway": gateway, "backends": [{"name": "remote", "url": url, "oauth": {}}]})


async def _redirect(url: str, user: str, ttl: int | None = None) -> str:
    """What a person's browser does at the authorization server: `user` approves; where it is sent back."""
    async with httpx2.AsyncClient() as http:
        answer = await http.get(f"{url}&user={user}" + (f"&ttl={ttl}" if ttl else ""))
    assert answer.status_code == 302, answer.text
    return str(answer.headers["location"])


async def _approve(credentials: OAuthBackends, url: str, user: str, ttl: int | None = None) -> None:
    """What a person's browser does: the server approves `user`, the redirect reaches /oauth/callback."""
    location = await _redirect(url, user, ttl)
    query = {k: v[0] for k, v in parse_qs(urlsplit(location).query).items()}
    assert (
        await credentials.pending.complete(query["state"], query["code"], query.get("iss"), None) == "remote"
    )


async def _wait_for_tools(gateway: Gateway) -> None:
    for _ in range(200):
        if any(tool.name == "remote__whoami" for tool in gateway.list_tools()):
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"no tools: {gateway.describe_backends()}")


class Served:
    """A gateway as `toolweave serve` builds it for OAuth backends: grants in the database."""

    def __init__(self, tmp_path: Path, url: str, operator: str = "local", **gateway: Any) -> None:
        self.operator = operator
        """Whose grant the gateway's own connection lists with (`local`: the CLI's, as `toolweave login`)."""
        self.db = Database.from_url(f"sqlite:///{tmp_path / 'tw.db'}")
        self.path = tmp_path / "tw.db"
        self.config = _config(url, **gateway)
        self.box = SecretBox("test-key", "the test")
        self.repo = OAuthTokenRepository(self.db, self.box, via="ui")
        self.credentials = self.replica()
        self.gateway = Gateway(self.config, credentials=self.credentials)

    def replica(self) -> OAuthBackends:
        """The grants of a gateway on this database (as `toolweave serve` builds them)."""
        return OAuthBackends(
            self.repo, callback_url=CALLBACK, shared_pending=PendingAuthorizations(self.db, self.box)
        )

    async def __aenter__(self) -> Served:
        await self.db.start()
        await self.gateway.start()
        # the operator connects the backend once, so its tools are known
        url, task = await self.credentials.start_login(self.config.backends[0], (None, self.operator))
        assert url is not None
        await _approve(self.credentials, url, "operator")
        await task
        await _wait_for_tools(self.gateway)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.gateway.stop()
        await self.db.close()

    async def call(self, user: str, name: str = "remote__whoami", **arguments: Any) -> Any:
        return await self.gateway.executor(Session(tenant="acme", label=user)).call(name, arguments)

    async def authorize(self, user: str, ttl: int | None = None) -> None:
        first = await self.call(user)
        assert first.is_error
        await _approve(self.credentials, first.meta["toolweave"]["authorization_url"], user, ttl)


def _user(result: Any) -> str:
    assert not result.is_error, result.content[0].text
    return str(result.structured_content["user"])


async def test_two_users_of_one_tenant_each_call_as_themselves(oauth_server: str, tmp_path: Path) -> None:
    async with Served(tmp_path, oauth_server) as served:
        assert _user(await served.gateway.call("remote__whoami", {})) == "operator"
        first = await served.call("alice")
        assert first.is_error and "not authorized yet: open http" in first.content[0].text
        await _approve(served.credentials, first.meta["toolweave"]["authorization_url"], "alice")
        assert _user(await served.call("alice")) == "alice"
        await served.authorize("bob")
        assert _user(await served.call("bob")) == "bob"
        assert _user(await served.call("alice")) == "alice"
        owners = {(row["subject"], row["backend"]) for row in await served.repo.summaries("acme")}
        assert owners == {("alice", "remote"), ("bob", "remote")}


async def test_a_token_that_expires_mid_call_is_refreshed_for_the_next(
    oauth_server: str, tmp_path: Path
) -> None:
    async with Served(tmp_path, oauth_server) as served:
        await served.authorize("erin", ttl=2)
        async with httpx2.AsyncClient() as http:
            before = (await http.get(oauth_server.removesuffix("/mcp") + "/admin/stats")).json()
        slow = asyncio.create_task(served.call("erin", "remote__whoami_slowly", seconds=3))
        await asyncio.sleep(2.5)  # erin's access token has expired; the slow call is still running
        assert _user(await served.call("erin")) == "erin"
        assert _user(await slow) == "erin"
        async with httpx2.AsyncClient() as http:
            after = (await http.get(oauth_server.removesuffix("/mcp") + "/admin/stats")).json()
        assert after["refreshes"] > before["refreshes"]
        assert after["authorizations"] == before["authorizations"]


async def test_a_401_to_a_token_thought_valid_is_refreshed_once_not_authorized_again(
    oauth_server: str, tmp_path: Path
) -> None:
    """The server ends gina's access token early (her refresh token still good): the next call meets a
    401, refreshes once and is sent again, with no new authorization (before: "authorize again")."""
    admin = oauth_server.removesuffix("/mcp") + "/admin"
    async with Served(tmp_path, oauth_server) as served:
        await served.authorize("gina")
        assert _user(await served.call("gina")) == "gina"
        async with httpx2.AsyncClient() as http:
            await http.post(admin + "/expire", params={"user": "gina"})
            before = (await http.get(admin + "/stats")).json()
        assert _user(await served.call("gina")) == "gina"
        assert _user(await served.call("gina")) == "gina"
        async with httpx2.AsyncClient() as http:
            after = (await http.get(admin + "/stats")).json()
        assert after["refreshes"] == before["refreshes"] + 1
        assert after["authorizations"] == before["authorizations"]


async def test_a_grant_is_audited_once_and_a_refresh_is_not(oauth_server: str, tmp_path: Path) -> None:
    """`oauth.granted` when a user's grant starts holding tokens and when tokens come back with other
    scopes; a refresh for the same scopes (or a client registration alone) writes nothing."""
    from toolweave.store.audit import ALL_TENANTS, AuditRepository

    async with Served(tmp_path, oauth_server) as served:
        audit = AuditRepository(served.db)
        await served.authorize("erin", ttl=1)
        await asyncio.sleep(1.2)  # erin's access token has expired: the next call refreshes it
        assert _user(await served.call("erin")) == "erin"
        granted = [r for r in await audit.list(ALL_TENANTS) if r.action == "oauth.granted"]
        assert [(r.tenant, r.actor, r.via, r.object_id) for r in granted] == [
            ("acme", "erin", "ui", "remote"),
            (None, "local", "ui", "remote"),  # the operator's connection at start (newest first)
        ]
        assert set(granted[0].detail or {}) <= {"subject", "scope"}  # names and scopes, never a token
        await served.repo.put("acme", "erin", "remote", {"client": {"client_id": "x"}})  # no tokens
        await served.repo.put(
            "acme", "erin", "remote", {"tokens": {"access_token": "tok-1-secret"}}, scope="read"
        )
        await served.repo.put(
            "acme", "erin", "remote", {"tokens": {"access_token": "tok-2-secret"}}, scope="read"
        )
        await served.repo.put(
            "acme", "erin", "remote", {"tokens": {"access_token": "tok-3-secret"}}, scope="read write"
        )
        granted = [r for r in await audit.list("acme") if r.action == "oauth.granted"]
        assert [(r.detail or {}).get("scope_before", "-") for r in granted] == ["read", "-", "-"]
        assert "secret" not in str([r.to_dict() for r in granted])


async def test_a_revoked_grant_asks_to_authorize_again(oauth_server: str, tmp_path: Path) -> None:
    async with Served(tmp_path, oauth_server) as served:
        await served.authorize("carol")
        assert _user(await served.call("carol")) == "carol"
        async with httpx2.AsyncClient() as http:
            await http.post(oauth_server.removesuffix("/mcp") + "/admin/revoke", params={"user": "carol"})
        again = await served.call("carol")
        assert again.is_error and "authorize" in again.content[0].text
        link = await served.call("carol")
        assert link.is_error and link.meta["toolweave"]["authorization_url"].startswith("http")
        await _approve(served.credentials, link.meta["toolweave"]["authorization_url"], "carol")
        assert _user(await served.call("carol")) == "carol"


async def test_a_callback_reaching_another_gateway_on_the_database_completes_it(
    oauth_server: str, tmp_path: Path
) -> None:
    """No stickiness: ivy's call starts her authorization on one gateway; the browser comes back to
    another gateway's /oauth/callback on the same database, which completes it, once (before: "Link
    expired"). The first gateway then calls as ivy."""
    async with Served(tmp_path, oauth_server) as served:
        other = served.replica()
        app = Starlette(routes=[callback_route(SimpleNamespace(credentials=other))])
        first = await served.call("ivy")
        location = await _redirect(first.meta["toolweave"]["authorization_url"], "ivy")
        target = "/oauth/callback?" + urlsplit(location).query
        transport = httpx2.ASGITransport(app=app)
        try:
            async with httpx2.AsyncClient(transport=transport, base_url="http://other") as browser:
                page = await browser.get(target)
                assert page.status_code == 200 and "Connected to remote" in page.text, page.text
                assert _user(await served.call("ivy")) == "ivy"
                again = await browser.get(target)
                assert again.status_code == 400 and "already used" in again.text
        finally:
            await other.close()


async def test_tokens_appear_in_no_database_log_or_run_record(
    oauth_server: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    async with Served(tmp_path, oauth_server, record_direct_calls=True) as served:
        await served.authorize("dave")
        assert _user(await served.call("dave")) == "dave"
        grants = [
            await served.repo.get(None, "local", "remote"),
            await served.repo.get("acme", "dave", "remote"),
        ]
        secrets = [g["tokens"][k] for g in grants if g for k in ("access_token", "refresh_token")]
        assert len(secrets) == 4
        runs = await served.gateway.runs.list_runs()
        assert runs, "record_direct_calls: the calls left run records"
        recorded = repr(runs) + repr([await served.gateway.runs.get_run(run.id, run.tenant) for run in runs])
    stored = served.path.read_bytes()
    logged = caplog.text
    for secret in secrets:
        assert secret.encode() not in stored
        assert secret not in logged
        assert secret not in recorded


async def test_logout_forgets_the_grant_and_revokes_it(oauth_server: str, tmp_path: Path) -> None:
    async with Served(tmp_path, oauth_server) as served:
        config = served.config.backends[0]
        assert await served.credentials.logout(config, LOCAL)
        assert await served.repo.get(None, "local", "remote") is None
        assert not await served.credentials.logout(config, LOCAL)


async def test_a_url_elicitation_lets_the_call_go_on_once_authorized(
    oauth_server: str, tmp_path: Path
) -> None:
    """A 2025-11-25 client declaring URL-mode elicitation is sent the link; the person authorizes,
    and the same call answers as them (here the MCP caller is `local`, the listing grant `ops`'s)."""
    asked: list[Any] = []
    approvals: list[asyncio.Task[None]] = []

    async with Served(tmp_path, oauth_server, operator="ops") as served:

        async def person(_context: Any, params: Any) -> types.ElicitResult:
            asked.append(params)
            approvals.append(asyncio.create_task(_approve(served.credentials, params.url, "frank")))
            return types.ElicitResult(action="accept")

        async with (
            serve_mcp(served.gateway) as url,
            Client(url, mode="legacy", elicitation_callback=person) as client,
        ):
            result = await client.call_tool("remote__whoami", {})
        await asyncio.gather(*approvals)
    assert [params.mode for params in asked] == ["url"]
    assert not result.is_error, result.content
    assert result.structured_content == {"user": "frank"}


async def test_the_python_api_uses_the_grants_in_the_configs_database(
    oauth_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`Gateway(config)` without `credentials=` reads the grants `toolweave login` stored in
    `gateway.database` (before: a fresh in-memory store, so the backend waited unauthorized)."""
    monkeypatch.setenv("TOOLWEAVE_SECRET_KEY", "python-api-test")
    config = _config(oauth_server, database=f"sqlite:///{tmp_path / 'tw.db'}")
    db = Database.from_url(config.gateway.database)
    await db.start()
    login = OAuthBackends(OAuthTokenRepository(db), callback_url=CALLBACK)  # as `toolweave login` stores
    try:
        url, task = await login.start_login(config.backends[0], (None, "local"))
        assert url is not None
        await _approve(login, url, "pat")
        await task
    finally:
        await login.close()
        await db.close()
    async with Gateway(config) as gateway:
        await _wait_for_tools(gateway)
        assert _user(await gateway.call("remote__whoami", {})) == "pat"
