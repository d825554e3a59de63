"""The virtual server builder: define a server, or edit one defined through the API, from a form.

The form is the `[[servers]]` entry's everyday part: name, title, instructions, the tools it
serves (exposed names, globs or `re:` patterns, one a line), search mode, and who may use it.
A search over the catalog (the composite builder's, ranked like `find_tools`) lists what the
caller sees; each result's Add button puts its name in the tools (the whole form is posted and
shown again, so nothing typed is lost and no script is needed). Saving goes through
`ServerService`, the same checks as `POST /api/v1/servers`: a refused definition shows every
problem beside its field and stores nothing. Keys of a server not on the form (`backends`, `tags`,
`overrides`, ...) are kept as they are.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from starlette.datastructures import FormData
from starlette.responses import RedirectResponse, Response

from toolweave.server.ui.app import PageContext, UiApp
from toolweave.server.ui.catalog_view import ranked, tool_rows
from toolweave.services.errors import DefinitionError
from toolweave.services.servers import ServerService
from toolweave.store import StoreError

CATALOG_RESULTS = 15
MAX_FIELD = 16_384
FIELDS = ("name", "title", "instructions", "tools", "tool_exposure", "scopes", "tenants")


@dataclass
class ServerForm:
    name: str = ""
    title: str = ""
    instructions: str = ""
    tools: str = ""
    tool_exposure: str = "all"
    scopes: str = ""
    tenants: str = ""
    kept: dict[str, Any] = field(default_factory=dict)
    """What the stored definition holds that the form does not show (kept on save)."""

    @classmethod
    def read(cls, posted: FormData) -> ServerForm:
        def text(name: str) -> str:
            return str(posted.get(name) or "")[:MAX_FIELD]

        return cls(
            name=text("name"),
            title=text("title"),
            instructions=text("instructions"),
            tools=text("tools"),
            tool_exposure=text("tool_exposure"),
            scopes=text("scopes"),
            tenants=text("tenants"),
        )

    @classmethod
    def of(cls, definition: dict[str, Any]) -> ServerForm:
        access = definition.get("access") or {}
        shown = {"name", "title", "instructions", "tools", "tool_exposure"}
        kept = {key: value for key, value in definition.items() if key not in shown and key != "access"}
        kept_access = {key: value for key, value in access.items() if key not in ("scopes", "tenants")}
        if kept_access:
            kept["access"] = kept_access
        return cls(
            name=str(definition.get("name") or ""),
            title=str(definition.get("title") or ""),
            instructions=str(definition.get("instructions") or ""),
            tools="\n".join(definition.get("tools") or []),
            tool_exposure=str(definition.get("tool_exposure") or "all"),
            scopes="\n".join(access.get("scopes") or []),
            tenants="\n".join(access.get("tenants") or []),
            kept=kept,
        )

    def tool_lines(self) -> list[str]:
        return [line.strip() for line in self.tools.splitlines() if line.strip()]

    def definition(self) -> dict[str, Any]:
        """The entry as the API takes it; empty fields are left out."""
        found: dict[str, Any] = {"name": self.name.strip(), **self.kept}
        for key in ("title", "instructions"):
            value = getattr(self, key).strip()
            if value:
                found[key] = value
        found["tools"] = self.tool_lines()
        if self.tool_exposure == "search":
            found["tool_exposure"] = "search"
        access = dict(self.kept.get("access") or {})
        for key in ("scopes", "tenants"):
            listed = [
                part.strip() for part in getattr(self, key).replace(",", "\n").splitlines() if part.strip()
            ]
            if listed:
                access[key] = listed
        if access:
            found["access"] = access
        else:
            found.pop("access", None)
        return found


def replacing(current: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """The JSON merge patch turning `current` into `new` (a key `new` lacks is removed)."""
    patch: dict[str, Any] = {key: None for key in current if key not in new}
    patch.update(new)
    return patch


class ServerBuilder:
    def __init__(self, ui: UiApp) -> None:
        self.ui = ui

    async def new(self, ctx: PageContext) -> Response:
        return self._form(ctx, ServerForm(), editing="")

    async def edit(self, ctx: PageContext) -> Response:
        service, name = ctx.runtime.servers, ctx.request.path_params["name"]
        stored = service.stored(name) if service is not None else None
        if stored is None or (ctx.caller.tenant is not None and stored.tenant != ctx.caller.tenant):
            return self._not_editable(ctx, name)
        return self._form(ctx, ServerForm.of(stored.definition), editing=name)

    async def create(self, ctx: PageContext) -> Response:
        return await self._post(ctx, editing="")

    async def update(self, ctx: PageContext) -> Response:
        name = ctx.request.path_params["name"]
        service = ctx.runtime.servers
        stored = service.stored(name) if service is not None else None
        if stored is None or (ctx.caller.tenant is not None and stored.tenant != ctx.caller.tenant):
            return self._not_editable(ctx, name)
        return await self._post(ctx, editing=name)

    async def _post(self, ctx: PageContext, editing: str) -> Response:
        service = ctx.runtime.servers
        if service is None:
            return self.ui.problem(ctx, 503, "Starting", "The gateway is still starting; retry shortly.")
        posted = await ctx.request.form()
        form = ServerForm.read(posted)
        if editing:
            stored = service.stored(editing)
            form.kept = ServerForm.of(stored.definition).kept if stored is not None else {}
        query = str(posted.get("q") or "")[:200].strip()
        picked = str(posted.get("pick") or "")[:300].strip()
        if picked:
            if picked not in form.tool_lines():
                form.tools = "\n".join([*form.tool_lines(), picked])
            return self._form(ctx, form, editing=editing, query=query)
        if posted.get("action") != "save":
            return self._form(ctx, form, editing=editing, query=query)
        return await self._save(ctx, service, form, editing, query)

    async def _save(
        self, ctx: PageContext, service: ServerService, form: ServerForm, editing: str, query: str
    ) -> Response:
        definition = form.definition()
        try:
            if editing:
                stored = service.stored(editing)
                assert stored is not None
                patch = replacing(stored.definition, definition)
                saved = await service.update(
                    editing, ctx.caller.tenant, patch, None, stored.version, actor=ctx.actor
                )
            else:
                saved = await service.create(ctx.caller.tenant, definition, None, actor=ctx.actor)
        except DefinitionError as error:
            problems = error.problems or []
            return self._form(
                ctx, form, editing=editing, query=query, problems=problems, general=error.message
            )
        except (StoreError, ValueError) as error:
            return self._form(ctx, form, editing=editing, query=query, general=str(error))
        return RedirectResponse(f"/servers/{saved.name}", status_code=303)

    def _not_editable(self, ctx: PageContext, name: str) -> Response:
        return self.ui.problem(
            ctx,
            404,
            "No such server to edit",
            f"There is no virtual server {name!r} defined through the API that you may change "
            "(the config file's servers are changed there).",
        )

    def _form(
        self,
        ctx: PageContext,
        form: ServerForm,
        *,
        editing: str,
        query: str = "",
        problems: list[Any] | None = None,
        general: str = "",
    ) -> Response:
        at: dict[str, list[str]] = {}
        loose: list[str] = []
        for problem in problems or []:
            path = problem.path.removeprefix("definition").lstrip(".")
            key = path.split(".", 1)[0].split("[", 1)[0]
            if key == "access":
                key = path.split(".")[1] if "." in path else "scopes"
            if key in FIELDS:
                at.setdefault(key, []).append(
                    f"{path}: {problem.message}" if "[" in path else problem.message
                )
            else:
                loose.append(f"{path or 'definition'}: {problem.message}")
        found: list[Any] = []
        if query:
            gateway = ctx.runtime.gateway
            rows = tool_rows(gateway, [], ctx.caller.tenant)
            found = ranked(gateway.catalog, ctx.caller.tenant, rows, query)[:CATALOG_RESULTS]
        status = 422 if (problems or general) else 200
        return self.ui.render(
            ctx,
            "server_form.html",
            http_status=status,
            form=form,
            editing=editing,
            query=query,
            found=found,
            at=at,
            general=[general, *loose] if general else loose,
            operator=ctx.caller.tenant is None,
        )
