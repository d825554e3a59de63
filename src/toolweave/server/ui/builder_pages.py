"""The builder's pages for routers, fan-outs and workflows: new, edit, check as you type, save.

Every check runs the definition service's own validation (`problems_of`, the checks of
`POST /api/v1/composite-tools`), so the builder and the API accept exactly the same
definitions; a save that fails stores nothing, and an edit that fails leaves the
previous version serving. Each kind is a form (`FormKind`) beside a text editor (YAML or
TOML) holding the same definition; either refills the other.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from starlette.responses import RedirectResponse, Response

from toolweave.problems import Problem
from toolweave.schemas.read import required_of
from toolweave.server.ui import documents
from toolweave.server.ui.app import PageContext, UiApp
from toolweave.server.ui.builder_forms import FormKind
from toolweave.server.ui.catalog_view import ranked, tool_rows
from toolweave.server.ui.dag import Dag, layout
from toolweave.server.ui.fanout_builder import FANOUT
from toolweave.server.ui.router_builder import ROUTER
from toolweave.server.ui.tool_view import pretty
from toolweave.server.ui.workflow_builder import WORKFLOW
from toolweave.services.definitions import DefinitionService
from toolweave.services.errors import DefinitionError
from toolweave.store import NotFound, StoredComposite, StoreError

FORM_KINDS: dict[str, FormKind] = {kind.kind: kind for kind in (ROUTER, FANOUT, WORKFLOW)}
MAX_HINT_PARAMETERS = 12
CATALOG_RESULTS = 15
"""Tools one catalog search shows (the best ranked)."""
ALL_TOUCHED = "*"
"""`touched` once the user saved or wrote the text: every problem shows."""
MAX_TOUCHED = 4000
ROW = re.compile(r"[A-Za-z]+-\d+-")
"""The fields of one row (`op-0-tool`, `op-0-map-url`): touching one shows the row's problems."""


def touched_of(posted: Any) -> frozenset[str]:
    """The fields the user has changed (the form's `touched`, kept by ui.js): only their problems show,
    so a form just opened is not already red with "required" and pattern errors."""
    raw = posted.get("touched")
    return frozenset(str(raw)[:MAX_TOUCHED].split()) if raw else frozenset()


def shown(at: dict[str, list[str]], touched: frozenset[str]) -> dict[str, list[str]]:
    """The problems of the fields touched, or of a row one of whose fields was (`op-0-...`)."""
    if ALL_TOUCHED in touched:
        return at
    rows = {found.group() for name in touched if (found := ROW.match(name))}
    return {
        slot: found for slot, found in at.items() if slot in touched or any(slot.startswith(r) for r in rows)
    }


@dataclass(slots=True)
class Check:
    """What "check" shows: problems at their fields and in general, and the tool as it would be."""

    at: dict[str, list[str]] = field(default_factory=dict)
    general: list[str] = field(default_factory=list)
    problems_count: int = 0
    description: str = ""
    schema: str = ""
    export: str = ""
    dag: Dag | None = None
    hints: dict[str, str] = field(default_factory=dict)
    """Under each row calling a tool: the parameters that tool takes."""
    params: dict[str, list[Parameter]] = field(default_factory=dict)
    """Per row slot, the called tool's parameters: the router's mapping table has one row for each."""


@dataclass(frozen=True, slots=True)
class Parameter:
    name: str
    type: str
    required: bool


def parameters_of(schema: Any) -> list[Parameter]:
    """A tool's parameters in schema order (at most MAX_HINT_PARAMETERS, so a huge schema costs little)."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict):
        return []
    required = set(required_of(schema))
    found = []
    for name, spec in list(properties.items())[:MAX_HINT_PARAMETERS]:
        kind = spec.get("type") if isinstance(spec, dict) else None
        found.append(Parameter(str(name), kind if isinstance(kind, str) else "", name in required))
    return found


def parameters_hint(schema: Any) -> str:
    """`name* (string), excited (boolean)`: a tool's parameters, the required ones starred."""
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(properties, dict) or not properties:
        return "takes no parameters"
    required = set(required_of(schema))
    parts = []
    for name, spec in list(properties.items())[:MAX_HINT_PARAMETERS]:
        kind = spec.get("type") if isinstance(spec, dict) else None
        parts.append(
            f"{name}{'*' if name in required else ''}{f' ({kind})' if isinstance(kind, str) else ''}"
        )
    more = len(properties) - MAX_HINT_PARAMETERS
    return "takes: " + ", ".join(parts) + (f", and {more} more" if more > 0 else "")


def _hints(ctx: PageContext, kind: FormKind, form: Any, check: Check) -> None:
    """Fill the check's hints and parameter lists for the rows whose tool the caller can see."""
    catalog = ctx.runtime.gateway.catalog
    for slot, reference in kind.row_tools(form):
        entry = catalog.lookup(reference) if reference else None
        if entry is not None and entry.visible_to(ctx.caller.tenant):
            check.hints[slot] = parameters_hint(entry.tool.input_schema)
            check.params[slot] = parameters_of(entry.tool.input_schema)


def _check(
    service: DefinitionService, kind: FormKind, form: Any, tenant: str | None, exclude_id: str | None
) -> Check:
    definition = kind.to_definition(form)
    problems = kind.field_problems(form) + service.problems_of(definition, tenant, exclude_id=exclude_id)
    at, general = kind.place(problems, form)
    check = Check(at=at, general=general, problems_count=len(problems))
    steps = definition.get("steps")
    if kind.kind == "workflow" and isinstance(steps, list):
        check.dag = layout(steps)
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


def _format(posted: Any) -> str:
    return "toml" if posted.get("format") == "toml" else "yaml"


class BuilderPages:
    def __init__(self, ui: UiApp) -> None:
        self.ui = ui

    def _kind(self, ctx: PageContext) -> FormKind | None:
        return FORM_KINDS.get(ctx.request.path_params.get("kind", ""))

    def _page(
        self,
        ctx: PageContext,
        kind: FormKind,
        form: Any,
        *,
        editing: StoredComposite | None,
        status: str = "active",
        fmt: str = "yaml",
        text: str | None = None,
        text_problem: str = "",
        saved_problem: str = "",
        problems: list[Problem] | None = None,
        http_status: int = 200,
        touched: frozenset[str] = frozenset(),
        query: str = "",
    ) -> Response:
        service = ctx.runtime.definitions
        assert service is not None
        check = _check(service, kind, form, ctx.caller.tenant, editing.id if editing else None)
        _hints(ctx, kind, form, check)
        if problems is not None and not check.problems_count:  # the save failed on something the check missed
            check.at, check.general = kind.place(problems, form)
            check.problems_count = len(problems)
        return self.ui.render(
            ctx,
            "builder.html",
            http_status=http_status,
            kind=kind,
            choices=kind.choices,
            form=form,
            at=shown(check.at, touched),
            touched=" ".join(sorted(touched)),
            pristine=not touched,
            query=query,
            found=self._found(ctx, query),
            check=check,
            editing=editing,
            status=status,
            fmt=fmt,
            formats=documents.FORMATS,
            text=text if text is not None else documents.write(kind.to_definition(form), fmt),
            text_problem=text_problem,
            saved_problem=saved_problem,
            tool_names=sorted(
                entry.name for entry in ctx.runtime.gateway.catalog.listed_for(ctx.caller.tenant)
            ),
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
        kind = self._kind(ctx)
        if kind is None:
            return self.ui.problem(ctx, 404, "No such builder", "Build a router, fanout or workflow.")
        return self._page(ctx, kind, kind.from_definition({}), editing=None)

    async def legacy(self, ctx: PageContext) -> Response:
        """The old address of the text-only builders (`/build/yaml?kind=...`)."""
        wanted = ctx.request.query_params.get("kind", "fanout")
        return RedirectResponse(f"/build/{wanted if wanted in FORM_KINDS else 'fanout'}", status_code=303)

    async def edit(self, ctx: PageContext) -> Response:
        name = ctx.request.path_params["name"]
        stored = await self._editing(ctx, name)
        kind = FORM_KINDS.get(stored.kind) if stored is not None else None
        if stored is None or kind is None or stored.definition.get("kind") not in (None, stored.kind):
            source = (
                "the config file"
                if ctx.runtime.definitions and ctx.runtime.definitions.file_definition(name)
                else ""
            )
            why = (
                f"{name!r} is defined in {source}; change it there."
                if source
                else f"There is no composite tool {name!r} you may edit here."
            )
            return self.ui.problem(ctx, 404, "Cannot edit", why)
        return self._page(
            ctx,
            kind,
            kind.from_definition(stored.definition),
            editing=stored,
            status=stored.status if stored.status == "draft" else "active",
            touched=frozenset({ALL_TOUCHED}),  # a stored definition's problems are news: show them
        )

    async def check(self, ctx: PageContext) -> Response:
        """Check as you type: the preview, each field's problems (out of band), the other editor kept in step."""
        service = ctx.runtime.definitions
        kind = self._kind(ctx)
        if kind is None:
            return self.ui.problem(ctx, 404, "No such builder", "Build a router, fanout or workflow.")
        assert service is not None
        posted = await ctx.request.form()
        source = "text" if posted.get("source") == "text" else "form"
        fmt = _format(posted)
        editing = await self._editing(ctx, str(posted.get("id") or ""))
        form = kind.read(posted)
        touched = touched_of(posted) | ({ALL_TOUCHED} if source == "text" else set())
        values: dict[str, Any] = {"kind": kind, "choices": kind.choices, "editing": editing, "fmt": fmt}
        if source == "text":
            definition, why = documents.read(str(posted.get("yaml") or ""), fmt)
            if definition is None:
                check = Check(general=[why], problems_count=1)
                return self.ui.render(
                    ctx, "_builder_check.html", check=check, at={}, pristine=False, slots=[], hint_slots=[], table_rows=[], source="text", refill=False,
                    form=form, text="", **values,
                )  # fmt: skip
            form = kind.from_definition(definition)
        check = _check(service, kind, form, ctx.caller.tenant, editing.id if editing else None)
        _hints(ctx, kind, form, check)
        return self.ui.render(
            ctx,
            "_builder_check.html",
            hint_slots=[slot for slot, _ in kind.row_tools(form)],
            table_rows=kind.stale_tables(form, check.params) if source == "form" else [],
            check=check,
            at=shown(check.at, touched),
            pristine=not touched,
            slots=form.slots(),
            source=source,
            refill=source == "text",
            form=form,
            text=documents.write(kind.to_definition(form), fmt),
            **values,
        )

    async def catalog(self, ctx: PageContext) -> Response:
        """The builder's tool search: what the caller sees, across backends, ranked like `find_tools`."""
        query = str(ctx.request.query_params.get("q") or "")[:200].strip()
        return self.ui.render(ctx, "_catalog_results.html", query=query, found=self._found(ctx, query))

    def _found(self, ctx: PageContext, query: str) -> list[Any]:
        if not query:
            return []
        gateway = ctx.runtime.gateway
        rows = tool_rows(gateway, [], ctx.caller.tenant)
        return ranked(gateway.catalog, ctx.caller.tenant, rows, query)[:CATALOG_RESULTS]

    async def post(self, ctx: PageContext) -> Response:
        """The form's buttons: add or remove a row, pick a tool, fill from the text, save."""
        kind = self._kind(ctx)
        if kind is None:
            return self.ui.problem(ctx, 404, "No such builder", "Build a router, fanout or workflow.")
        posted = await ctx.request.form()
        picked = str(posted.get("pick") or "")[:300]
        action = "pick" if picked else str(posted.get("action") or "refresh")
        status = "draft" if posted.get("status") == "draft" else "active"
        fmt = _format(posted)
        editing = await self._editing(ctx, str(posted.get("id") or ""))
        form = kind.read(posted)
        touched = touched_of(posted)
        query = str(posted.get("q") or "")[:200].strip()  # an Add keeps the search and its results
        if action == "use_text":
            text = str(posted.get("yaml") or "")
            definition, why = documents.read(text, fmt)
            if definition is None:
                return self._page(
                    ctx, kind, form, editing=editing, status=status, fmt=fmt, text=text, text_problem=why,
                    touched=touched, query=query,
                )  # fmt: skip
            form = kind.from_definition(definition)
            touched = frozenset({ALL_TOUCHED})
        elif action == "save":
            return await self._save(ctx, kind, form, editing, status, fmt, query)
        else:
            kind.add_row(form, action, picked)
        return self._page(
            ctx, kind, form, editing=editing, status=status, fmt=fmt, touched=touched, query=query
        )

    async def _save(
        self,
        ctx: PageContext,
        kind: FormKind,
        form: Any,
        editing: StoredComposite | None,
        status: str,
        fmt: str,
        query: str,
    ) -> Response:
        service = ctx.runtime.definitions
        assert service is not None
        unreadable = kind.field_problems(form)
        definition = kind.to_definition(form)
        try:
            if unreadable:
                raise DefinitionError(
                    422, "invalid_definition", f"{len(unreadable)} field(s) do not read", unreadable
                )
            if editing is None:
                stored = await service.create(
                    ctx.caller.tenant, definition, status, "web UI builder", actor=ctx.actor
                )
            else:
                stored = await service.update(
                    editing.id,
                    ctx.caller.tenant,
                    patch=_replacement_patch(editing.definition, definition),
                    status=status,
                    note="web UI builder",
                    expected_version=editing.version,
                    actor=ctx.actor,
                )
        except DefinitionError as error:
            return self._page(
                ctx, kind, form, editing=editing, status=status, fmt=fmt,
                saved_problem=f"Not saved: {error.message}", problems=error.problems, http_status=422,
                touched=frozenset({ALL_TOUCHED}), query=query,
            )  # fmt: skip
        except StoreError as error:
            return self._page(
                ctx, kind, form, editing=editing, status=status, fmt=fmt,
                saved_problem=f"Not saved: {error}", http_status=409,
                touched=frozenset({ALL_TOUCHED}), query=query,
            )  # fmt: skip
        return RedirectResponse(f"/tools/{stored.name}", status_code=303)
