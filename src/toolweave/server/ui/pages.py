"""The pages: the AI Tools list, a tool's page and its Try it form, runs, backends, login and logout."""

from __future__ import annotations

import difflib
import re
import time
from typing import Any, NamedTuple
from urllib.parse import urlsplit

import yaml
from starlette.responses import RedirectResponse, Response

from toolweave.config.models import BackendConfig
from toolweave.config.oauth import BackendOAuth
from toolweave.credentials.backends import OAuthBackends
from toolweave.credentials.oauth import owner_of
from toolweave.executor.errors import ResumeError
from toolweave.executor.resume import resume_run
from toolweave.server.ui.app import ADMIN, CALL, PageContext, UiApp
from toolweave.server.ui.catalog_view import KINDS, ListQuery, tool_page, tool_rows
from toolweave.server.ui.dag import layout
from toolweave.server.ui.errors import LiveCallRefused
from toolweave.server.ui.live_calls import LiveCalls
from toolweave.server.ui.run_view import settled_steps, step_outputs, timeline
from toolweave.server.ui.throttle import LoginThrottle
from toolweave.server.ui.tool_view import pretty, tool_view
from toolweave.server.ui.try_view import ReadArguments, form_fields, read_arguments, result_view
from toolweave.services.llm import llm_configured
from toolweave.store import Conflict, NotFound, TooSoon

MAX_KEY_LENGTH = 512
RUN_STATUSES = ("running", "completed", "failed", "timed_out", "cancelled", "interrupted", "input_required")
RUNS_SHOWN = 200
SINCE = {"1h": 3600, "24h": 86_400, "7d": 7 * 86_400}
"""The runs list's time filter: runs started within this window."""
BUSY = frozenset({"starting", "reconnecting"})
"""Backend states that change by themselves soon: the backends page refreshes while one is shown."""


def _version_param(text: str | None, numbers: list[int], default: int) -> int:
    try:
        wanted = int(text or "")
    except ValueError:
        return default
    return wanted if wanted in numbers else default


def definition_diff(old: dict[str, Any], new: dict[str, Any]) -> list[str]:
    """A unified diff of two definitions as YAML (the document people write)."""
    before = yaml.safe_dump(old, sort_keys=False, allow_unicode=True).splitlines()
    after = yaml.safe_dump(new, sort_keys=False, allow_unicode=True).splitlines()
    return list(difflib.unified_diff(before, after, "before", "after", lineterm="", n=2))[2:]


def safe_next(target: str | None) -> str:
    """Only a path on this site (never `//evil.example` or a scheme): no open redirect after login."""
    if not target or not target.startswith("/") or target.startswith("//") or "\\" in target:
        return "/"
    parts = urlsplit(target)
    return "/" if parts.scheme or parts.netloc else target


class Pages:
    def __init__(self, ui: UiApp, live: LiveCalls) -> None:
        self.ui = ui
        self.live = live
        self.throttle = LoginThrottle()

    async def tools(self, ctx: PageContext) -> Response:
        rt = ctx.runtime
        tenant = ctx.caller.tenant
        stored = await rt.definitions.repo.list(tenant) if rt.definitions is not None else []
        rows = tool_rows(rt.gateway, stored, tenant)
        query = ListQuery.from_params(ctx.request.query_params)
        page = tool_page(rt.gateway.catalog, tenant, rows, query)
        return self.ui.render(ctx, "tools.html", page=page, query=query, kinds=KINDS)

    async def tool(self, ctx: PageContext) -> Response:
        return await self._tool_page(ctx)

    async def try_tool(self, ctx: PageContext) -> Response:
        """Call the tool with the form's arguments through the executor (policy and approval apply)."""
        return await self._tool_page(ctx, trying=True)

    async def _tool_page(self, ctx: PageContext, *, trying: bool = False) -> Response:
        rt = ctx.runtime
        name = ctx.request.path_params["name"]
        view = await tool_view(rt.definitions, name, ctx.caller) if rt.definitions else None
        if view is None:
            return self.ui.problem(ctx, 404, "No such tool", f"There is no tool named {name!r} here.")
        entry = rt.gateway.catalog.get(name)
        served = entry is not None and entry.visible_to(ctx.caller.tenant)
        fields = form_fields(entry.tool.input_schema) if served and entry is not None else []
        read, result, live, refused = ReadArguments(), None, None, ""
        if trying and served:
            read = read_arguments(fields, await ctx.request.form())
            if not read.problems and ctx.request.headers.get("hx-request"):
                # followed live by the page: progress, and questions answered in it
                try:
                    live = self.live.start(rt.gateway, ctx.caller, ctx.browser.id, name, read.arguments)
                    await self.live.published()  # the page's first poll may reach another gateway
                except LiveCallRefused as error:
                    refused = str(error)
            elif not read.problems:  # a browser without script: the call, then the page with its result
                called = await rt.gateway.executor(ctx.caller).call(name, read.arguments)
                result = result_view(called)
        versions, diff, pair = (
            await self._versions(ctx, view.name) if view.source == "api" else ([], [], (0, 0))
        )
        return self.ui.render(
            ctx,
            "tool.html",
            versions=versions,
            diff=diff,
            pair=pair,
            tool=view,
            fields=fields,
            may_call=served and ctx.may(CALL),
            sent=read,
            result=result,
            live=live,
            refused=refused,
            dag=layout(view.definition.get("steps") or []) if view.kind == "workflow" else None,
            llm_available=llm_configured(),
        )

    async def _versions(self, ctx: PageContext, name: str) -> tuple[list[Any], list[str], tuple[int, int]]:
        """Every stored version, and the diff of two (`?from=&to=`; default: the last two)."""
        service = ctx.runtime.definitions
        assert service is not None
        try:
            versions = await service.repo.versions(name, ctx.caller.tenant)
        except NotFound:
            return [], [], (0, 0)
        numbers = [v.version for v in versions]
        if len(numbers) < 2:
            return versions, [], (0, 0)
        params = ctx.request.query_params
        old = _version_param(params.get("from"), numbers, numbers[-2])
        new = _version_param(params.get("to"), numbers, numbers[-1])
        by_number = {v.version: v for v in versions}
        return versions, definition_diff(by_number[old].definition, by_number[new].definition), (old, new)

    async def runs(self, ctx: PageContext) -> Response:
        params = ctx.request.query_params
        tool = (params.get("tool") or "")[:200] or None
        status = params.get("status") or None
        status = status if status in RUN_STATUSES else None
        tenant = ctx.caller.tenant
        if tenant is None:  # the operator may narrow to one tenant
            tenant = (params.get("tenant") or "")[:200] or None
        records = await ctx.runtime.runs.list_runs(tenant=tenant, tool=tool, status=status, limit=RUNS_SHOWN)
        since = params.get("since") or ""
        if since in SINCE:
            oldest = time.time() - SINCE[since]
            records = [record for record in records if record.started_at >= oldest]
        return self.ui.render(
            ctx,
            "runs.html",
            runs=records,
            tool=tool or "",
            status=status or "",
            tenant=tenant or "",
            statuses=RUN_STATUSES,
            since=since if since in SINCE else "",
            windows=list(SINCE),
        )

    async def run(self, ctx: PageContext, result: Any = None, problem: str = "") -> Response:
        run_id = ctx.request.path_params["run_id"][:64]
        tenant = ctx.caller.tenant
        record = await ctx.runtime.runs.get_run(run_id, tenant)
        if record is None:
            return self.ui.problem(ctx, 404, "No such run", f"There is no run {run_id!r} here.")
        dag = None
        steps = settled_steps(record)
        if record.kind == "workflow" and ctx.runtime.definitions is not None:
            view = await tool_view(ctx.runtime.definitions, record.tool, ctx.caller)
            statuses = {step.id: step.status for step in steps}
            dag = layout(view.definition.get("steps") or [], statuses) if view is not None else None
        return self.ui.render(
            ctx,
            "run.html",
            run=record,
            dag=dag,
            steps=timeline(steps),
            outputs=step_outputs(steps),
            targets={step.id: step.id.split(" #")[0] for step in record.steps},
            arguments=pretty(record.arguments),
            may_call=ctx.may(CALL),
            result=result,
            problem=problem,
            trace=_trace_link(ctx.runtime.config.telemetry.trace_url, record.state),
        )

    async def resume(self, ctx: PageContext) -> Response:
        """Resume an interrupted run; secret arguments (never kept in run records) may be given again."""
        run_id = ctx.request.path_params["run_id"][:64]
        typed = str((await ctx.request.form()).get("arguments") or "").strip()
        again = None
        if typed:
            read = read_arguments([], {"__json__": typed})
            if read.problems:
                return await self.run(ctx, problem=f"Arguments: {read.problems['__json__']}")
            again = read.arguments
        try:
            called = await resume_run(
                ctx.runtime.gateway.executor(ctx.caller), run_id, again, actor=ctx.actor
            )
        except ResumeError as error:
            return await self.run(ctx, problem=error.message)
        return await self.run(ctx, result=result_view(called))

    async def backends(
        self, ctx: PageContext, notice: str = "", authorize: tuple[str, str] | None = None
    ) -> Response:
        rt = ctx.runtime
        tenant = ctx.caller.tenant
        await rt.managed_backends.refresh()  # one added through another gateway is listed at once
        own = {summary["backend"] for summary in await rt.connections.list(tenant)}
        described = rt.gateway.describe_backends(tenant)
        may_reconnect = (
            {b["name"] for b in described if rt.reconnect_allowed(b["name"], tenant)}
            if ctx.may(ADMIN)
            else set()
        )
        return self.ui.render(
            ctx,
            "backends.html",
            backends=described,
            accounts=await _accounts(rt, ctx.caller),
            authorize=authorize,
            own=own,
            may_reconnect=may_reconnect,
            busy=any(b["status"] in BUSY for b in described),
            notice=notice,
            may_add=ctx.may(ADMIN) and tenant is None,
            managed=rt.managed_backends.managed if ctx.may(ADMIN) and tenant is None else set(),
        )

    async def reconnect(self, ctx: PageContext) -> Response:
        """The Reconnect button: the runtime's one reconnect (which refuses whoever may not)."""
        name = ctx.request.path_params["name"]
        try:
            await ctx.runtime.reconnect_backend(name, ctx.caller.tenant, actor=ctx.actor)
        except NotFound as error:
            return self.ui.problem(ctx, 404, "No such backend", str(error))
        except Conflict as error:
            return self.ui.problem(ctx, 409, "Not reconnected", str(error))
        except TooSoon as error:
            return await self.backends(ctx, notice=f"Not reconnected: {error}")
        return await self.backends(ctx, notice=f"Reconnecting {name}…")

    def _grant_to_change(self, ctx: PageContext) -> _OAuthTarget | Response:
        """The OAuth backend of the path and its grants, or the page saying why this caller may not
        change its grant (no such backend; a shared grant is an admin's)."""
        found = _oauth_backend(ctx)
        if found is None:
            return self.ui.problem(
                ctx, 404, "No such backend", "no backend with [backends.oauth] by that name"
            )
        if found.oauth.shared and not ctx.may(ADMIN):
            why = "the shared grant of a backend is an admin's to change"
            return self.ui.problem(ctx, 403, "Not allowed", why)
        return found

    async def connect(self, ctx: PageContext) -> Response:
        """Connect: start the caller's authorization of an OAuth backend and send the browser there;
        the backend's authorization server brings it back to `/oauth/callback`."""
        found = self._grant_to_change(ctx)
        if isinstance(found, Response):
            return found
        config, oauth, grants = found
        try:
            url, _login = await grants.start_login(config, owner_of(oauth, ctx.caller))
        except Exception as error:  # noqa: BLE001 - the flow's failure, in words
            return await self.backends(ctx, notice=f"Could not connect {config.name}: {error}")
        if url is None:
            return await self.backends(ctx, notice=f"{config.name} is connected")
        # a link, not a redirect: the page's CSP (`form-action 'self'`) stops a form's redirect elsewhere
        return await self.backends(ctx, authorize=(config.name, url))

    async def disconnect(self, ctx: PageContext) -> Response:
        found = self._grant_to_change(ctx)
        if isinstance(found, Response):
            return found
        config, _oauth, grants = found
        forgot = await grants.logout(config, ctx.caller)
        if forgot:
            await ctx.runtime.audit.record(
                ctx.actor,
                "oauth.disconnected",
                tenant=ctx.caller.tenant,
                object_type="backend",
                object_id=config.name,
                object_name=config.name,
            )
        return await self.backends(
            ctx, notice=f"Disconnected from {config.name}" if forgot else "Not connected"
        )

    async def login_form(self, ctx: PageContext) -> Response:
        if not ctx.runtime.require_auth:
            return RedirectResponse("/", status_code=303)
        return self.ui.render(
            ctx, "login.html", next=safe_next(ctx.request.query_params.get("next")), error=""
        )

    async def login(self, ctx: PageContext) -> Response:
        form = await ctx.request.form()
        key = str(form.get("key") or "").strip()
        target = safe_next(str(form.get("next") or ""))
        if not ctx.runtime.require_auth:
            return RedirectResponse(target, status_code=303)
        client = ctx.request.client.host if ctx.request.client else "?"
        wait = self.throttle.wait(client, key)
        if wait > 0:
            refused = self.ui.render(
                ctx,
                "login.html",
                http_status=429,
                next=target,
                error=f"Too many wrong API keys. Try again in {wait} seconds.",
            )
            refused.headers["Retry-After"] = str(wait)
            return refused
        info = await ctx.runtime.key_cache.verify(key) if 0 < len(key) <= MAX_KEY_LENGTH else None
        if info is None:
            self.throttle.failed(client, key)
            return self.ui.render(
                ctx,
                "login.html",
                http_status=401,
                next=target,
                error="That API key is unknown, malformed or revoked.",
            )
        await self.ui.rotate(ctx, info.id)
        return RedirectResponse(target, status_code=303)

    async def logout(self, ctx: PageContext) -> Response:
        await self.ui.rotate(ctx, None)
        return RedirectResponse("/login" if ctx.runtime.require_auth else "/", status_code=303)


class _OAuthTarget(NamedTuple):
    config: BackendConfig
    oauth: BackendOAuth
    grants: OAuthBackends


def _oauth_backend(ctx: PageContext) -> _OAuthTarget | None:
    """The `[backends.oauth]` backend of the URL with the runtime's grants (None: no such backend)."""
    name = ctx.request.path_params["name"]
    grants = ctx.runtime.grants
    for backend in ctx.runtime.config.backends:
        if backend.name == name and backend.oauth is not None and grants is not None:
            return _OAuthTarget(backend, backend.oauth, grants)
    return None


async def _accounts(rt: Any, caller: Any) -> dict[str, dict[str, Any]]:
    """Per OAuth backend, the caller's grant as the backends page shows it: connected or not, the
    granted scope and the expiry of the current access token (never a token)."""
    if rt.grants is None:
        return {}
    found: dict[str, dict[str, Any]] = {}
    for config in rt.config.backends:
        if config.oauth is None:
            continue
        tenant, user = owner_of(config.oauth, caller)
        rows = [
            r
            for r in await rt.grants.store.summaries(tenant, user)
            if r["backend"] == config.name and r["authorized"]
        ]
        found[config.name] = {
            "connected": bool(rows),
            "who": "everyone (shared)" if config.oauth.shared else user,
            "scope": rows[0]["scope"] if rows else None,
            "expires_at": rows[0]["expires_at"].timestamp() if rows and rows[0]["expires_at"] else None,
            "machine": config.oauth.grant != "authorization_code",
            "mine": not config.oauth.shared or ADMIN in caller.scopes,  # a shared grant is an admin's
        }
    return found


TRACE_ID_RE = re.compile(r"^[0-9a-f]{32}$")


def _trace_link(template: str, state: Any) -> tuple[str, str] | None:
    """(trace id, viewer URL or "") of a traced run; the URL from `[telemetry] trace_url`'s template."""
    trace_id = state.get("trace_id") if isinstance(state, dict) else None
    if not isinstance(trace_id, str) or not TRACE_ID_RE.match(trace_id):
        return None
    return trace_id, template.replace("{trace_id}", trace_id) if template else ""
