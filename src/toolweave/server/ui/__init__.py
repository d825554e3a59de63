"""The web UI at `/`: the AI Tools list, a tool's page with Try it, runs, backends, login (docs/ui.md).

HTTP only: pages read the catalog and the definition service and call tools through
the executor, as the REST API does; the templates and static files are `toolweave.ui`.
"""

from __future__ import annotations

from typing import Any

from starlette.responses import FileResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from toolweave.server.ui.admin_pages import AdminPages
from toolweave.server.ui.app import ADMIN, CALL, PUBLIC, UiApp
from toolweave.server.ui.audit_pages import AuditPages
from toolweave.server.ui.backend_pages import BackendPages
from toolweave.server.ui.builder_pages import BuilderPages
from toolweave.server.ui.dashboard_pages import DashboardPages
from toolweave.server.ui.describe_pages import DescribePages
from toolweave.server.ui.docs import docs_routes
from toolweave.server.ui.live_calls import LiveCalls
from toolweave.server.ui.live_pages import LivePages
from toolweave.server.ui.pages import Pages
from toolweave.server.ui.resource_pages import ResourcePages
from toolweave.server.ui.server_builder import ServerBuilder
from toolweave.server.ui.server_pages import ServerPages
from toolweave.server.ui.sso import SingleSignOn
from toolweave.services.runtime import ServerRuntime
from toolweave.ui import STATIC

STATIC_PREFIX = "/static/ui"


def static_mount() -> Mount:
    """The UI's files and the vendored libraries (htmx, Swagger UI, ReDoc), from our own origin."""
    return Mount(STATIC_PREFIX, app=StaticFiles(directory=str(STATIC)), name="ui-static")


async def _favicon(_request: Any) -> Response:
    """Browsers ask for /favicon.ico whatever the page says: the UI's icon, not a 404 in every log."""
    return FileResponse(STATIC / "favicon.svg", media_type="image/svg+xml")


def ui_routes(runtime: ServerRuntime, tokens: Any = None, public_url: str = "") -> list[Any]:
    """The UI's routes (pages and their files); empty pages when `[ui] enabled = false`.

    `tokens`, `public_url`: the gateway's `TokenVerifier` and URL, for "Log in with <IdP>".
    """
    routes: list[Any] = [static_mount(), Route("/favicon.ico", _favicon, methods=["GET"]), *docs_routes()]
    if not runtime.config.ui.enabled:
        return routes
    ui = UiApp(runtime)
    live = LiveCalls(runtime.live_share)
    runtime.closing.append(live.close)
    pages = Pages(ui, live)
    live_pages = LivePages(ui, live)
    builder = BuilderPages(ui)
    admin = AdminPages(ui)
    describe = DescribePages(ui)
    sso = SingleSignOn(ui, tokens, public_url)
    ui.sso_buttons = sso.buttons()
    servers = ServerPages(ui)
    server_builder = ServerBuilder(ui)
    served = ResourcePages(ui)
    added = BackendPages(ui)
    routes += [
        Route("/backends/new", ui.page(added.new, scope=ADMIN), methods=["GET"]),
        Route("/backends/new", ui.page(added.create, scope=ADMIN), methods=["POST"]),
        Route("/backends/check", ui.page(added.check, scope=ADMIN), methods=["POST"]),
        Route("/backends/{name}/edit", ui.page(added.edit, scope=ADMIN), methods=["GET"]),
        Route("/backends/{name}/edit", ui.page(added.update, scope=ADMIN), methods=["POST"]),
        Route("/backends/{name}/delete", ui.page(added.delete, scope=ADMIN), methods=["POST"]),
        Route("/resources", ui.page(served.resources), methods=["GET"]),
        Route("/prompts", ui.page(served.prompts), methods=["GET"]),
        Route("/prompts/{name:path}", ui.page(served.prompt), methods=["GET"]),
        Route("/login/sso/callback", ui.page(sso.callback, scope=PUBLIC), methods=["GET"]),
        Route("/login/sso/{index}", ui.page(sso.start, scope=PUBLIC), methods=["GET"]),
        Route("/servers", ui.page(servers.list), methods=["GET"]),
        Route("/servers/new", ui.page(server_builder.new, scope=ADMIN), methods=["GET"]),
        Route("/servers/new", ui.page(server_builder.create, scope=ADMIN), methods=["POST"]),
        Route("/servers/{name}/edit", ui.page(server_builder.edit, scope=ADMIN), methods=["GET"]),
        Route("/servers/{name}/edit", ui.page(server_builder.update, scope=ADMIN), methods=["POST"]),
        Route("/servers/{name}", ui.page(servers.show), methods=["GET"]),
        Route("/servers/{name}/try", ui.page(servers.try_tool, scope=CALL), methods=["POST"]),
        Route("/build/yaml", ui.page(builder.legacy, scope=ADMIN), methods=["GET"]),
        Route("/build/catalog", ui.page(builder.catalog, scope=ADMIN), methods=["GET"]),
        Route("/admin", ui.page(admin.show, scope=ADMIN), methods=["GET"]),
        Route("/audit", ui.page(AuditPages(ui).show, scope=ADMIN), methods=["GET"]),
        Route("/admin/keys", ui.page(admin.create_key, scope=ADMIN), methods=["POST"]),
        Route("/admin/keys/{key_id}/revoke", ui.page(admin.revoke_key, scope=ADMIN), methods=["POST"]),
        Route("/admin/connections", ui.page(admin.set_connection, scope=ADMIN), methods=["POST"]),
        Route(
            "/admin/connections/{backend}/delete",
            ui.page(admin.delete_connection, scope=ADMIN),
            methods=["POST"],
        ),
        Route("/build/{kind}", ui.page(builder.new, scope=ADMIN), methods=["GET"]),
        Route("/build/{kind}", ui.page(builder.post, scope=ADMIN), methods=["POST"]),
        Route("/build/{kind}/check", ui.page(builder.check, scope=ADMIN), methods=["POST"]),
        Route("/tools/{name:path}/edit", ui.page(builder.edit, scope=ADMIN), methods=["GET"]),
        Route("/tools/{name:path}/describe", ui.page(describe.preview, scope=ADMIN), methods=["POST"]),
        Route("/tools/{name:path}/describe/save", ui.page(describe.save, scope=ADMIN), methods=["POST"]),
        Route("/", ui.page(pages.tools), methods=["GET"]),
        Route("/tools/{name:path}/try", ui.page(pages.try_tool, scope=CALL), methods=["POST"]),
        Route("/tools/{name:path}", ui.page(pages.tool), methods=["GET"]),
        Route("/calls/{call_id}", ui.page(live_pages.follow, scope=CALL), methods=["GET"]),
        Route("/calls/{call_id}/answer", ui.page(live_pages.answer, scope=CALL), methods=["POST"]),
        Route("/calls/{call_id}/cancel", ui.page(live_pages.cancel, scope=CALL), methods=["POST"]),
        Route("/runs", ui.page(pages.runs), methods=["GET"]),
        Route("/runs/{run_id}", ui.page(pages.run), methods=["GET"]),
        Route("/runs/{run_id}/resume", ui.page(pages.resume, scope=CALL), methods=["POST"]),
        Route("/backends", ui.page(pages.backends), methods=["GET"]),
        Route("/dashboard", ui.page(DashboardPages(ui).show), methods=["GET"]),
        Route("/backends/{name}/reconnect", ui.page(pages.reconnect, scope=ADMIN), methods=["POST"]),
        Route("/backends/{name}/connect", ui.page(pages.connect, scope=CALL), methods=["POST"]),
        Route("/backends/{name}/disconnect", ui.page(pages.disconnect, scope=CALL), methods=["POST"]),
        Route("/login", ui.page(pages.login_form, scope=PUBLIC), methods=["GET"]),
        Route("/login", ui.page(pages.login, scope=PUBLIC), methods=["POST"]),
        Route("/logout", ui.page(pages.logout, scope=PUBLIC), methods=["POST"]),
    ]
    return routes
