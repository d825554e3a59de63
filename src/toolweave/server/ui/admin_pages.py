"""Admin (scope `tools:admin`): API keys (a new key is shown once; revoke) and the tenant's
connections to HTTP backends (set or replace; header values are never shown back).

Keys go through the runtime (`keys.create`, `revoke_key`: revoked here at once and on the
other gateways through the change feed); connections through the same checks as the REST
API (`server.api.connections`), then `connection_changed` so no session keeps old headers.
"""

from __future__ import annotations

from starlette.responses import Response

from toolweave.server.api.connections import check_backend, check_headers
from toolweave.server.api.errors import ApiError
from toolweave.server.ui.app import PageContext, UiApp
from toolweave.store import NotFound, StoreError

SCOPES = ("tools:read", "tools:call", "tools:admin")
MAX_HEADERS = 20


def _headers(text: str) -> tuple[dict[str, str], str]:
    """`Name: value` lines as headers, or why not (never quoting a value)."""
    headers: dict[str, str] = {}
    for number, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        name, sep, value = line.partition(":")
        if not sep or not name.strip():
            return {}, f"line {number}: write each header as `Name: value`"
        headers[name.strip()] = value.strip()
    if len(headers) > MAX_HEADERS:
        return {}, f"at most {MAX_HEADERS} headers"
    return headers, ""


class AdminPages:
    def __init__(self, ui: UiApp) -> None:
        self.ui = ui

    async def page(
        self, ctx: PageContext, *, new_key: str = "", problem: str = "", notice: str = "", status: int = 200
    ) -> Response:
        rt = ctx.runtime
        tenant = ctx.caller.tenant
        keys = await rt.keys.list(tenant)
        connections = await rt.connections.list(tenant)
        http_backends = [b.name for b in rt.gateway.config.backends if b.transport == "http" or b.is_http_api]
        return self.ui.render(
            ctx,
            "admin.html",
            http_status=status,
            keys=keys,
            connections=connections,
            http_backends=http_backends,
            scopes=[s for s in SCOPES if s in ctx.caller.scopes],
            new_key=new_key,
            problem=problem,
            notice=notice,
        )

    async def show(self, ctx: PageContext) -> Response:
        return await self.page(ctx)

    async def create_key(self, ctx: PageContext) -> Response:
        form = await ctx.request.form()
        tenant = ctx.caller.tenant
        if tenant is None:
            tenant = str(form.get("tenant") or "").strip() or None
        scopes = [s for s in form.getlist("scopes") if s in SCOPES and s in ctx.caller.scopes]
        name = str(form.get("name") or "").strip() or None
        if tenant is None:
            return await self.page(ctx, problem="Name the tenant the key is for.", status=422)
        if not scopes:
            return await self.page(ctx, problem="Choose at least one scope.", status=422)
        try:
            _info, plaintext = await ctx.runtime.keys.create(tenant, scopes, name, actor=ctx.actor)
        except (ValueError, StoreError) as error:
            return await self.page(ctx, problem=f"Not created: {error}", status=422)
        return await self.page(ctx, new_key=plaintext)

    async def revoke_key(self, ctx: PageContext) -> Response:
        key_id = ctx.request.path_params["key_id"][:64]
        try:
            info = await ctx.runtime.revoke_key(key_id, ctx.caller.tenant, actor=ctx.actor)
        except NotFound:
            return await self.page(ctx, problem=f"No key {key_id!r} here.", status=404)
        return await self.page(ctx, notice=f"Key {info.prefix}… revoked.")

    async def set_connection(self, ctx: PageContext) -> Response:
        rt = ctx.runtime
        form = await ctx.request.form()
        backend = str(form.get("backend") or "")[:200]
        headers, why = _headers(str(form.get("headers") or ""))
        if why:
            return await self.page(ctx, problem=why, status=422)
        try:
            check_backend(rt, backend)
            check_headers(headers)
        except ApiError as error:
            details = "; ".join(f"{p.path}: {p.message}" for p in error.problems) if error.problems else ""
            return await self.page(ctx, problem=f"{error.message} {details}".strip(), status=422)
        await rt.connections.put(ctx.caller.tenant, backend, headers, actor=ctx.actor)
        rt.connection_changed(ctx.caller.tenant, backend)
        return await self.page(ctx, notice=f"Connection to {backend} saved ({len(headers)} header(s)).")

    async def delete_connection(self, ctx: PageContext) -> Response:
        rt = ctx.runtime
        backend = ctx.request.path_params["backend"][:200]
        try:
            await rt.connections.delete(ctx.caller.tenant, backend, actor=ctx.actor)
        except NotFound:
            return await self.page(ctx, problem=f"No connection to {backend!r}.", status=404)
        rt.connection_changed(ctx.caller.tenant, backend)
        return await self.page(ctx, notice=f"Connection to {backend} deleted.")
