"""The virtual servers' pages: the list of those the caller may use, and a server's page with its MCP
URL, instructions, access, what it lists, what its definition selects nothing by, and a Try it that
calls a tool through that server (its selection, names and policy), as its MCP clients would."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import Response

from toolweave.executor import ToolExecutor
from toolweave.results import result_to_dict
from toolweave.server.ui.app import PageContext, UiApp
from toolweave.server.ui.tool_view import pretty
from toolweave.servers import VirtualServer

MAX_ARGUMENTS_CHARS = 65_536


class ServerPages:
    def __init__(self, ui: UiApp) -> None:
        self.ui = ui

    async def list(self, ctx: PageContext) -> Response:
        servers = ctx.runtime.gateway.servers.visible_to(ctx.caller)
        rows = [(server, len(server.catalog.listed_for(ctx.caller.tenant))) for server in servers]
        return self.ui.render(ctx, "servers.html", rows=rows)

    async def show(self, ctx: PageContext) -> Response:
        server = self._server(ctx)
        if server is None:
            return self._missing(ctx)
        return self._page(ctx, server)

    async def try_tool(self, ctx: PageContext) -> Response:
        """Call a tool the server lists, through the server's own registry (as its MCP clients do)."""
        server = self._server(ctx)
        if server is None:
            return self._missing(ctx)
        form = await ctx.request.form()
        name = str(form.get("tool") or "")
        text = str(form.get("arguments") or "{}")
        if len(text) > MAX_ARGUMENTS_CHARS:
            return self._page(
                ctx, server, tried=name, error=f"arguments longer than {MAX_ARGUMENTS_CHARS} characters"
            )
        try:
            arguments = orjson.loads(text or "{}")
        except orjson.JSONDecodeError as error:
            return self._page(
                ctx, server, tried=name, arguments=text, error=f"arguments are not JSON: {error}"
            )
        result = await ToolExecutor(server.registry, ctx.caller).call(name, arguments)
        shown = pretty(result_to_dict(result))
        return self._page(ctx, server, tried=name, arguments=text, result=shown, failed=bool(result.is_error))

    def _server(self, ctx: PageContext) -> VirtualServer | None:
        server = ctx.runtime.gateway.servers.get(ctx.request.path_params["name"])
        return server if server is not None and server.visible_to(ctx.caller) else None

    def _missing(self, ctx: PageContext) -> Response:
        name = ctx.request.path_params["name"]
        return self.ui.problem(
            ctx, 404, "No such server", f"There is no virtual server {name!r} you may use."
        )

    def _page(self, ctx: PageContext, server: VirtualServer, **tried: Any) -> Response:
        tenant = ctx.caller.tenant
        tools = [
            (entry.name, server.served.get(entry.name, entry.name), entry.tool.description or "")
            for entry in server.catalog.listed_for(tenant)
        ]
        base = str(ctx.request.base_url).rstrip("/")
        return self.ui.render(
            ctx,
            "server.html",
            server=server,
            config=server.config,
            url=f"{base}/servers/{server.name}/mcp",
            listed=[tool.name for tool in server.list_tools(tenant)],
            tools=tools,
            problems=server.problems(),
            tried=tried.get("tried", ""),
            arguments=tried.get("arguments", "{}"),
            result=tried.get("result"),
            failed=tried.get("failed", False),
            error=tried.get("error"),
        )
