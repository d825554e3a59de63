"""What a tool's page shows: its schemas, its definition as tables, its status and problems, the
tools it uses and those using it, and its export in every format."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from toolweave.catalog.catalog import Entry
from toolweave.composite.router.config import RouterDef
from toolweave.executor import Session
from toolweave.export.formats import FORMATS, export_tool
from toolweave.server.api import present
from toolweave.services.definitions import DefinitionService
from toolweave.store import NotFound, StoredComposite


@dataclass(slots=True)
class ToolView:
    name: str
    kind: str
    status: str
    source: str
    description: str = ""
    backend: str | None = None
    backend_tool: str | None = None
    backend_status: str | None = None
    input_schema: str | None = None
    output_schema: str | None = None
    definition: dict[str, Any] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    uses: list[tuple[str, str | None]] = field(default_factory=list)
    """(reference as written, the exposed name to link to when the caller sees it)."""
    used_in: list[str] = field(default_factory=list)
    servers: list[str] = field(default_factory=list)
    """The virtual servers that expose it."""
    exports: dict[str, str] = field(default_factory=dict)
    version: int | None = None
    read_only_hint: bool = False
    destructive_hint: bool = False


def pretty(value: Any) -> str:
    return orjson.dumps(value, option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode()


def _exports(entry: Entry) -> dict[str, str]:
    return {fmt: pretty(export_tool(entry.tool, fmt)) for fmt in FORMATS}


def _link(service: DefinitionService, reference: str, tenant: str | None) -> str | None:
    found = service.gateway.catalog.lookup(reference)
    return found.name if found is not None and found.visible_to(tenant) else None


async def tool_view(service: DefinitionService, name: str, caller: Session) -> ToolView | None:
    """The page of `name` as `caller` sees it; None when it does not exist for them."""
    tenant = caller.tenant
    catalog = service.gateway.catalog
    entry = catalog.get(name)
    if entry is not None and not entry.visible_to(tenant):
        entry = None
    stored: StoredComposite | None = None
    try:
        stored = await service.repo.get(name, tenant)
    except NotFound:
        stored = None
    if entry is not None and entry.composite is None:
        return _backend_view(service, entry, caller)
    if stored is not None:
        detail = present.stored_detail(service, stored, caller)
        view = _composite_view(service, detail.model_dump(), tenant)
        view.version = stored.version
    else:
        model = service.file_definition(name)
        if model is None:
            return None
        view = _composite_view(
            service, present.file_detail(service.gateway, model, caller).model_dump(), tenant
        )
    if entry is not None:
        view.exports = _exports(entry)
        view.used_in = catalog.used_in_for(name, tenant)
        view.servers = service.gateway.servers.used_in(name, caller)
        view.input_schema = pretty(entry.tool.input_schema or {})
        if entry.tool.output_schema:
            view.output_schema = pretty(entry.tool.output_schema)
        view.description = entry.tool.description or view.description
    return view


def _backend_view(service: DefinitionService, entry: Entry, caller: Session) -> ToolView:
    tenant = caller.tenant
    tool = entry.tool
    annotations = tool.annotations
    backend = entry.backend
    return ToolView(
        name=entry.name,
        kind="backend",
        status="active",
        source="backend",
        description=tool.description or "",
        backend=backend.name if backend is not None else None,
        backend_tool=entry.backend_tool,
        backend_status=backend.status if backend is not None else None,
        input_schema=pretty(tool.input_schema or {}),
        output_schema=pretty(tool.output_schema) if tool.output_schema else None,
        used_in=service.gateway.catalog.used_in_for(entry.name, tenant),
        servers=service.gateway.servers.used_in(entry.name, caller),
        exports=_exports(entry),
        read_only_hint=bool(annotations is not None and annotations.read_only_hint),
        destructive_hint=bool(annotations is not None and annotations.destructive_hint),
    )


def _references(definition: dict[str, Any]) -> list[str]:
    """Every tool a definition names, in the order written (operations, targets, steps)."""
    found: list[str] = []
    for operation in definition.get("operations") or []:
        found.append(str(operation.get("tool", "")))
    found.extend(str(tool) for tool in definition.get("tools") or [])
    for target in definition.get("targets") or []:
        found.append(str(target.get("tool", "")))

    def steps(items: list[Any]) -> None:
        for step in items:
            if isinstance(step, dict):
                if step.get("tool"):
                    found.append(str(step["tool"]))
                if isinstance(step.get("step"), dict):
                    steps([step["step"]])

    steps(definition.get("steps") or [])
    return list(dict.fromkeys(ref for ref in found if ref))


def _composite_view(service: DefinitionService, detail: dict[str, Any], tenant: str | None) -> ToolView:
    definition = detail.get("definition") or {}
    if detail["kind"] == "router" and "routing" not in definition:  # left out as the default: say which
        definition = {**definition, "routing": RouterDef.model_fields["routing"].default}
    return ToolView(
        name=detail["name"],
        kind=detail["kind"],
        status=detail["status"],
        source=detail["source"],
        description=str(definition.get("description") or ""),
        definition=definition,
        problems=list(detail.get("validationErrors") or []),
        uses=[(ref, _link(service, ref, tenant)) for ref in _references(definition)],
    )
