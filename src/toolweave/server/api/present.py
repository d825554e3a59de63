"""Turning catalog entries, stored rows and run records into API bodies (camelCase, no secrets)."""

from __future__ import annotations

from typing import Any, Literal

import mcp_types as types

from toolweave.catalog.catalog import Entry
from toolweave.composite.definition import CompositeBase
from toolweave.executor import Session
from toolweave.export import export_tool
from toolweave.gateway import Gateway
from toolweave.results import result_to_dict
from toolweave.server.api.models import AiTool, CallResult, CompositeDetail
from toolweave.services.definitions import DefinitionService
from toolweave.store import StoredComposite


def ai_tool(gateway: Gateway, entry: Entry, caller: Session, stored: StoredComposite | None) -> AiTool:
    tool = entry.tool
    composite = entry.composite is not None
    source: Literal["backend", "file", "api"] = (
        "backend" if not composite else ("api" if stored is not None else "file")
    )
    return AiTool(
        name=entry.name,
        type="composite" if composite else "simple",
        kind=entry.kind,  # type: ignore[arg-type]
        source=source,
        status=stored.status if stored is not None else "active",  # type: ignore[arg-type]
        id=stored.id if stored is not None else None,
        title=tool.title,
        description=tool.description or "",
        backend=entry.backend.name if entry.backend is not None else None,
        inputSchema=dict(tool.input_schema) if tool.input_schema is not None else None,
        usedIn=gateway.catalog.used_in_for(entry.name, caller.tenant),
        servers=gateway.servers.used_in(entry.name, caller),
    )


def unserved_ai_tool(row: StoredComposite) -> AiTool:
    return AiTool(
        name=row.name,
        type="composite",
        kind=row.kind,  # type: ignore[arg-type]
        source="api",
        status=row.status,  # type: ignore[arg-type]
        id=row.id,
        description=str(row.definition.get("description") or ""),
        validationErrors=list(row.validation_errors or ()),
    )


def mcp_tool(entry: Entry | None) -> dict[str, Any] | None:
    return export_tool(entry.tool, "mcp") if entry is not None else None


def stored_detail(service: DefinitionService, row: StoredComposite, caller: Session) -> CompositeDetail:
    """`caller`: whose "Used in" (the virtual servers it may use)."""
    entry = service.served_entry(row)
    return CompositeDetail(
        id=row.id,
        name=row.name,
        kind=row.kind,
        status=row.status,  # type: ignore[arg-type]
        source="api",
        readOnly=False,
        tenant=row.tenant,
        version=row.version,
        served=entry is not None,
        definition=row.definition,
        validationErrors=list(row.validation_errors or ()),
        tool=mcp_tool(entry),
        usedTools=sorted(entry.composite.references) if entry is not None and entry.composite else [],
        servers=service.gateway.servers.used_in(row.name, caller) if entry is not None else [],
        createdAt=row.created_at,
        updatedAt=row.updated_at,
    )


def file_detail(gateway: Gateway, model: CompositeBase, caller: Session) -> CompositeDetail:
    name: str = model.name
    entry = gateway.catalog.get(name)
    served = entry is not None and entry.composite is not None and entry.owner is None
    problems = [str(problem) for problem in gateway.catalog.degraded.get(name, [])]
    return CompositeDetail(
        id=name,
        name=name,
        kind=model.kind,
        status="active" if served else "degraded",
        source="file",
        readOnly=True,
        served=served,
        definition=model.model_dump(mode="json", by_alias=True, exclude_defaults=True),
        validationErrors=list(problems),
        tool=mcp_tool(entry) if served else None,
        usedTools=sorted(entry.composite.references) if served and entry and entry.composite else [],
        servers=gateway.servers.used_in(name, caller) if served else [],
    )


def call_result(result: types.CallToolResult) -> CallResult:
    return CallResult.model_validate(result_to_dict(result))
