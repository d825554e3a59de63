"""OAuth grants to backends: the SDK's client flows, fed from and saved to a grant store.

The flow itself (discovery from the 401 challenge and RFC 9728 metadata, RFC 8414 / OpenID
discovery with the 2025-03-26 fallbacks, pre-registration / CIMD / dynamic registration, PKCE S256,
`resource`, scope selection and step-up, RFC 9207 `iss`, refresh) is the official SDK's
`OAuthClientProvider` and its client-credentials and identity-assertion siblings; this module picks
one per `[backends.oauth]`, gives it a `GrantStorage` for one (tenant, user, backend), and a way to
reach a person:

- `LoopbackAuthorizer` (the CLI): opens the authorization URL with `webbrowser` (so `BROWSER` is
  honoured), prints it, and listens on a loopback port for the redirect;
- `CallbackAuthorizer` (a served gateway): hands the URL to whoever asked (an agent's call, the UI)
  and waits, off the call's path, for the gateway's own `/oauth/callback` (`PendingLogins`);
- `NoPerson`: a backend connection serving calls never waits for a person; when its flow needs one
  it records why on the connection's `TokenAuth.required` and fails (the call says where to go).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import sys
import time
import warnings
import webbrowser
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Protocol
from urllib.parse import parse_qs, urlsplit

import httpx2
from mcp.client.auth import OAuthFlowError, OAuthTokenError
from mcp.client.auth.extensions.client_credentials import (
    ClientCredentialsOAuthProvider,
    PrivateKeyJWTOAuthProvider,
    SignedJWTParameters,
)
from mcp.client.auth.extensions.identity_assertion import IdentityAssertionOAuthProvider
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)

from toolweave.backends.base import TokenAuth
from toolweave.backends.errors import AuthorizationRequired
from toolweave.backends.http.oauth import ApiAuthServer
from toolweave.config.models import BackendConfig
from toolweave.config.oauth import BackendOAuth
from toolweave.executor.session import Session
from toolweave.wire import sdk_compat

logger = logging.getLogger("toolweave.credentials")

SHARED = "*"
"""The user of a backend's one shared grant (`per_user = false`, client credentials)."""
EXPIRY_MARGIN = 60
"""Seconds before its expiry a stored access token counts as expired, so it is refreshed first."""
LOGIN_TTL = 600.0
"""How long a started authorization waits for its person (seconds)."""
MAX_AUTHORIZATIONS = 2
"""Person-authorizations one loopback authorizer asks for (a login, then one step-up): a server that
keeps answering `insufficient_scope` must not open browser after browser."""
CLIENT_NAME = "toolweave"
TOKEN_EXCHANGE = "urn:ietf:params:oauth:grant-type:token-exchange"
ID_TOKEN_TYPE = "urn:ietf:params:oauth:token-type:id_token"
ID_JAG_TYPE = "urn:ietf:params:oauth:token-type:id-jag"


def user_of(session: Session) -> str:
    """The "user" of a (tenant, user, backend) grant: who acts (the IdP subject of an OAuth caller, an
    API key's label, `local` for the operator without auth)."""
    return session.caller


def owner_of(oauth: BackendOAuth, session: Session) -> tuple[str | None, str]:
    """(tenant, user) whose grant a call of `session` uses: its own, or the backend's shared one."""
    if oauth.shared:
        return None, SHARED
    return session.tenant, user_of(session)


class GrantStore(Protocol):
    """Where grants live (`store.OAuthTokenRepository`, or `MemoryGrants`)."""

    async def get(self, tenant: str | None, subject: str, backend: str) -> dict[str, Any] | None: ...

    async def put(
        self,
        tenant: str | None,
        subject: str,
        backend: str,
        grant: dict[str, Any],
        *,
        scope: str | None = None,
        expires_at: datetime | None = None,
    ) -> None: ...

    async def delete(self, tenant: str | None, subject: str, backend: str) -> bool: ...


class MemoryGrants:
    """Grants for one process (the Python API without a database, tests)."""

    def __init__(self) -> None:
        self._grants: dict[tuple[str | None, str, str], dict[str, Any]] = {}

    async def get(self, tenant: str | None, subject: str, backend: str) -> dict[str, Any] | None:
        found = self._grants.get((tenant, subject, backend))
        return dict(found) if found is not None else None

    async def put(
        self,
        tenant: str | None,
        subject: str,
        backend: str,
        grant: dict[str, Any],
        *,
        scope: str | None = None,
        expires_at: datetime | None = None,
    ) -> None:
        self._grants[(tenant, subject, backend)] = dict(grant)

    async def delete(self, tenant: str | None, subject: str, backend: str) -> bool:
        return self._grants.pop((tenant, subject, backend), None) is not None


class GrantStorage:
    """The SDK's `TokenStorage` for one (tenant, user, backend), on a `GrantStore`.

    A stored access token comes back with `expires_in` counted from now (less `EXPIRY_MARGIN`), so a
    restarted gateway refreshes an old token before using it rather than meeting a 401.
    """

    def __init__(
        self,
        store: GrantStore,
        tenant: str | None,
        subject: str,
        backend: str,
        preregistered: OAuthClientInformationFull | None = None,
    ) -> None:
        self.store = store
        self.owner = (tenant, subject, backend)
        self.preregistered = preregistered
        """A client registered out of band (`client_id` in the config): used as is, never stored."""
        self._grant: dict[str, Any] | None = None
        self.tokens: OAuthToken | None = None
        self.expiry: float | None = None
        self.revocation_endpoint: str | None = None

    def __repr__(self) -> str:
        return f"GrantStorage({self.owner!r})"

    async def _load(self) -> dict[str, Any]:
        if self._grant is None:
            self._grant = await self.store.get(*self.owner) or {}
        return self._grant

    async def has_grant(self) -> bool:
        return bool((await self._load()).get("tokens"))

    async def get_tokens(self) -> OAuthToken | None:
        grant = await self._load()
        raw = grant.get("tokens")
        if not raw:
            return None
        tokens = OAuthToken.model_validate(raw)
        expires_at = grant.get("expires_at")
        if expires_at is not None:
            tokens.expires_in = max(0, int(expires_at - time.time()) - EXPIRY_MARGIN)
        self._remember(tokens)
        return tokens

    def _remember(self, tokens: OAuthToken) -> None:
        self.tokens = tokens
        self.expiry = time.time() + int(tokens.expires_in) if tokens.expires_in is not None else None

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self._remember(tokens)
        grant = await self._load()
        grant["tokens"] = tokens.model_dump(mode="json", exclude_none=True)
        grant["expires_at"] = self.expiry
        if self.revocation_endpoint:
            grant["revocation_endpoint"] = self.revocation_endpoint
        await self._save()

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        if self.preregistered is not None:
            return self.preregistered
        raw = (await self._load()).get("client")
        return OAuthClientInformationFull.model_validate(raw) if raw else None

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        if self.preregistered is not None:
            return
        grant = await self._load()
        grant["client"] = client_info.model_dump(mode="json", exclude_none=True)
        await self._save()

    async def _save(self) -> None:
        grant = await self._load()
        expires = grant.get("expires_at")
        tokens = grant.get("tokens") or {}
        await self.store.put(
            *self.owner,
            grant,
            scope=tokens.get("scope"),
            expires_at=datetime.fromtimestamp(expires, UTC) if expires else None,
        )

    async def forget(self) -> dict[str, Any]:
        """Delete the grant; returns what it held (for revocation)."""
        grant = await self._load()
        await self.store.delete(*self.owner)
        self._grant = {}
        self.tokens = None
        return grant

    def bearer(self) -> str | None:
        """The `Authorization` value while the access token is valid (the lean call path's header)."""
        tokens = self.tokens
        if tokens is None or (self.expiry is not None and time.time() >= self.expiry):
            return None
        return f"Bearer {tokens.access_token}"


# -- reaching a person ------------------------------------------------------------------


class Authorizer(Protocol):
    redirect_uri: str

    async def redirect(self, url: str) -> None: ...

    async def callback(self) -> AuthorizationCodeResult: ...


class NoPerson:
    """A connection serving calls: never waits for a person; says the backend needs one, and fails."""

    def __init__(self, redirect_uri: str, backend: str) -> None:
        self.redirect_uri = redirect_uri
        self.backend = backend
        self.token_auth: TokenAuth | None = None

    async def redirect(self, url: str) -> None:
        message = f"backend {self.backend!r} needs you to authorize it (again)"
        if self.token_auth is not None:
            self.token_auth.required = message
        raise AuthorizationRequired(message)

    async def callback(self) -> AuthorizationCodeResult:  # pragma: no cover - redirect always raises
        raise AuthorizationRequired(f"backend {self.backend!r} needs you to authorize it")


class LoopbackAuthorizer:
    """The CLI's: the browser (`webbrowser`, `BROWSER`) and a listener on 127.0.0.1 for the redirect.

    When no browser opens, it still listens: whoever follows the printed URL (a person on another
    machine with port forwarding, a script with `curl -L`) completes the login.
    """

    def __init__(self, backend: str, port: int = 0, *, say: Callable[[str], None] | None = None) -> None:
        self.backend = backend
        self._port = port
        self._server: asyncio.Server | None = None
        self._result: asyncio.Future[AuthorizationCodeResult] | None = None
        self._say = say or (lambda line: print(line, file=sys.stderr, flush=True))
        self.redirect_uri = ""
        self.authorizations = 0

    async def start(self) -> LoopbackAuthorizer:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", self._port)
        port = self._server.sockets[0].getsockname()[1]
        self.redirect_uri = f"http://127.0.0.1:{port}/callback"
        return self

    async def close(self) -> None:
        if self._server is not None:
            self._server.close()
            with contextlib.suppress(Exception):
                await self._server.wait_closed()

    async def redirect(self, url: str) -> None:
        self.authorizations += 1
        if self.authorizations > MAX_AUTHORIZATIONS:
            raise OAuthFlowError(
                f"backend {self.backend!r} still refuses after {MAX_AUTHORIZATIONS} authorizations; giving up"
            )
        self._result = asyncio.get_running_loop().create_future()
        self._say(f"To authorize {self.backend}, open this URL in a browser:\n  {url}")
        opened = await asyncio.to_thread(_open_browser, url)
        if not opened:
            self._say(f"(no browser could be opened; waiting for the redirect to {self.redirect_uri})")

    async def callback(self) -> AuthorizationCodeResult:
        assert self._result is not None
        try:
            return await asyncio.wait_for(self._result, LOGIN_TTL)
        except TimeoutError:
            raise OAuthFlowError(f"nobody authorized {self.backend!r} within {LOGIN_TTL:g}s") from None

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
            target = head.split(b" ", 2)[1].decode("latin-1")
            parts = urlsplit(target)
            query = {key: values[0] for key, values in parse_qs(parts.query).items()}
            if parts.path != "/callback" or self._result is None or self._result.done():
                writer.write(_html(404, "Not an authorization in progress."))
                return
            if "error" in query:
                why = query.get("error_description") or query["error"]
                self._result.set_exception(OAuthFlowError(f"the authorization server refused: {why}"))
                writer.write(_html(400, f"Authorization refused: {why}"))
                return
            if not query.get("code"):
                writer.write(_html(400, "The redirect carries no authorization code."))
                return
            self._result.set_result(
                AuthorizationCodeResult(code=query["code"], state=query.get("state"), iss=query.get("iss"))
            )
            writer.write(_html(200, f"toolweave: {self.backend} is authorized. You can close this window."))
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, TimeoutError, IndexError):
            pass
        finally:
            with contextlib.suppress(Exception):
                await writer.drain()
                writer.close()


def _open_browser(url: str) -> bool:
    try:
        return bool(webbrowser.open(url))
    except Exception:  # noqa: BLE001 - no browser is a normal case (a server, a container)
        return False


def _html(status: int, text: str) -> bytes:
    from html import escape

    body = f"<!doctype html><title>toolweave</title><p>{escape(text)}</p>".encode()
    reason = {200: "OK", 400: "Bad Request", 404: "Not Found"}[status]
    head = f"HTTP/1.1 {status} {reason}\r\ncontent-type: text/html; charset=utf-8\r\n"
    return head.encode() + f"content-length: {len(body)}\r\nconnection: close\r\n\r\n".encode() + body


@dataclass
class _Pending:
    result: asyncio.Future[AuthorizationCodeResult]
    done: asyncio.Future[str]
    backend: str
    created: float


class SharedPending(Protocol):
    """Where the gateways on one database meet over an authorization (`store.PendingAuthorizations`)."""

    async def add(self, state: str, backend: str, ttl: float) -> None: ...

    async def claim(self, state: str, redirect: dict[str, Any]) -> str | None: ...

    async def redirects(self, states: list[str]) -> dict[str, dict[str, Any]]: ...

    async def finish(self, state: str, ok: bool, outcome: str) -> None: ...

    async def outcome(self, state: str) -> tuple[bool, str] | None: ...

    async def forget(self, state: str) -> None: ...


POLL = 0.25
"""Seconds between looks at the shared table: by the starter for its claimed redirects, by the
gateway that took a callback for the outcome (only while there is one to wait for)."""
OUTCOME_WAIT = 60.0
"""How long `/oauth/callback` waits for the authorization it completed to finish (the token exchange)."""


class PendingLogins:
    """Authorizations a served gateway started, by their `state`, until `/oauth/callback` completes them.

    The flow (and its PKCE verifier) stays in the memory of the gateway that started it. With `shared`
    (the database, every served gateway) the callback may reach any gateway on that database: it
    claims the authorization there, once, and the starter picks the code up (`store.oauth_pending`).
    Without it (the Python API), the callback must reach this process.
    """

    def __init__(self, shared: SharedPending | None = None) -> None:
        self._pending: dict[str, _Pending] = {}
        self.shared = shared
        self._poller: asyncio.Task[None] | None = None
        self._tasks: set[asyncio.Task[Any]] = set()

    def _expire(self) -> None:
        now = time.monotonic()
        for state, pending in list(self._pending.items()):
            if now - pending.created > LOGIN_TTL or pending.done.done():
                self._pending.pop(state, None)

    async def register(self, state: str, backend: str) -> _Pending:
        self._expire()
        loop = asyncio.get_running_loop()
        pending = _Pending(loop.create_future(), loop.create_future(), backend, time.monotonic())
        self._pending[state] = pending
        if self.shared is not None:
            await self.shared.add(state, backend, LOGIN_TTL)
            pending.done.add_done_callback(lambda done: self._later(self._finished(state, done)))
            if self._poller is None or self._poller.done():
                self._poller = loop.create_task(self._pick_up(), name="oauth-callbacks")
        return pending

    async def complete(self, state: str, code: str | None, iss: str | None, error: str | None) -> str:
        """Hand the redirect to the waiting authorization; its outcome in words (raises LookupError
        for an unknown, expired or already used `state`)."""
        self._expire()
        redirect = {"code": code, "iss": iss, "error": error}
        pending = self._pending.pop(state, None)
        if pending is None:
            return await self._complete_elsewhere(state, redirect)
        if self.shared is not None and await self.shared.claim(state, redirect) is None:
            raise LookupError("no authorization in progress for this link (expired, or already used)")
        _resolve(pending, state, redirect)
        try:
            return await asyncio.wait_for(asyncio.shield(pending.done), OUTCOME_WAIT)
        finally:
            if self.shared is not None:
                await self.shared.forget(state)

    async def _complete_elsewhere(self, state: str, redirect: dict[str, Any]) -> str:
        """A callback for an authorization another gateway started: claim it, wait for its outcome."""
        if self.shared is None or await self.shared.claim(state, redirect) is None:
            raise LookupError("no authorization in progress for this link (expired, or already used)")
        deadline = time.monotonic() + OUTCOME_WAIT
        try:
            while time.monotonic() < deadline:
                found = await self.shared.outcome(state)
                if found is not None:
                    ok, outcome = found
                    if not ok:
                        raise OAuthFlowError(outcome)
                    return outcome
                await asyncio.sleep(POLL)
        finally:
            await self.shared.forget(state)
        raise OAuthFlowError(f"the authorization did not finish within {OUTCOME_WAIT:g}s")

    async def _pick_up(self) -> None:
        """While this gateway waits for people: take the redirects other gateways claimed for it."""
        assert self.shared is not None
        while True:
            self._expire()
            if not self._pending:
                return
            try:
                found = await self.shared.redirects(list(self._pending))
            except Exception:  # the database blinked: look again next time
                logger.warning("cannot read pending OAuth authorizations", exc_info=True)
                found = {}
            for state, redirect in found.items():
                pending = self._pending.pop(state, None)
                if pending is not None:
                    _resolve(pending, state, redirect)
            await asyncio.sleep(POLL)

    async def _finished(self, state: str, done: asyncio.Future[str]) -> None:
        assert self.shared is not None
        if done.cancelled():
            ok, outcome = False, "the authorization was cancelled"
        elif done.exception() is not None:
            ok, outcome = False, str(done.exception()) or type(done.exception()).__name__
        else:
            ok, outcome = True, done.result()
        try:
            await self.shared.finish(state, ok, outcome)
        except Exception:  # the callback page then says it did not finish in time
            logger.warning("cannot record how an OAuth authorization ended", exc_info=True)

    def _later(self, work: Any) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def close(self) -> None:
        for task in [self._poller, *self._tasks]:
            if task is not None and not task.done():
                task.cancel()
        await asyncio.gather(*(t for t in [self._poller, *self._tasks] if t), return_exceptions=True)


def _resolve(pending: _Pending, state: str, redirect: dict[str, Any]) -> None:
    if pending.result.done():
        return
    if redirect.get("error") or not redirect.get("code"):
        why = redirect.get("error") or "no code"
        pending.result.set_exception(OAuthFlowError(f"the authorization server refused: {why}"))
    else:
        pending.result.set_result(
            AuthorizationCodeResult(code=redirect["code"], state=state, iss=redirect.get("iss"))
        )


class CallbackAuthorizer:
    """A served gateway's: the URL goes to whoever asked; the code comes back on `/oauth/callback`."""

    def __init__(self, pending: PendingLogins, redirect_uri: str, backend: str) -> None:
        self.redirect_uri = redirect_uri
        self.backend = backend
        self._logins = pending
        self.url: asyncio.Future[str] = asyncio.get_running_loop().create_future()
        self.entry: _Pending | None = None

    async def redirect(self, url: str) -> None:
        state = parse_qs(urlsplit(url).query).get("state", [""])[0]
        self.entry = await self._logins.register(state, self.backend)
        if not self.url.done():
            self.url.set_result(url)

    async def callback(self) -> AuthorizationCodeResult:
        assert self.entry is not None
        try:
            return await asyncio.wait_for(asyncio.shield(self.entry.result), LOGIN_TTL)
        except TimeoutError:
            raise OAuthFlowError(f"nobody authorized {self.backend!r} within {LOGIN_TTL:g}s") from None


# -- the flows ---------------------------------------------------------------------------


def build_auth(
    backend: BackendConfig,
    storage: GrantStorage,
    authorizer: Authorizer | NoPerson,
    *,
    subject_token: str | None = None,
) -> TokenAuth:
    """The SDK flow `[backends.oauth]` asks for, on `storage`, reaching a person through `authorizer`."""
    oauth = backend.oauth
    assert oauth is not None and backend.url
    url = backend.url
    scope = " ".join(oauth.scopes) if oauth.scopes else None
    secret = oauth.client_secret.get_secret_value() if oauth.client_secret else None
    auth: httpx2.Auth
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # `issuer` omitted: discovery decides, as the SDK's 2.x default
        if oauth.grant == "client_credentials" and oauth.private_key is not None:
            assert oauth.client_id is not None
            signer = SignedJWTParameters(
                issuer=oauth.client_id,
                subject=oauth.client_id,
                signing_key=oauth.private_key.get_secret_value(),
                signing_algorithm=oauth.private_key_alg,
            )
            auth = sdk_compat.refreshing(PrivateKeyJWTOAuthProvider)(
                url, storage, oauth.client_id, signer.create_assertion_provider(), scope, oauth.issuer
            )
        elif oauth.grant == "client_credentials":
            assert oauth.client_id is not None and secret is not None
            auth = sdk_compat.refreshing(ClientCredentialsOAuthProvider)(
                url, storage, oauth.client_id, secret, "client_secret_basic", scope, oauth.issuer
            )
        elif oauth.grant == "token_exchange":
            assert oauth.client_id and secret and oauth.issuer
            auth = IdentityAssertionOAuthProvider(
                url,
                storage,
                oauth.client_id,
                secret,
                oauth.issuer,
                _id_jag_exchange(oauth, subject_token),
                scope,
                "client_secret_basic",
            )
        else:
            auth = _authorization_code(backend, oauth, storage, authorizer, scope, secret)
    token_auth = TokenAuth(auth, storage.bearer)
    if isinstance(authorizer, NoPerson):
        authorizer.token_auth = token_auth
    return token_auth


def _authorization_code(
    backend: BackendConfig,
    oauth: BackendOAuth,
    storage: GrantStorage,
    authorizer: Authorizer | NoPerson,
    scope: str | None,
    secret: str | None,
) -> httpx2.Auth:
    redirect_uri = authorizer.redirect_uri
    metadata = OAuthClientMetadata(
        client_name=CLIENT_NAME,
        redirect_uris=[redirect_uri],  # type: ignore[list-item]
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="client_secret_basic",
    )
    if oauth.client_id:
        storage.preregistered = OAuthClientInformationFull(
            client_id=oauth.client_id,
            client_secret=secret,
            redirect_uris=[redirect_uri],  # type: ignore[list-item]
            token_endpoint_auth_method="client_secret_basic" if secret else "none",
        )
    assert backend.url is not None
    return sdk_compat.ScopedOAuthProvider(
        backend.url,
        metadata,
        storage,
        authorizer.redirect,
        authorizer.callback,
        client_metadata_url=oauth.client_metadata_url,
        configured_scope=scope,
        on_metadata=lambda found: setattr(storage, "revocation_endpoint", found),
    )


def build_api_auth(
    backend: BackendConfig,
    server: ApiAuthServer,
    storage: GrantStorage,
    authorizer: Authorizer | NoPerson,
    base_url: str,
) -> TokenAuth:
    """The authorization-code flow of an HTTP API (`[backends.oauth]` on `openapi`/`http`), whose
    authorization server its OpenAPI security scheme or configured issuer named (`server`)."""
    oauth = backend.oauth
    assert oauth is not None
    secret = oauth.client_secret.get_secret_value() if oauth.client_secret else None
    redirect_uri = authorizer.redirect_uri
    metadata = OAuthClientMetadata(
        client_name=CLIENT_NAME,
        redirect_uris=[redirect_uri],  # type: ignore[list-item]
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        token_endpoint_auth_method="client_secret_basic" if secret else "none",
    )
    if oauth.client_id:
        storage.preregistered = OAuthClientInformationFull(
            client_id=oauth.client_id,
            client_secret=secret,
            redirect_uris=[redirect_uri],  # type: ignore[list-item]
            token_endpoint_auth_method="client_secret_basic" if secret else "none",
        )
    if server.metadata.revocation_endpoint is not None:
        storage.revocation_endpoint = str(server.metadata.revocation_endpoint)
    auth = sdk_compat.KnownServerOAuthProvider(
        base_url,
        metadata,
        storage,
        authorizer.redirect,
        authorizer.callback,
        metadata=server.metadata,
        scope=server.scope,
    )
    token_auth = TokenAuth(auth, storage.bearer)
    if isinstance(authorizer, NoPerson):
        authorizer.token_auth = token_auth
    return token_auth


async def authorize_api(token_auth: TokenAuth, storage: GrantStorage, tools: int) -> LoginResult:
    """Authorize an HTTP API now (a person, through the flow's authorizer) and store the grant."""
    assert isinstance(token_auth.auth, sdk_compat.KnownServerOAuthProvider)
    async with httpx2.AsyncClient(timeout=30, follow_redirects=False) as http:
        await token_auth.auth.authorize_now(http)
    return _login_result(storage, tools)


def _login_result(storage: GrantStorage, tools: int) -> LoginResult:
    tokens = storage.tokens
    return LoginResult(
        tools=tools,
        scope=tokens.scope if tokens else None,
        expires_in=int(tokens.expires_in) if tokens and tokens.expires_in is not None else None,
        who=_subject_of(tokens.access_token) if tokens else None,
    )


def _id_jag_exchange(oauth: BackendOAuth, subject_token: str | None) -> Callable[[str, str], Any]:
    """SEP-990 leg 1 (RFC 8693 at the enterprise IdP): the caller's ID token for an ID-JAG naming the
    backend's authorization server (`audience`) and the MCP server (`resource`)."""

    async def exchange(audience: str, resource: str) -> str:
        token = subject_token or (oauth.subject_token.get_secret_value() if oauth.subject_token else None)
        if not token:
            raise AuthorizationRequired("token exchange needs the caller's IdP token, and there is none")
        form = {
            "grant_type": TOKEN_EXCHANGE,
            "subject_token": token,
            "subject_token_type": ID_TOKEN_TYPE,
            "requested_token_type": ID_JAG_TYPE,
            "audience": audience,
            "resource": resource,
            "client_id": oauth.idp_client_id or "",
        }
        if oauth.idp_client_secret is not None:
            form["client_secret"] = oauth.idp_client_secret.get_secret_value()
        assert oauth.idp_token_endpoint is not None
        async with httpx2.AsyncClient(timeout=30) as http:
            answer = await http.post(oauth.idp_token_endpoint, data=form)
        if answer.status_code != 200:
            raise OAuthTokenError(f"the IdP refused the token exchange (HTTP {answer.status_code})")
        body = answer.json()
        if body.get("issued_token_type") not in (None, ID_JAG_TYPE) or not body.get("access_token"):
            raise OAuthTokenError("the IdP's token exchange answer carries no ID-JAG")
        return str(body["access_token"])

    return exchange


@dataclass
class LoginResult:
    tools: int
    scope: str | None
    expires_in: int | None
    who: str | None


async def authorize(backend: BackendConfig, token_auth: TokenAuth, storage: GrantStorage) -> LoginResult:
    """Connect to the backend with `token_auth` (its flow runs on the first 401) and list its tools: a
    login that is proven by using it."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    assert backend.url is not None
    http = sdk_compat.create_http_client(dict(backend.headers) or None, auth=token_auth.auth)
    async with http, Client(streamable_http_client(backend.url, http_client=http)) as client:
        listed = await client.list_tools()
    return _login_result(storage, len(listed.tools))


def _subject_of(access_token: str) -> str | None:
    """Whom a JWT access token names (display only, unverified: the backend verifies it); None for
    opaque tokens."""
    import jwt

    try:
        claims = jwt.decode(access_token, options={"verify_signature": False})
    except jwt.PyJWTError:
        return None
    for key in ("preferred_username", "email", "sub"):
        if isinstance(claims.get(key), str):
            return str(claims[key])
    return None


async def revoke(grant: dict[str, Any], client: dict[str, Any] | None) -> bool:
    """RFC 7009: tell the authorization server the grant's tokens are no longer wanted (best effort)."""
    endpoint = grant.get("revocation_endpoint")
    tokens = grant.get("tokens") or {}
    if not endpoint or not tokens:
        return False
    client = client or grant.get("client") or {}
    revoked = False
    async with httpx2.AsyncClient(timeout=10) as http:
        for kind in ("refresh_token", "access_token"):
            if not tokens.get(kind):
                continue
            form = {"token": tokens[kind], "token_type_hint": kind}
            auth = None
            if client.get("client_secret"):
                auth = httpx2.BasicAuth(client.get("client_id", ""), client["client_secret"])
            elif client.get("client_id"):
                form["client_id"] = client["client_id"]
            with contextlib.suppress(httpx2.HTTPError):
                answer = await (
                    http.post(endpoint, data=form)
                    if auth is None
                    else http.post(endpoint, data=form, auth=auth)
                )
                revoked = revoked or answer.status_code == 200
    return revoked
