"""A real OpenID Provider for the identity tests: npm `oidc-provider` (panva, certified) on Node 22.

`oidc_provider_folder()` installs `oidc-provider@OIDC_PROVIDER_VERSION` once into the npm cache
(as `support.node` does for the conformance suite) and copies `oidc_provider.mjs` beside it.
`OidcProvider` starts it on a free port with a signing key the test holds (`signing_key`, to
forge the tokens a provider would never issue), client-credentials clients per tenant, dynamic
registration, resource indicators and JWT access tokens. `user_login` plays the person at the
provider's own login and consent pages. Missing Node or npm raises `Unavailable`, for a skip.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import signal
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass, field
from html import unescape
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urljoin, urlsplit

import httpx
import orjson
from joserfc.jwk import KeySet, RSAKey

from support.node import _run_npm, node22_bin
from support.npm_documents import cache_dir, installs
from support.processes import free_port, wait_for_port

OIDC_PROVIDER_VERSION = "9.13.3"
SCRIPT = Path(__file__).with_name("oidc_provider.mjs")
SECRET = "client-secret-that-is-long-enough-1234"


@functools.cache
@installs
def oidc_provider_folder() -> tuple[Path, Path]:
    """(a folder holding `node_modules/oidc-provider` and the provider script, Node 22's binary).

    Resolved once per session, before a test's `api_env` points HOME (and so the npm cache) elsewhere.
    """
    node = node22_bin()
    folder = cache_dir() / f"oidc-provider-{OIDC_PROVIDER_VERSION}"
    if not (folder / "node_modules" / "oidc-provider" / "package.json").exists():
        folder.mkdir(parents=True, exist_ok=True)
        _run_npm(
            ["install", "--prefix", str(folder), f"oidc-provider@{OIDC_PROVIDER_VERSION}"], folder, str(node)
        )
    copy = folder / SCRIPT.name
    if not copy.exists() or copy.read_bytes() != SCRIPT.read_bytes():
        copy.write_bytes(SCRIPT.read_bytes())
    return folder, node / "node"


@dataclass
class Client:
    client_id: str
    tenant: str | None
    scope: str
    redirect_uris: list[str] = field(default_factory=list)
    """Non-empty: an authorization-code client registered by hand (an OAuth proxy's), not client credentials."""


@dataclass
class OidcProvider:
    """One provider process; `issuer` is its URL. Stop it with `stop()` (the fixture does at the end)."""

    clients: list[Client]
    ttl: int = 300
    registration: bool = True
    """Dynamic client registration (off: an IdP like Entra ID or Okta, whose clients are registered by hand)."""
    port: int = field(default_factory=free_port)
    signing_key: RSAKey = field(
        default_factory=lambda: RSAKey.generate_key(
            2048, {"kid": "idp-key-1", "use": "sig", "alg": "RS256"}, private=True
        )
    )
    process: subprocess.Popen[bytes] | None = None

    @property
    def issuer(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> None:
        folder, node = oidc_provider_folder()
        keys = KeySet([self.signing_key]).as_dict(private=True)
        clients = [
            {
                "client_id": c.client_id,
                "client_secret": SECRET,
                "tenant": c.tenant,
                "scope": c.scope,
                "redirect_uris": c.redirect_uris,
            }
            for c in self.clients
        ]
        env = dict(
            os.environ,
            PORT=str(self.port),
            ISSUER=self.issuer,
            JWKS=orjson.dumps(keys).decode(),
            CLIENTS=orjson.dumps(clients).decode(),
            TTL=str(self.ttl),
            REGISTRATION="on" if self.registration else "off",
        )
        log = open(folder / f"provider-{self.port}.log", "wb")  # noqa: SIM115 - the process keeps it
        self.process = subprocess.Popen(
            [str(node), SCRIPT.name],
            cwd=folder,
            env=env,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
        wait_for_port(self.port, self.process, timeout=60)

    def stop(self) -> None:
        if self.process is None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait(10)
        self.process = None

    def token(self, client_id: str, resource: str, scope: str = "tools:read tools:call") -> str:
        """An access token for a client-credentials client, for `resource`."""
        answer = httpx.post(
            f"{self.issuer}/token",
            auth=(client_id, SECRET),
            data={"grant_type": "client_credentials", "scope": scope, "resource": resource},
        )
        assert answer.status_code == 200, answer.text
        return str(answer.json()["access_token"])


@contextlib.contextmanager
def running(provider: OidcProvider) -> Iterator[OidcProvider]:
    provider.start()
    try:
        yield provider
    finally:
        provider.stop()


_FORM_ACTION = re.compile(r'<form[^>]*action="([^"]+)"', re.I)


async def user_login(authorization_url: str, login: str) -> tuple[str, str | None]:
    """Play the person: open the authorization URL, log in as `login` (any password) on the provider's
    login page, confirm its consent page, and return the (code, state) it redirects back with."""
    async with httpx.AsyncClient(follow_redirects=False, timeout=30) as browser:
        url = authorization_url
        for _ in range(12):
            page = await browser.get(url)
            if page.status_code in (302, 303):
                location = urljoin(url, page.headers["location"])
                query = parse_qs(urlsplit(location).query)
                if "code" in query:
                    return query["code"][0], query.get("state", [None])[0]
                if "error" in query:
                    raise AssertionError(f"the provider refused: {query}")
                url = location
                continue
            assert page.status_code == 200, page.text[:500]
            action = _FORM_ACTION.search(page.text)
            assert action, page.text[:500]
            target = urljoin(url, unescape(action.group(1)))
            fields: dict[str, Any] = {"prompt": "login", "login": login, "password": "any"}
            if 'name="prompt" value="consent"' in page.text:
                fields = {"prompt": "consent"}
            posted = await browser.post(target, data=fields)
            assert posted.status_code in (302, 303), posted.text[:500]
            url = urljoin(target, posted.headers["location"])
    raise AssertionError("the login did not end with a code")
