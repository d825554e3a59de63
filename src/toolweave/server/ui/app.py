"""The UI's request handling: the browser session, who the caller is, CSRF, rendering.

Every page goes through `UiApp.page`: it finds or starts the browser session (setting
the cookie), turns it into the caller's `Session` exactly as the REST API would (the
local operator without auth; the logged-in key's tenant and scopes with it, re-verified
on each request), refuses a state change whose CSRF token is missing or wrong, and adds
the security headers.
"""

from __future__ import annotations

import functools
import hashlib
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

import jinja2
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from toolweave.actor import Actor
from toolweave.executor import Session
from toolweave.identity import Identity
from toolweave.server.actors import actor_for
from toolweave.server.auth import local_session, session_for, session_for_token
from toolweave.server.ui.security import secure
from toolweave.server.ui.sessions import COOKIE, SessionStore, UiSession
from toolweave.services.runtime import ServerRuntime
from toolweave.store.ui_sessions import UiSessionRepository
from toolweave.ui import TEMPLATES

READ, CALL, ADMIN = "tools:read", "tools:call", "tools:admin"
PUBLIC = ""
"""The scope of a page anyone may open (the login page): no caller needed."""
ANONYMOUS = Session(tenant=None, scopes=frozenset(), label="anonymous")
SAFE_METHODS = frozenset({"GET", "HEAD"})


@dataclass(slots=True)
class PageContext:
    """One request as a page sees it."""

    request: Request
    runtime: ServerRuntime
    browser: UiSession
    caller: Session

    def may(self, scope: str) -> bool:
        return scope in self.caller.scopes

    @property
    def actor(self) -> Actor:
        """Who is asking, from where: for the audit record of a change made from this page."""
        return actor_for(self.caller, self.request, "ui")


Handler = Callable[[PageContext], Awaitable[Response]]


@functools.cache
def page_templates() -> jinja2.Environment:
    """The pages' templates, one environment per process: each template is compiled once, not again
    for every gateway served in the process (Jinja caches compiled templates per environment)."""
    templates = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)),
        autoescape=True,  # everything from a backend or a user is escaped, always
        undefined=jinja2.StrictUndefined,
        enable_async=False,
    )
    templates.filters["timestamp"] = _timestamp
    return templates


class UiApp:
    """The web UI of one served gateway: its templates, its browser sessions, its page wrapper."""

    def __init__(self, runtime: ServerRuntime) -> None:
        self.runtime = runtime
        self.sessions = SessionStore(UiSessionRepository(runtime.db, runtime.config.ui.session_idle))
        self.templates = page_templates()
        self.sso_buttons: list[tuple[int, str]] = []
        """(index, name) of the identity providers the login page offers (`sso.SingleSignOn`)."""

    # -- rendering -------------------------------------------------------------

    def render(
        self, context: PageContext | None, template: str, http_status: int = 200, **values: Any
    ) -> Response:
        base: dict[str, Any] = {"ctx": context, "auth": self.runtime.require_auth, "sso": self.sso_buttons}
        if context is not None:
            base.update(csrf=context.browser.csrf, caller=context.caller, path=context.request.url.path)
        else:
            base.update(csrf="", caller=None, path="")
        html = self.templates.get_template(template).render(**base, **values)
        return HTMLResponse(html, status_code=http_status)

    def problem(self, context: PageContext | None, status: int, title: str, message: str) -> Response:
        return self.render(context, "problem.html", http_status=status, title=title, message=message)

    # -- the page wrapper --------------------------------------------------------

    def page(self, handler: Handler, *, scope: str = READ) -> Callable[[Request], Awaitable[Response]]:
        """`handler` behind the session, login, scope and CSRF checks, with the security headers."""

        async def endpoint(request: Request) -> Response:
            if not self.runtime.started:
                return secure(
                    self.problem(None, 503, "Starting", "The gateway is still starting; reload in a moment.")
                )
            browser, fresh = await self._browser(request)
            response = await self._guarded(request, browser, handler, scope)
            if fresh or request.scope.get("toolweave.ui.rotated"):
                self._set_cookie(request, response, request.scope.get("toolweave.ui.rotated") or browser)
            return secure(response)

        endpoint.__name__ = getattr(handler, "__name__", "page")
        return endpoint

    async def _guarded(self, request: Request, browser: UiSession, handler: Handler, scope: str) -> Response:
        rt = self.runtime
        if request.method not in SAFE_METHODS and not browser.csrf_matches(await _csrf_token(request)):
            return self.problem(
                None,
                403,
                "Refused",
                "This form is stale or did not come from this page; reload and try again.",
            )
        caller = await self._caller(browser)
        if caller is None:
            if scope != PUBLIC:
                return _login_redirect(request)
            caller = ANONYMOUS
        context = PageContext(request=request, runtime=rt, browser=browser, caller=caller)
        if scope != PUBLIC and scope not in caller.scopes:
            return self.problem(context, 403, "Not allowed", f"This API key lacks the {scope} scope.")
        return await handler(context)

    async def _caller(self, browser: UiSession) -> Session | None:
        """The operator without auth; with auth, the session's key while it is valid (else None: log in)."""
        rt = self.runtime
        if not rt.require_auth:
            return local_session()
        if browser.identity is not None:
            return await self._identity_caller(browser)
        if browser.key_id is None:
            return None
        info = await rt.key_cache.by_id(browser.key_id)
        if info is None:
            await self.sessions.drop(browser.id)  # revoked or deleted: forget it, ask again
            browser.key_id = None
            return None
        return session_for(info)

    async def _identity_caller(self, browser: UiSession) -> Session | None:
        """A login through an identity provider: what its token said, until the token would expire."""
        found = browser.identity or {}
        try:
            identity = Identity(
                tenant=str(found["tenant"]),
                subject=str(found["subject"]),
                scopes=frozenset(found["scopes"]),
                issuer=str(found["issuer"]),
                expires_at=float(found["expires_at"]),
            )
        except (KeyError, TypeError, ValueError):
            identity = None
        if identity is None or identity.expires_at <= time.time():
            await self.sessions.drop(browser.id)
            browser.identity = browser.key_id = None
            return None
        return session_for_token(identity)

    async def rotate_identity(self, context: PageContext, identity: Identity) -> UiSession:
        """Log the browser in as `identity` (a new session id, as `rotate`)."""
        await self.sessions.drop(context.browser.id)
        person = hashlib.sha256(f"{identity.issuer}#{identity.subject}".encode()).hexdigest()[:28]
        stored = {
            "tenant": identity.tenant,
            "subject": identity.subject,
            "scopes": sorted(identity.scopes),
            "issuer": identity.issuer,
            "expires_at": identity.expires_at,
        }
        fresh = await self.sessions.log_in(f"sso:{person}", stored)
        context.request.scope["toolweave.ui.rotated"] = fresh
        return fresh

    async def _browser(self, request: Request) -> tuple[UiSession, bool]:
        found = await self.sessions.get(request.cookies.get(COOKIE), logins=self.runtime.require_auth)
        if found is not None:
            return found, False
        return self.sessions.create(), True

    async def rotate(self, context: PageContext, key_id: str | None) -> UiSession:
        """A new session id and CSRF token (at login and logout), so a planted cookie gains nothing."""
        await self.sessions.drop(context.browser.id)
        fresh = self.sessions.create() if key_id is None else await self.sessions.log_in(key_id)
        context.request.scope["toolweave.ui.rotated"] = fresh
        return fresh

    def _set_cookie(self, request: Request, response: Response, browser: UiSession) -> None:
        response.set_cookie(
            COOKIE,
            browser.id,
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
            path="/",
        )


def _timestamp(seconds: float | None) -> str:
    if seconds is None:
        return ""
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


async def _csrf_token(request: Request) -> str | None:
    header = request.headers.get("x-csrf-token")
    if header:
        return header
    if request.headers.get("content-type", "").startswith(
        ("application/x-www-form-urlencoded", "multipart/form-data")
    ):
        form = await request.form()
        value = form.get("csrf")
        return value if isinstance(value, str) else None
    return None


def _login_redirect(request: Request) -> Response:
    target = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    if request.headers.get("hx-request"):
        response = Response(status_code=204)
        response.headers["hx-redirect"] = f"/login?next={quote(target)}"
        return response
    return RedirectResponse(f"/login?next={quote(target)}", status_code=303)
