"""Add and edit backends in the web UI (`/backends/new`, `/backends/{name}/edit`): stdio, HTTP (an
MCP server's URL) and OpenAPI backends, checked as the config file's entries are, stored encrypted,
started at once (`services.managed_backends`). Operator-only; secrets are write-only
(`backend_forms`)."""

from __future__ import annotations

from starlette.responses import RedirectResponse, Response

from toolweave.server.ui.app import PageContext, UiApp
from toolweave.server.ui.backend_forms import (
    AUTH_PLACES,
    AUTH_TYPES,
    FIELDS,
    TRANSPORTS,
    BackendForm,
    from_entry,
    names_only,
    place,
    read_form,
    to_entry,
)
from toolweave.server.ui.builder_pages import touched_of

OPERATOR_ONLY = (
    "Backends are shared by every tenant (and a stdio backend runs a command on the gateway's host): "
    "only the operator adds or changes them, without --auth on this machine, or in the config file."
)


class BackendPages:
    def __init__(self, ui: UiApp) -> None:
        self.ui = ui

    def _refused(self, ctx: PageContext) -> Response | None:
        if ctx.caller.tenant is not None:
            return self.ui.problem(ctx, 403, "Operator only", OPERATOR_ONLY)
        return None

    def _form(
        self,
        ctx: PageContext,
        form: BackendForm,
        *,
        editing: str | None,
        at: dict[str, list[str]] | None = None,
        general: list[str] | None = None,
        http_status: int = 200,
        retype: bool = False,
    ) -> Response:
        return self.ui.render(
            ctx,
            "backend_form.html",
            http_status=http_status,
            form=form,
            editing=editing,
            at=at or {},
            general=general or [],
            transports=TRANSPORTS,
            auth_types=AUTH_TYPES,
            auth_places=AUTH_PLACES,
            retype=retype,
        )

    async def new(self, ctx: PageContext) -> Response:
        return self._refused(ctx) or self._form(ctx, BackendForm(), editing=None)

    async def edit(self, ctx: PageContext) -> Response:
        refused = self._refused(ctx)
        if refused is not None:
            return refused
        name = ctx.request.path_params["name"]
        stored = await self._stored(ctx, name)
        if stored is None:
            return self._not_editable(ctx, name)
        return self._form(ctx, from_entry(stored), editing=name)

    async def create(self, ctx: PageContext) -> Response:
        return self._refused(ctx) or await self._save(ctx, None)

    async def update(self, ctx: PageContext) -> Response:
        refused = self._refused(ctx)
        if refused is not None:
            return refused
        name = ctx.request.path_params["name"]
        if await self._stored(ctx, name) is None:
            return self._not_editable(ctx, name)
        return await self._save(ctx, name)

    async def delete(self, ctx: PageContext) -> Response:
        """Remove a backend added here: stopped on this gateway at once, on the others at their next look."""
        refused = self._refused(ctx)
        if refused is not None:
            return refused
        name = ctx.request.path_params["name"]
        if await self._stored(ctx, name) is None or not await ctx.runtime.managed_backends.delete(
            name, actor=ctx.actor
        ):
            return self._not_editable(ctx, name)
        return RedirectResponse("/backends", status_code=303)

    async def check(self, ctx: PageContext) -> Response:
        """Check as you type (stores nothing): the problems of the fields the user changed, by the same
        validation as a save, each at its field (the others stay quiet until a save)."""
        refused = self._refused(ctx)
        if refused is not None:
            return refused
        posted = await ctx.request.form()
        form = read_form(posted)
        editing = str(posted.get("editing") or "") or None
        stored = await self._stored(ctx, editing) if editing is not None else None
        if editing is not None and stored is None:
            return self._not_editable(ctx, editing)
        entry = to_entry(form, stored)
        at, _general = place(
            [*form.problems, *ctx.runtime.managed_backends.check(entry, replacing=editing).problems]
        )
        touched = touched_of(posted)
        return self.ui.render(
            ctx, "_backend_check.html", at={k: v for k, v in at.items() if k in touched}, fields=FIELDS
        )

    async def _stored(self, ctx: PageContext, name: str) -> dict[str, object] | None:
        managed = ctx.runtime.managed_backends
        await managed.refresh()  # the page may come from another gateway than the one that added it
        return await managed.repo.get(name) if name in managed.managed else None

    def _not_editable(self, ctx: PageContext, name: str) -> Response:
        where = (
            "it is defined in the config file; change it there"
            if name in ctx.runtime.managed_backends.reserved()
            else "there is no backend of that name added here"
        )
        return self.ui.problem(ctx, 404, "Cannot edit", f"{name!r} cannot be edited in the UI: {where}.")

    async def _save(self, ctx: PageContext, editing: str | None) -> Response:
        managed = ctx.runtime.managed_backends
        form = read_form(await ctx.request.form())
        stored = await managed.repo.get(editing) if editing is not None else None
        entry = to_entry(form, stored)
        checked = managed.check(entry, replacing=editing)
        problems = [*form.problems, *checked.problems]
        if problems or checked.config is None:
            at, general = place(problems)
            shown = from_entry(entry)  # what was typed, but never a secret's value
            shown.transport = form.transport
            shown.env, shown.headers = names_only(form.env, "="), names_only(form.headers, ":")
            shown.secret_stored = bool(stored and from_entry(stored).secret_stored)
            typed = bool(form.auth_secret) or "=" in form.env or ":" in form.headers
            return self._form(
                ctx, shown, editing=editing, at=at, general=general, http_status=422, retype=typed
            )
        await managed.put(entry, checked.config, actor=ctx.actor)
        return RedirectResponse(f"/backends#backend-{checked.config.name}", status_code=303)
