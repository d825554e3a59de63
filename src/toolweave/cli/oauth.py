"""`toolweave login BACKEND` and `toolweave logout BACKEND`: the local user's OAuth grant to a backend
with `[backends.oauth]`, kept encrypted in the config's database; `tools`/`call --local` use it.

`login` opens the authorization URL with Python's `webbrowser` (so `BROWSER` is honoured), prints it
too, and listens on a loopback port for the redirect; where no browser opens it still listens, so
whoever follows the printed URL completes it. A login is proven by using it: the backend's tools are
listed with the new token.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from toolweave.cli.common import ConfigOption, err, load_config_or_exit, out

if TYPE_CHECKING:
    from toolweave.config.models import BackendConfig, Config
    from toolweave.credentials.backends import OAuthBackends

BackendArgument = Annotated[str, typer.Argument(help="The backend's name (one with [backends.oauth])")]


def login(backend: BackendArgument, config: ConfigOption = None) -> None:
    """Authorize toolweave to call BACKEND as you (OAuth); prints who is logged in."""
    cfg = load_config_or_exit(config)
    target = _oauth_backend(cfg, backend)

    async def run() -> Any:
        from toolweave.credentials.backends import LOCAL, loopback_port
        from toolweave.credentials.oauth import (
            GrantStorage,
            LoopbackAuthorizer,
            NoPerson,
            authorize,
            build_auth,
            owner_of,
        )

        assert target.oauth is not None
        async with grants_of(cfg, interactive=True) as grants:
            assert grants is not None
            storage = GrantStorage(grants.store, *owner_of(target.oauth, LOCAL), target.name)
            if target.url is None:
                return await _login_api(target, storage)
            if target.oauth.grant != "authorization_code":
                return await authorize(
                    target, build_auth(target, storage, NoPerson("", target.name)), storage
                )
            port = loopback_port(await storage.get_client_info()) or target.oauth.redirect_port
            loopback = await LoopbackAuthorizer(target.name, port).start()
            try:
                return await authorize(target, build_auth(target, storage, loopback), storage)
            finally:
                await loopback.close()

    import asyncio

    try:
        result = asyncio.run(run())
    except Exception as error:  # noqa: BLE001 - every failure of a login is a message and exit 1
        err.print(f"[red]login to {escape(backend)} failed:[/] {escape(_reason(error))}", soft_wrap=True)
        raise typer.Exit(1) from None
    who = f" as {result.who}" if result.who else ""
    details = [f"{result.tools} tools"]
    if result.scope:
        details.append(f"scopes: {result.scope}")
    if result.expires_in is not None:
        details.append(f"token expires in {result.expires_in}s, refreshed as needed")
    out.print(f"Logged in to {escape(backend)}{escape(who)} ({escape('; '.join(details))})", soft_wrap=True)


async def _login_api(target: BackendConfig, storage: Any) -> Any:
    """An HTTP API's login: its document names the authorization server; nothing is listed with the
    token (its tools are the document's), so the token itself proves the login."""
    from toolweave.backends.http.backend import HttpApiBackend
    from toolweave.credentials.oauth import LoopbackAuthorizer, authorize_api, build_api_auth

    assert target.oauth is not None
    backend = HttpApiBackend(target)
    await backend.start()
    try:
        await backend.wait_ready(target.connect_timeout + target.timeout)
        if backend.oauth_server is None or backend.base_url is None:
            raise RuntimeError(backend.last_error or "the API's document did not load in time")
        port = target.oauth.redirect_port
        loopback = await LoopbackAuthorizer(target.name, port).start()
        try:
            auth = build_api_auth(target, backend.oauth_server, storage, loopback, backend.base_url)
            return await authorize_api(auth, storage, len(backend.tools))
        finally:
            await loopback.close()
    finally:
        await backend.stop()


def logout(backend: BackendArgument, config: ConfigOption = None) -> None:
    """Forget your OAuth grant to BACKEND (and revoke it at its authorization server where offered)."""
    cfg = load_config_or_exit(config)
    target = _oauth_backend(cfg, backend)

    async def run() -> bool:
        from toolweave.actor import cli_actor
        from toolweave.credentials.backends import LOCAL, OAuthBackends
        from toolweave.store import AuditRepository, OAuthTokenRepository

        async with _database(cfg) as db:
            grants = OAuthBackends(OAuthTokenRepository(db, via="cli"), interactive=True)
            try:
                forgot = await grants.logout(target, LOCAL)
            finally:
                await grants.close()
            if forgot:  # as the UI's Disconnect records it
                await AuditRepository(db).record(
                    cli_actor(),
                    "oauth.disconnected",
                    tenant=None,
                    object_type="backend",
                    object_id=target.name,
                    object_name=target.name,
                )
            return forgot

    import asyncio

    if asyncio.run(run()):
        out.print(f"Logged out of {escape(backend)}")
    else:
        out.print(f"Not logged in to {escape(backend)}; nothing to forget")


def _oauth_backend(cfg: Config, name: str) -> BackendConfig:
    found = next((backend for backend in cfg.backends if backend.name == name), None)
    if found is None:
        names = ", ".join(b.name for b in cfg.backends if b.oauth is not None) or "none"
        err.print(f"[red]no backend {escape(name)!r}[/] (backends with [backends.oauth]: {escape(names)})")
        raise typer.Exit(2)
    if found.oauth is None:
        err.print(f"[red]backend {escape(name)!r} has no [backends.oauth][/]: it does not use OAuth")
        raise typer.Exit(2)
    return found


@contextlib.asynccontextmanager
async def grants_of(cfg: Config, *, interactive: bool) -> AsyncIterator[OAuthBackends | None]:
    """The local user's grants in the config's database (None when no backend uses OAuth)."""
    if not any(backend.oauth is not None for backend in cfg.backends):
        yield None
        return
    from toolweave.credentials.backends import OAuthBackends
    from toolweave.store import OAuthTokenRepository

    async with _database(cfg) as db:
        grants = OAuthBackends(OAuthTokenRepository(db, via="cli"), interactive=interactive)
        try:
            yield grants
        finally:
            await grants.close()


@contextlib.asynccontextmanager
async def _database(cfg: Config) -> AsyncIterator[Any]:
    """The config's database (`gateway.database`), started, closed after."""
    from toolweave.store import Database

    db = Database.from_url(cfg.gateway.database)
    await db.start()
    try:
        yield db
    finally:
        await db.close()


def _reason(error: BaseException) -> str:
    """One line: the first real error inside task groups, without the SDK's traceback."""
    while isinstance(error, BaseExceptionGroup) and error.exceptions:
        error = error.exceptions[0]
    return str(error) or type(error).__name__
