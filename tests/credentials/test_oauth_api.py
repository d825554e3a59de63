"""`[backends.oauth]` on an OpenAPI backend: each user authorizes the API (authorization code + PKCE at
the authorization server its `oauth2` / `openIdConnect` security scheme names) and calls it as
themselves. Against a real local authorization server and REST API (tests/servers/oauthserver.py),
whose `/api/me` answers with the user the bearer token was issued to."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx2
import pytest

from support.paths import TOOLWEAVE
from support.processes import oauth_server as start_oauth_server
from toolweave import Gateway
from toolweave.config import parse_config
from toolweave.credentials.backends import OAuthBackends
from toolweave.executor.session import Session
from toolweave.problems import ConfigError
from toolweave.store import Database, OAuthTokenRepository, PendingAuthorizations, SecretBox

CALLBACK = "http://127.0.0.1:9/oauth/callback"


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """The authorization server's (and API's) base URL."""
    with start_oauth_server() as url:
        yield url.removesuffix("/mcp")


class Served:
    """A gateway as `toolweave serve` builds it: grants and pending authorizations in the database."""

    def __init__(self, tmp_path: Path, document: str, **oauth: Any) -> None:
        self.path = tmp_path / "tw.db"
        self.db = Database.from_url(f"sqlite:///{self.path}")
        box = SecretBox("test-key", "the test")
        self.repo = OAuthTokenRepository(self.db, box)
        self.config = parse_config({"backends": [{"name": "api", "openapi": document, "oauth": oauth}]})
        self.credentials = OAuthBackends(
            self.repo, callback_url=CALLBACK, shared_pending=PendingAuthorizations(self.db, box)
        )
        self.gateway = Gateway(self.config, credentials=self.credentials)

    async def __aenter__(self) -> Served:
        await self.db.start()
        await self.gateway.start()
        assert {tool.name for tool in self.gateway.list_tools()} == {"api__getMe", "api__ping"}
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.gateway.stop()
        await self.db.close()

    async def call(self, user: str, name: str = "api__getMe") -> Any:
        return await self.gateway.executor(Session(tenant="acme", label=user)).call(name, {})

    async def approve(self, url: str, user: str) -> None:
        """A person's browser: the server approves `user`; the redirect reaches /oauth/callback."""
        async with httpx2.AsyncClient() as http:
            answer = await http.get(f"{url}&user={user}")
        assert answer.status_code == 302, answer.text
        query = {k: v[0] for k, v in parse_qs(urlsplit(answer.headers["location"]).query).items()}
        done = await self.credentials.pending.complete(query["state"], query["code"], query.get("iss"), None)
        assert done == "api"

    async def authorize(self, user: str) -> dict[str, list[str]]:
        """The user's first call answers with the link; they follow it. The link's query."""
        first = await self.call(user)
        assert first.is_error and "not authorized yet: open http" in first.content[0].text
        url = first.meta["toolweave"]["authorization_url"]
        await self.approve(url, user)
        return parse_qs(urlsplit(url).query)


def _user(result: Any) -> str:
    assert not result.is_error, result.content[0].text
    return str(result.structured_content["user"])


async def _stats(server: str) -> dict[str, Any]:
    async with httpx2.AsyncClient() as http:
        return dict((await http.get(server + "/admin/stats")).json())


async def _admin(server: str, action: str, user: str) -> None:
    async with httpx2.AsyncClient() as http:
        assert (await http.post(f"{server}/admin/{action}", params={"user": user})).status_code == 200


async def test_each_user_authorizes_the_api_and_calls_it_as_themselves(server: str, tmp_path: Path) -> None:
    async with Served(tmp_path, server + "/api/openapi.json", client_id="toolweave-app") as served:
        public = await served.call("zed", "api__ping")  # `security: []`: no authorization needed
        assert not public.is_error and public.structured_content == {"pong": True}
        first, second = await served.call("zed"), await served.call("zed")
        assert first.is_error and second.is_error  # zed has not authorized: one link, given again
        assert first.meta["toolweave"]["authorization_url"] == second.meta["toolweave"]["authorization_url"]
        link = await served.authorize("alice")
        assert link["scope"] == ["profile:read"]  # what the operations require of the scheme
        assert link["client_id"] == ["toolweave-app"] and link["code_challenge_method"] == ["S256"]
        assert link["redirect_uri"] == [CALLBACK]
        assert _user(await served.call("alice")) == "alice"
        await served.authorize("bob")
        assert _user(await served.call("bob")) == "bob"
        assert _user(await served.call("alice")) == "alice"
        owners = {(row["subject"], row["backend"]) for row in await served.repo.summaries("acme")}
        assert owners == {("alice", "api"), ("bob", "api")}
        grant = await served.repo.get("acme", "alice", "api")
        assert grant is not None
        stored = served.path.read_bytes()
        assert grant["tokens"]["access_token"].encode() not in stored


async def test_a_401_refreshes_once_and_a_revoked_grant_asks_again(server: str, tmp_path: Path) -> None:
    async with Served(tmp_path, server + "/api/openapi.json", client_id="toolweave-app") as served:
        await served.authorize("carol")
        assert _user(await served.call("carol")) == "carol"
        await _admin(server, "expire", "carol")  # the access token ends early; the refresh token works
        before = await _stats(server)
        assert _user(await served.call("carol")) == "carol"
        after = await _stats(server)
        assert after["refreshes"] == before["refreshes"] + 1
        assert after["authorizations"] == before["authorizations"]
        await _admin(server, "revoke", "carol")  # everything revoked: she must authorize again
        again = await served.call("carol")
        assert again.is_error and "authorize it (again)" in again.content[0].text
        link = await served.call("carol")
        assert link.is_error and link.meta["toolweave"]["authorization_url"].startswith(server)
        await served.approve(link.meta["toolweave"]["authorization_url"], "carol")
        assert _user(await served.call("carol")) == "carol"


async def test_an_openid_connect_scheme_is_discovered_and_asks_for_openid(
    server: str, tmp_path: Path
) -> None:
    """No client_id: the discovered metadata offers dynamic registration, which is used."""
    async with Served(tmp_path, server + "/api/openapi-oidc.json") as served:
        link = await served.authorize("dana")
        assert link["scope"] == ["openid profile:read"]
        assert link["client_id"][0].startswith("client-")  # registered at the server's /register
        assert _user(await served.call("dana")) == "dana"


async def test_a_document_without_a_user_scheme_says_what_to_set(tmp_path: Path) -> None:
    document = tmp_path / "api.json"
    document.write_text(
        '{"openapi": "3.1.0", "info": {"title": "t", "version": "1"}, "servers": [{"url": "http://127.0.0.1:9"}],'
        '"components": {"securitySchemes": {"key": {"type": "apiKey", "in": "header", "name": "X-Key"}}},'
        '"paths": {"/x": {"get": {"operationId": "x"}}}}'
    )
    config = parse_config({"backends": [{"name": "api", "openapi": str(document), "oauth": {}}]})
    async with Gateway(config) as gateway:
        (described,) = gateway.describe_backends()
    assert described["status"] == "failed"
    assert "no oauth2 security scheme with an authorizationCode flow" in described["last_error"]
    assert "[backends.oauth] issuer" in described["last_error"]


def test_the_cli_logs_in_and_calls_the_api_as_the_user(server: str, tmp_path: Path) -> None:
    """`toolweave login api` (the "browser" approves as erin), then `toolweave call --local` (two CLI
    processes, ~10 s each on a loaded 2-core machine: their imports and start-up)."""
    browser = tmp_path / "browser.py"
    browser.write_text(
        "import sys, urllib.request\nurllib.request.urlopen(sys.argv[1] + '&user=erin', timeout=30).read()\n"
    )
    config = tmp_path / "toolweave.toml"
    config.write_text(
        f'[gateway]\ndatabase = "sqlite:///{tmp_path / "tw.db"}"\n\n'
        f'[[backends]]\nname = "api"\nopenapi = "{server}/api/openapi.json"\n\n'
        '[backends.oauth]\nclient_id = "toolweave-cli"\n'
    )
    env = {**os.environ, "BROWSER": f"{sys.executable} {browser} %s", "TOOLWEAVE_SECRET_KEY": "test-only"}
    env.pop("TOOLWEAVE_CONFIG", None)

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(TOOLWEAVE), *args, "-c", str(config)], env=env, capture_output=True, text=True, timeout=120
        )

    login = run("login", "api")
    assert login.returncode == 0, login.stderr
    assert "Logged in to api (2 tools; scopes: profile:read" in login.stdout
    called = run("call", "--local", "api__getMe", "{}")
    assert called.returncode == 0, called.stderr
    assert '"user": "erin"' in called.stdout or '"user":"erin"' in called.stdout


@pytest.mark.parametrize(
    ("backend", "message"),
    [
        (
            {"python": "json", "oauth": {}},
            "'oauth' needs 'url' (an MCP server over HTTP), 'openapi' or 'http'",
        ),
        (
            {"openapi": "a.json", "oauth": {}, "auth": {"type": "bearer", "token": "t"}},
            "takes 'auth' or [backends.oauth], not both",
        ),
        (
            {
                "openapi": "a.json",
                "oauth": {"grant": "client_credentials", "client_id": "c", "client_secret": "s"},
            },
            'credentials go in [backends.auth] type = "oauth2"',
        ),
        (
            {"http": "http://x", "actions": [{"name": "a", "url": "/a"}], "oauth": {}},
            "on an 'http' backend needs 'issuer'",
        ),
        ({"url": "http://x/mcp", "oauth": {"scheme": "user"}}, "'scheme' names an OpenAPI security scheme"),
    ],
)
def test_oauth_keys_that_do_not_fit_the_backend_are_refused(backend: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_config({"backends": [{"name": "b", **backend}]})
