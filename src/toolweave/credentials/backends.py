"""Backend connections of `[backends.oauth]` backends, one per owner of a grant.

The gateway's own connection to such a backend (the one whose tools fill the catalog) uses the
local operator's grant (`toolweave login`), else the most recently used grant of anyone, else it waits
as `unauthorized`. A call uses its caller's grant (`owner_of`): the same connection when the owner is
the same, else a connection of the caller's own, opened at the first call that reaches the backend
and kept. A caller without a grant gets an `isError` result with the URL to visit (a served gateway)
or the command to run (the CLI); a 2025-11-25 client that declared URL-mode elicitation is sent the
URL as an elicitation, and the call goes on once the authorization completes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, runtime_checkable

import mcp_types as types

from toolweave.backends.base import Backend, TokenAuth
from toolweave.backends.errors import AuthorizationRequired
from toolweave.backends.mcp import MCPBackend
from toolweave.config.models import BackendConfig
from toolweave.credentials.oauth import (
    LOGIN_TTL,
    CallbackAuthorizer,
    GrantStorage,
    GrantStore,
    LoginResult,
    LoopbackAuthorizer,
    NoPerson,
    PendingLogins,
    SharedPending,
    authorize,
    authorize_api,
    build_api_auth,
    build_auth,
    owner_of,
    revoke,
)
from toolweave.executor.session import Session
from toolweave.results import error_result
from toolweave.wire import relay

logger = logging.getLogger("toolweave.credentials")
Owner = tuple[str | None, str]
LOCAL = Session()
"""The caller of the CLI and of a gateway without auth: tenant None, user `local`."""
LINK_MARGIN = 60.0
"""A link is given again only while it has at least this long (seconds) left to be followed."""
URL_WAIT = 300.0
"""How long a call whose client accepted a URL elicitation waits for the authorization to complete."""


@runtime_checkable
class GrantViews(Protocol):
    """A backend that serves each caller with their own grant (an HTTP API's `HttpApiBackend`)."""

    def grant_view(self, token_auth: TokenAuth) -> Backend: ...


class OAuthBackends:
    """The grants' side of the gateway: the listing connections' token flows, the per-caller
    connections (the executor's backend resolver for OAuth backends), logins and logouts.

    `interactive`: the CLI (a step-up opens the browser again); else a served gateway, whose
    authorizations complete at `callback_url` (its `/oauth/callback`).
    """

    def __init__(
        self,
        store: GrantStore,
        *,
        interactive: bool = False,
        callback_url: str | None = None,
        subject_token_of: Callable[[Session], str | None] | None = None,
        shared_pending: SharedPending | None = None,
    ) -> None:
        """`shared_pending`: authorizations in progress in the database, so that `/oauth/callback`
        completes them on whichever gateway on that database it reaches."""
        self.store = store
        self.interactive = interactive
        self.callback_url = callback_url or "http://127.0.0.1/oauth/callback"
        self.pending = PendingLogins(shared_pending)
        self._subject_token_of = subject_token_of or (lambda _session: None)
        self._listing: dict[str, Owner] = {}
        self._shared: dict[str, Backend] = {}
        self._opened: dict[tuple[Owner, str], MCPBackend] = {}
        self._views: dict[tuple[Owner, str], Backend] = {}
        self._links: dict[tuple[Owner, str], tuple[str, asyncio.Task[Any], float]] = {}
        """Authorizations in progress that a call started, by caller and backend (`_link_for`)."""
        """HTTP APIs (`openapi`/`http`): the backend as each grant's owner calls it."""
        self._locks: dict[tuple[Owner, str], asyncio.Lock] = {}
        self._loopbacks: list[LoopbackAuthorizer] = []
        self._logins: set[asyncio.Task[Any]] = set()

    # -- the gateway's own connection ------------------------------------------------

    async def listing_auth(self, config: BackendConfig) -> TokenAuth | None:
        """The token flow of the gateway's own connection to `config` (whose tools fill the catalog);
        None for an HTTP API, whose tools its document or actions give without a token."""
        assert config.oauth is not None
        if config.url is None:
            return None
        owner = owner_of(config.oauth, LOCAL)
        storage = GrantStorage(self.store, *owner, config.name)
        if not config.oauth.shared and not await storage.has_grant():
            latest = getattr(self.store, "latest_subject", None)
            found: Owner | None = await latest(config.name) if latest is not None else None
            if found is not None:
                owner = found
                storage = GrantStorage(self.store, *owner, config.name)
        self._listing[config.name] = owner
        has_grant = await storage.has_grant()
        authorizer = await self._authorizer_for(config, storage, has_grant)
        token_auth = build_auth(config, storage, authorizer, subject_token=None)
        if config.oauth.grant == "authorization_code" and not has_grant:
            token_auth.required = self._not_yet(config.name)
        return token_auth

    def adopt(self, backend: Backend) -> None:
        """The gateway's own connection to an OAuth backend (a call by its listing owner uses it)."""
        self._shared[backend.name] = backend

    async def _authorizer_for(
        self, config: BackendConfig, storage: GrantStorage, has_grant: bool
    ) -> LoopbackAuthorizer | NoPerson:
        assert config.oauth is not None
        if self.interactive and has_grant:
            client = await storage.get_client_info()
            port = loopback_port(client) or config.oauth.redirect_port
            loopback = await LoopbackAuthorizer(config.name, port).start()
            self._loopbacks.append(loopback)
            return loopback
        return NoPerson(self._redirect_uri(config, storage), config.name)

    def _redirect_uri(self, config: BackendConfig, storage: GrantStorage) -> str:
        """The redirect URI a non-interactive flow names (the client registered with it)."""
        if self.interactive:
            return f"http://127.0.0.1:{config.oauth.redirect_port if config.oauth else 0}/callback"
        return self.callback_url

    def _not_yet(self, backend: str) -> str:
        if self.interactive:
            return f"not authorized yet: run `toolweave login {backend}`"
        return (
            "not authorized yet: connect it on its page in the web UI, run `toolweave login "
            f"{backend}`, or call one of its tools for a link"
        )

    # -- a caller's connection ------------------------------------------------------

    async def __call__(self, backend: Backend, session: Session) -> Backend:
        config = backend.config
        oauth = config.oauth
        if oauth is None:
            return backend
        if config.url is None:
            return await self._api_view(backend, session)
        owner = owner_of(oauth, session)
        if oauth.shared or owner == self._listing.get(backend.name):
            if backend.status == "unauthorized" and not self.interactive:
                return await self._needs_authorization(config, session, owner)
            return backend
        key = (owner, backend.name)
        async with self._locks.setdefault(key, asyncio.Lock()):
            opened = self._opened.get(key)
            if opened is not None and not _needs_person(opened):
                return opened
            if opened is not None:
                self._opened.pop(key, None)
                await opened.stop()
            storage = GrantStorage(self.store, *owner, backend.name)
            if not await storage.has_grant() and oauth.grant == "authorization_code":
                return await self._needs_authorization(config, session, owner)
            authorizer = NoPerson(self._redirect_uri(config, storage), backend.name)
            token_auth = build_auth(
                config, storage, authorizer, subject_token=self._subject_token_of(session)
            )
            own = MCPBackend(config, token_auth=token_auth)
            await own.start()
            await own.wait_ready(config.connect_timeout)
            if own.status == "unauthorized":
                await own.stop()
                return await self._needs_authorization(config, session, owner)
            self._opened[key] = own
            logger.info(
                "opened backend %s for a caller of tenant %s with their grant", backend.name, owner[0]
            )
            return own

    async def _api_view(self, backend: Backend, session: Session) -> Backend:
        """An HTTP API as the caller's grant calls it: one view per owner, kept; a caller without a grant,
        or whose grant the server refused at the last call, is told where to authorize."""
        config = backend.config
        assert config.oauth is not None
        owner = owner_of(config.oauth, session)
        key = (owner, backend.name)
        async with self._locks.setdefault(key, asyncio.Lock()):
            view = self._views.get(key)
            auth = getattr(view, "token_auth", None)
            if view is not None and auth is not None and auth.required is None:
                return view
            if view is not None:  # its grant was refused (revoked): authorize again
                self._views.pop(key, None)
                return _WithoutGrant(backend, lambda: self._needs_authorization(config, session, owner))
            storage = GrantStorage(self.store, *owner, backend.name)
            if not await storage.has_grant():
                return _WithoutGrant(backend, lambda: self._needs_authorization(config, session, owner))
            server = getattr(backend, "oauth_server", None)
            base_url = getattr(backend, "base_url", None)
            if server is None or base_url is None or not isinstance(backend, GrantViews):
                return backend  # not loaded (yet): its call says why it is unavailable
            authorizer = NoPerson(self._redirect_uri(config, storage), backend.name)
            view = backend.grant_view(build_api_auth(config, server, storage, authorizer, base_url))
            self._views[key] = view
            return view

    async def _needs_authorization(self, config: BackendConfig, session: Session, owner: Owner) -> Backend:
        if self.interactive:
            message = f"not authorized yet: run `toolweave login {config.name}`"
            return _Unauthorized(config, message, None, None, None)
        url, login = await self._link_for(config, owner)
        message = (
            f"not authorized yet: open {url} to authorize toolweave to use it as you, then call again"
            if url
            else "not authorized: the authorization server gave no link to visit"
        )
        shared = self._shared.get(config.name)

        async def again() -> Backend:
            if shared is None:
                return _Unauthorized(config, message, None, None, None)
            return await self(shared, session)

        return _Unauthorized(config, message, url, login, again)

    async def _link_for(self, config: BackendConfig, owner: Owner) -> tuple[str | None, asyncio.Task[Any]]:
        """The authorization link a caller without a grant is given: the one still in progress for
        them, if any (calls made before they authorize do not each start another: one pending
        authorization per caller and backend), else a new one."""
        key = (owner, config.name)
        found = self._links.get(key)
        if found is not None:
            link, pending, started = found
            if not pending.done() and time.monotonic() - started < LOGIN_TTL - LINK_MARGIN:
                return link, pending
            self._links.pop(key, None)
        url, login = await self.start_login(config, owner)
        if url is not None:
            self._links[key] = (url, login, time.monotonic())
            login.add_done_callback(lambda _done: self._links.pop(key, None))
        return url, login

    # -- logins ---------------------------------------------------------------------

    async def start_login(self, config: BackendConfig, owner: Owner) -> tuple[str | None, asyncio.Task[Any]]:
        """Begin an authorization for `owner` that completes at `/oauth/callback`: the URL to visit
        (None when none was needed: the grant was still good) and the task finishing it."""
        storage = GrantStorage(self.store, *owner, config.name)
        authorizer = CallbackAuthorizer(self.pending, self.callback_url, config.name)
        if config.url is None:
            token_auth = self._api_auth(config, storage, authorizer)
        else:
            token_auth = build_auth(config, storage, authorizer)
        task = asyncio.create_task(self._login(config, token_auth, storage, authorizer, owner))
        self._logins.add(task)
        task.add_done_callback(self._logins.discard)
        first: set[asyncio.Future[Any]] = {task, authorizer.url}
        await asyncio.wait(first, return_when=asyncio.FIRST_COMPLETED)
        if authorizer.url.done():
            return authorizer.url.result(), task
        task.result()  # raises what the flow raised before any person was needed
        return None, task

    def _api_auth(self, config: BackendConfig, storage: GrantStorage, authorizer: Any) -> TokenAuth:
        """An HTTP API's token flow, on the authorization server its loaded document named."""
        backend = self._shared.get(config.name)
        server = getattr(backend, "oauth_server", None)
        base_url = getattr(backend, "base_url", None)
        if server is None or base_url is None:
            why = backend.last_error if backend is not None and backend.last_error else "not loaded yet"
            raise AuthorizationRequired(f"backend {config.name!r} cannot be authorized now: {why}")
        return build_api_auth(config, server, storage, authorizer, base_url)

    async def _login(
        self,
        config: BackendConfig,
        token_auth: TokenAuth,
        storage: GrantStorage,
        authorizer: CallbackAuthorizer,
        owner: Owner,
    ) -> LoginResult:
        try:
            if config.url is None:
                backend = self._shared.get(config.name)
                result = await authorize_api(token_auth, storage, len(backend.tools) if backend else 0)
            else:
                result = await authorize(config, token_auth, storage)
        except BaseException as error:
            if authorizer.entry is not None and not authorizer.entry.done.done():
                authorizer.entry.done.set_exception(error)
            if not authorizer.url.done():
                authorizer.url.cancel()
            raise
        self.authorized(config.name, owner)
        if authorizer.entry is not None and not authorizer.entry.done.done():
            authorizer.entry.done.set_result(config.name)
        return result

    def authorized(self, backend: str, owner: Owner) -> None:
        """A grant of `owner` to `backend` was stored: connections waiting for it connect again."""
        self._views.pop((owner, backend), None)
        opened = self._opened.pop((owner, backend), None)
        if opened is not None:
            task = asyncio.get_running_loop().create_task(opened.stop())
            self._logins.add(task)
            task.add_done_callback(self._logins.discard)
        shared = self._shared.get(backend)
        if isinstance(shared, MCPBackend) and _needs_person(shared):
            # the gateway's own connection had no usable grant: it lists with this one now (a fresh
            # flow on fresh storage: the old one holds what it loaded before the grant existed)
            self._listing[backend] = owner
            storage = GrantStorage(self.store, *owner, backend)
            authorizer = NoPerson(self._redirect_uri(shared.config, storage), backend)
            shared.token_auth = build_auth(shared.config, storage, authorizer)
            shared.authorized()

    async def logout(self, config: BackendConfig, session: Session) -> bool:
        """Forget the caller's grant (and tell the authorization server); False when there was none."""
        assert config.oauth is not None
        owner = owner_of(config.oauth, session)
        storage = GrantStorage(self.store, *owner, config.name)
        grant = await storage.forget()
        self._views.pop((owner, config.name), None)
        opened = self._opened.pop((owner, config.name), None)
        if opened is not None:
            await opened.stop()
        if grant.get("tokens"):
            with contextlib.suppress(Exception):
                await revoke(grant, grant.get("client"))
        return bool(grant.get("tokens"))

    async def close(self) -> None:
        for backend in list(self._opened.values()):
            with contextlib.suppress(Exception):
                await backend.stop()
        self._opened.clear()
        for task in list(self._logins):
            task.cancel()
        if self._logins:
            await asyncio.gather(*self._logins, return_exceptions=True)
        for loopback in self._loopbacks:
            await loopback.close()
        await self.pending.close()
        closing = getattr(self.store, "close", None)
        if closing is not None:  # a store this object owns (the Python API's `StoredGrants`)
            await closing()


def _needs_person(backend: MCPBackend) -> bool:
    auth = backend.token_auth
    return backend.status == "unauthorized" or (auth is not None and auth.required is not None)


def loopback_port(client: Any) -> int:
    """The port of a loopback redirect URI the client was registered with (0: none)."""
    from urllib.parse import urlsplit

    for uri in (client.redirect_uris or []) if client is not None else []:
        parts = urlsplit(str(uri))
        if parts.hostname in ("127.0.0.1", "localhost") and parts.port:
            return parts.port
    return 0


class _WithoutGrant(Backend):
    """An HTTP API for a caller without a (usable) grant: its public operations (`security: []`) are
    called as they are; any other starts the caller's authorization and answers where to go."""

    def __init__(self, api: Backend, unauthorized: Callable[[], Awaitable[Backend]]) -> None:
        super().__init__(api.config)
        self._api = api
        self._unauthorized = unauthorized
        self.tools = api.tools
        self.status = api.status

    async def start(self) -> None:  # pragma: no cover - never started: made per call
        return None

    async def stop(self) -> None:  # pragma: no cover
        return None

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        timeout: float | None = None,
        progress: Any = None,
    ) -> types.CallToolResult:
        public = getattr(self._api, "public", None)
        target = self._api if public is not None and public(name) else await self._unauthorized()
        return await target.call_tool(name, arguments, timeout=timeout, progress=progress)


class _Unauthorized(Backend):
    """What a caller without a grant reaches: an `isError` result saying where to authorize."""

    def __init__(
        self,
        config: BackendConfig,
        message: str,
        url: str | None,
        login: asyncio.Task[Any] | None,
        again: Callable[[], Awaitable[Backend]] | None,
    ) -> None:
        super().__init__(config)
        self.status = "unauthorized"
        self._message = message
        self._url = url
        self._login = login
        self._again = again
        """The caller's connection once the authorization completed (the call goes on there)."""

    async def start(self) -> None:  # pragma: no cover - never started: made per call
        return None

    async def stop(self) -> None:  # pragma: no cover
        return None

    async def call_tool(
        self,
        name: str,
        arguments: dict[str, Any],
        *,
        timeout: float | None = None,
        progress: Any = None,
    ) -> types.CallToolResult:
        if self._url is not None and self._login is not None and await self._asked_by_url():
            try:
                await asyncio.wait_for(asyncio.shield(self._login), URL_WAIT)
            except Exception:  # noqa: BLE001 - not completed: the agent gets the link instead
                pass
            else:
                backend = await self._again() if self._again is not None else self
                if not isinstance(backend, _Unauthorized):
                    return await backend.call_tool(name, arguments, timeout=timeout, progress=progress)
        result = error_result(f"backend {self.name!r}: {self._message}")
        if self._url is not None:
            result.meta = {"toolweave": {"authorization_url": self._url, "backend": self.name}}
        return result

    async def _asked_by_url(self) -> bool:
        """A 2025-11-25 client that declared URL-mode elicitation is sent the URL; True if it accepted."""
        channel = relay.calling_client()
        can = getattr(channel, "can_elicit_url", None)
        if channel is None or can is None or not can():
            return False
        params = {
            "mode": "url",
            "message": f"Authorize toolweave to use {self.name} as you",
            "url": self._url,
            "elicitationId": secrets.token_urlsafe(12),
        }
        try:
            answer = await channel.request("elicitation/create", params)
        except Exception:  # noqa: BLE001 - a client that cannot be asked gets the link in the result
            return False
        return answer.get("action") == "accept"
