"""The pages: the AI Tools list, a tool's page, login and logout."""

from __future__ import annotations

from urllib.parse import urlsplit

from starlette.responses import RedirectResponse, Response

from toolweave.server.ui.app import PageContext, UiApp
from toolweave.server.ui.catalog_view import KINDS, ListQuery, tool_page, tool_rows
from toolweave.server.ui.tool_view import tool_view

MAX_KEY_LENGTH = 512


def _safe_next(target: str | None) -> str:
    """Only a path on this site (never `//evil.example` or a scheme): no open redirect after login."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    parts = urlsplit(target)
    return "/" if parts.scheme or parts.netloc else target


class Pages:
    def __init__(self, ui: UiApp) -> None:
        self.ui = ui

    async def tools(self, ctx: PageContext) -> Response:
        rt = ctx.runtime
        tenant = ctx.caller.tenant
        stored = await rt.definitions.repo.list(tenant) if rt.definitions is not None else []
        rows = tool_rows(rt.gateway, stored, tenant)
        query = ListQuery.from_params(ctx.request.query_params)
        page = tool_page(rt.gateway.catalog, tenant, rows, query)
        return self.ui.render(ctx, "tools.html", page=page, query=query, kinds=KINDS)

    async def tool(self, ctx: PageContext) -> Response:
        rt = ctx.runtime
        name = ctx.request.path_params["name"]
        view = await tool_view(rt.definitions, name, ctx.caller.tenant) if rt.definitions else None
        if view is None:
            return self.ui.problem(ctx, 404, "No such tool", f"There is no tool named {name!r} here.")
        return self.ui.render(ctx, "tool.html", tool=view)

    async def login_form(self, ctx: PageContext) -> Response:
        if not ctx.runtime.require_auth:
            return RedirectResponse("/", status_code=303)
        return self.ui.render(
            ctx, "login.html", next=_safe_next(ctx.request.query_params.get("next")), error=""
        )

    async def login(self, ctx: PageContext) -> Response:
        form = await ctx.request.form()
        key = str(form.get("key") or "").strip()
        target = _safe_next(str(form.get("next") or ""))
        if not ctx.runtime.require_auth:
            return RedirectResponse(target, status_code=303)
        info = await ctx.runtime.key_cache.verify(key) if 0 < len(key) <= MAX_KEY_LENGTH else None
        if info is None:
            return self.ui.render(
                ctx,
                "login.html",
                status=401,
                next=target,
                error="That API key is unknown, malformed or revoked.",
            )
        self.ui.rotate(ctx, key)
        return RedirectResponse(target, status_code=303)

    async def logout(self, ctx: PageContext) -> Response:
        self.ui.rotate(ctx, None)
        return RedirectResponse("/login" if ctx.runtime.require_auth else "/", status_code=303)
