"""Turning catalog entries, stored rows and run records into API bodies (camelCase, no secrets)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, Literal

import mcp_types as types

from toolweave.catalog.catalog import Entry
from toolweave.composite.definition import CompositeBase
from toolweave.executor import Session
from toolweave.export import export_tool
from toolweave.gateway import Gateway
from toolweave.results import result_to_dict
from toolweave.runs import RunRecord
from toolweave.server.api.models import AiTool, CallResult, CompositeDetail, KeyOut, RunOut, StepOut
from toolweave.services.definitions import DefinitionService
from toolweave.store import ApiKeyInfo, StoredComposite


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


def run_out(record: RunRecord) -> RunOut:
    return RunOut(
        id=record.id,
        tool=record.tool,
        kind=record.kind,
        tenant=record.tenant,
        status=record.status,
        subject=record.subject,
        arguments=dict(record.arguments),
        operation=record.operation,
        reason=record.reason,
        steps=[
            StepOut(
                id=s.id,
                status=s.status,
                attempts=s.attempts,
                latencyMs=s.latency_ms,
                startMs=s.start_ms,
                error=s.error,
            )
            for s in record.steps
        ],
        error=record.error,
        latencyMs=record.latency_ms,
        startedAt=_utc(record.started_at),
        finishedAt=_utc(record.finished_at) if record.finished_at is not None else None,
        events=list(record.events),
        traceId=_trace_id(record),
    )


def key_out(info: ApiKeyInfo) -> KeyOut:
    """What `GET /keys` and `toolweave keys list --json` show of a key: everything but the key."""
    return KeyOut(
        id=info.id,
        tenant=info.tenant,
        name=info.name,
        prefix=info.prefix,
        scopes=list(info.scopes),
        createdAt=info.created_at,
        lastUsedAt=info.last_used_at,
        revokedAt=info.revoked_at,
    )


def _utc(epoch: float) -> datetime:
    return datetime.fromtimestamp(epoch, UTC)


def _trace_id(record: RunRecord) -> str | None:
    found = record.state.get("trace_id") if isinstance(record.state, dict) else None
    return found if isinstance(found, str) else None
