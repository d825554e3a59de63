"""The router builder's pages: new, edit, check as you type, save.

Every check runs the definition service's own validation (`problems_of`, the checks of
`POST /api/v1/composite-tools`), so the builder and the API accept exactly the same
definitions; a save that fails stores nothing, and an edit that fails leaves the
previous version serving.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from starlette.responses import RedirectResponse, Response

from toolweave.problems import Problem
from toolweave.server.ui.app import PageContext, UiApp
from toolweave.server.ui.dag import layout
from toolweave.server.ui.router_builder import (
    CONDITIONS,
    MAX_ROWS,
    ROUTINGS,
    OperationRow,
    RouterForm,
    RuleRow,
    from_definition,
    from_yaml,
    place,
    read_form,
    to_definition,
    to_yaml,
)
from toolweave.server.ui.tool_view import pretty
from toolweave.services.definitions import DefinitionError, DefinitionService
from toolweave.store import NotFound, StoredComposite, StoreError


@dataclass(slots=True)
class Check:
    """What "check" shows: problems at their fields and in general, and the tool as it would be."""

    at: dict[str, list[str]] = field(default_factory=dict)
    general: list[str] = field(default_factory=list)
    problems_count: int = 0
    description: str = ""
    schema: str = ""
    export: str = ""


def _check(service: DefinitionService, form: RouterForm, tenant: str | None, exclude_id: str | None) -> Check:
    definition = to_definition(form)
    problems = service.problems_of(definition, tenant, exclude_id=exclude_id)
    at, general = place(problems, form)
    check = Check(at=at, general=general, problems_count=len(problems))
    entry = service.trial_entry(definition, tenant) if not problems else None
    if entry is not None:
        check.description = entry.tool.description or ""
        check.schema = pretty(entry.tool.input_schema or {})
        check.export = pretty(
            {
                "name": entry.tool.name,
                "description": entry.tool.description,
                "inputSchema": entry.tool.input_schema,
            }
        )
    return check


def _replacement_patch(old: dict[str, Any], new: dict[str, Any]) -> dict[str, Any]:
    """A merge patch turning `old` into exactly `new` (keys the form dropped are removed)."""
    return {**{key: None for key in old if key not in new}, **new}


class BuilderPages:
    def __init__(self, ui: UiApp) -> None:
        self.ui = ui

    def _tool_names(self, ctx: PageContext) -> list[str]:
        return sorted(entry.name for entry in ctx.runtime.gateway.catalog.listed_for(ctx.caller.tenant))

    def _page(
        self,
        ctx: PageContext,
        form: RouterForm,
        *,
        editing: StoredComposite | None,
        status: str = "active",
        yaml_text: str | None = None,
        yaml_problem: str = "",
        saved_problem: str = "",
        problems: list[Problem] | None = None,
        http_status: int = 200,
    ) -> Response:
        service = ctx.runtime.definitions
        assert service is not None
        check = _check(service, form, ctx.caller.tenant, editing.id if editing else None)
        if problems is not None and not check.problems_count:  # the save failed on something the check missed
            check.at, check.general = place(problems, form)
            check.problems_count = len(problems)
        return self.ui.render(
            ctx,
            "builder.html",
            http_status=http_status,
            form=form,
            at=check.at,
            check=check,
            editing=editing,
            status=status,
            yaml_text=yaml_text if yaml_text is not None else to_yaml(to_definition(form)),
            yaml_problem=yaml_problem,
            saved_problem=saved_problem,
            conditions=CONDITIONS,
            routings=ROUTINGS,
            tool_names=self._tool_names(ctx),
        )

    async def _editing(self, ctx: PageContext, tool_id: str) -> StoredComposite | None:
        service = ctx.runtime.definitions
        if service is None or not tool_id:
            return None
        try:
            return await service.repo.get(tool_id, ctx.caller.tenant)
        except NotFound:
            return None

    async def new(self, ctx: PageContext) -> Response:
        return self._page(ctx, RouterForm(), editing=None)

    async def edit(self, ctx: PageContext) -> Response:
        name = ctx.request.path_params["name"]
        stored = await self._editing(ctx, name)
        if stored is None or stored.kind != "router":
            source = (
                "the config file"
                if ctx.runtime.definitions and ctx.runtime.definitions.file_definition(name)
                else ""
            )
            why = (
                f"{name!r} is defined in {source}; change it there."
                if source
                else f"There is no router {name!r} you may edit."
            )
            return self.ui.problem(ctx, 404, "Cannot edit", why)
        return self._page(
            ctx,
            from_definition(stored.definition),
            editing=stored,
            status=stored.status if stored.status == "draft" else "active",
        )

    async def check(self, ctx: PageContext) -> Response:
        """Check as you type: the preview, each field's problems (out of band), the other editor kept in step."""
        service = ctx.runtime.definitions
        assert service is not None
        posted = await ctx.request.form()
        source = "yaml" if posted.get("source") == "yaml" else "form"
        editing = await self._editing(ctx, str(posted.get("id") or ""))
        form = read_form(posted)
        refill = False
        if source == "yaml":
            definition, why = from_yaml(str(posted.get("yaml") or ""))
            if definition is None:
                return self.ui.render(
                    ctx,
                    "_builder_check.html",
                    check=Check(general=[why], problems_count=1),
                    at={},
                    slots=[],
                    source="yaml",
                    refill=False,
                    form=form,
                    conditions=CONDITIONS,
                    routings=ROUTINGS,
                    yaml_text="",
                    editing=editing,
                )
            form, refill = from_definition(definition), True
        check = _check(service, form, ctx.caller.tenant, editing.id if editing else None)
        return self.ui.render(
            ctx,
            "_builder_check.html",
            check=check,
            at=check.at,
            slots=form.slots(),
            source=source,
            refill=refill,
            form=form,
            conditions=CONDITIONS,
            routings=ROUTINGS,
            yaml_text=to_yaml(to_definition(form)),
            editing=editing,
        )

    async def post(self, ctx: PageContext) -> Response:
        """The form's buttons: add or remove a row, fill from YAML, save (nothing invalid is stored)."""
        posted = await ctx.request.form()
        action = str(posted.get("action") or "refresh")
        status = "draft" if posted.get("status") == "draft" else "active"
        editing = await self._editing(ctx, str(posted.get("id") or ""))
        form = read_form(posted)
        if action == "add_op" and len(form.operations) < MAX_ROWS:
            form.operations.append(OperationRow())
        elif action == "add_rule" and len(form.rules) < MAX_ROWS:
            form.rules.append(RuleRow(priority=str(len(form.rules) + 1)))
        elif action == "use_yaml":
            definition, why = from_yaml(str(posted.get("yaml") or ""))
            if definition is None:
                return self._page(
                    ctx,
                    form,
                    editing=editing,
                    status=status,
                    yaml_text=str(posted.get("yaml") or ""),
                    yaml_problem=why,
                )
            form = from_definition(definition)
        elif action == "save":
            return await self._save(ctx, form, editing, status)
        return self._page(ctx, form, editing=editing, status=status)

    async def _save(
        self, ctx: PageContext, form: RouterForm, editing: StoredComposite | None, status: str
    ) -> Response:
        service = ctx.runtime.definitions
        assert service is not None
        definition = to_definition(form)
        try:
            if editing is None:
                stored = await service.create(ctx.caller.tenant, definition, status, "web UI builder")
            else:
                stored = await service.update(
                    editing.id,
                    ctx.caller.tenant,
                    patch=_replacement_patch(editing.definition, definition),
                    status=status,
                    note="web UI builder",
                    expected_version=editing.version,
                )
        except DefinitionError as error:
            return self._page(
                ctx,
                form,
                editing=editing,
                status=status,
                saved_problem=f"Not saved: {error.message}",
                problems=error.problems,
                http_status=422,
            )
        except StoreError as error:
            return self._page(
                ctx,
                form,
                editing=editing,
                status=status,
                saved_problem=f"Not saved: {error}",
                http_status=409,
            )
        return RedirectResponse(f"/tools/{stored.name}", status_code=303)


STARTERS = {
    "fanout": {
        "name": "my_fanout",
        "description": "Ask several tools at once and return every answer.",
        "tools": ["backend/tool_a", "backend/tool_b"],
        "strategy": "parallel",
    },
    "workflow": {
        "name": "my_workflow",
        "description": "First look something up, then use what was found.",
        "parameters": {"type": "object", "properties": {"topic": {"type": "string"}}, "required": ["topic"]},
        "steps": [
            {"id": "first", "tool": "backend/tool_a", "arguments": {"query": "{{ params.topic }}"}},
            {"id": "second", "tool": "backend/tool_b", "arguments": {}, "dependsOn": ["first"]},
        ],
    },
}
"""The document each YAML builder starts from (names to replace with real tools)."""


class YamlBuilderPages:
    """Fan-outs and workflows, written as YAML and checked as you type by the same validation."""

    def __init__(self, ui: UiApp) -> None:
        self.ui = ui

    def _checked(self, ctx: PageContext, text: str) -> dict[str, Any]:
        service = ctx.runtime.definitions
        assert service is not None
        definition, why = from_yaml(text)
        if definition is None:
            return {"problems": [Problem("", why)], "export": "", "dag": None}
        problems = service.problems_of(definition, ctx.caller.tenant)
        entry = service.trial_entry(definition, ctx.caller.tenant) if not problems else None
        export = (
            pretty(
                {
                    "name": entry.tool.name,
                    "description": entry.tool.description,
                    "inputSchema": entry.tool.input_schema,
                }
            )
            if entry
            else ""
        )
        steps = definition.get("steps")
        return {
            "problems": problems,
            "export": export,
            "dag": layout(steps) if isinstance(steps, list) else None,
        }

    def _page(
        self,
        ctx: PageContext,
        kind: str,
        text: str,
        status: str = "active",
        saved_problem: str = "",
        http_status: int = 200,
    ) -> Response:
        return self.ui.render(
            ctx,
            "yaml_builder.html",
            http_status=http_status,
            kind=kind,
            yaml_text=text,
            status=status,
            saved_problem=saved_problem,
            **self._checked(ctx, text),
        )

    async def new(self, ctx: PageContext) -> Response:
        kind = ctx.request.query_params.get("kind", "fanout")
        kind = kind if kind in STARTERS else "fanout"
        return self._page(ctx, kind, to_yaml(STARTERS[kind]))

    async def check(self, ctx: PageContext) -> Response:
        posted = await ctx.request.form()
        return self.ui.render(ctx, "_yaml_check.html", **self._checked(ctx, str(posted.get("yaml") or "")))

    async def post(self, ctx: PageContext) -> Response:
        service = ctx.runtime.definitions
        assert service is not None
        posted = await ctx.request.form()
        kind = str(posted.get("kind") or "fanout")
        kind = kind if kind in STARTERS else "fanout"
        text = str(posted.get("yaml") or "")
        status = "draft" if posted.get("status") == "draft" else "active"
        definition, why = from_yaml(text)
        if definition is None:
            return self._page(ctx, kind, text, status, f"Not saved: {why}", 422)
        try:
            stored = await service.create(ctx.caller.tenant, definition, status, "web UI builder")
        except DefinitionError as error:
            return self._page(ctx, kind, text, status, f"Not saved: {error.message}", 422)
        except StoreError as error:
            return self._page(ctx, kind, text, status, f"Not saved: {error}", 409)
        return RedirectResponse(f"/tools/{stored.name}", status_code=303)
