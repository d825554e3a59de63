"""The `tool_result` trace event: one per call, whatever the tool's origin.

`status` (ok | error), `duration_ms`, `source` (backend | python | federated |
composite), `handler` (what ran: the backend's tool, the Python function, the
federated client's handler, the composite's kind), `toolkit` (the backend,
the federated toolkit), and `error` (the first text of an error result). The
executor puts the events of a composite's inner calls (and of a recorded
direct call) in its run record; the served gateway also logs them, counts
them, and streams them to `GET /api/v1/events`.
"""

from __future__ import annotations

import time
from typing import Any

import mcp_types as types

from toolweave import tracing
from toolweave.backends.federated import FederatedBackend
from toolweave.backends.python import PythonBackend
from toolweave.catalog.catalog import Entry
from toolweave.secrets import scrub_secrets

MAX_ERROR_CHARS = 500


def origin(entry: Entry) -> tuple[str, str | None, str | None]:
    """(source, handler, toolkit) of a catalog entry."""
    composite = entry.composite
    if composite is not None:
        return "composite", composite.kind, None
    backend = entry.backend
    tool = entry.backend_tool
    if isinstance(backend, FederatedBackend):
        meta = backend.meta.get(tool or "")
        if meta is None:
            return "federated", tool, backend.name
        return "federated", meta.handler or tool, meta.toolkit or backend.name
    if isinstance(backend, PythonBackend):
        return "python", f"{backend.config.python}.{tool}", backend.name
    return "backend", tool, backend.name if backend is not None else None


def tool_result_event(
    entry: Entry,
    result: types.CallToolResult,
    seconds: float,
    tenant: str | None,
    run_id: str | None = None,
    subject: str | None = None,
) -> dict[str, Any]:
    source, handler, toolkit = origin(entry)
    return {
        "type": "tool_result",
        "tool": entry.name,
        "status": "error" if result.is_error else "ok",
        "duration_ms": round(seconds * 1000, 3),
        "source": source,
        "handler": handler,
        "toolkit": toolkit,
        "error": _error_text(result) if result.is_error else None,
        "tenant": tenant,
        "subject": subject,
        "run_id": run_id,
        "trace_id": tracing.current_trace_id(),
        "at": time.time(),
    }


def _error_text(result: types.CallToolResult) -> str:
    """The error's first text, cut, scrubbed of the call's secret values (a backend may quote them)."""
    for item in result.content:
        if isinstance(item, types.TextContent):
            text = scrub_secrets(item.text)
            return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 3] + "..."
    return "error"
