"""What the core asks of tracing, without importing it: a `CallTracer` handed to the executor in its
registry (None when tracing is off: one attribute check per call), and the W3C trace context to send
to backends (`outgoing`), installed by `toolweave.telemetry` when it starts.

The implementation (OpenTelemetry's SDK, an optional extra) lives in `toolweave.telemetry`; nothing
here imports it, so a gateway without tracing never loads it.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any, Protocol

import mcp_types as types


class CallSpan(Protocol):
    def finish(self, result: types.CallToolResult) -> None:
        """The call's result: its status (an `isError` result is an error) and what a composite did."""


class CallTracer(Protocol):
    def call(self, entry: Any, session: Any, depth: int) -> AbstractContextManager[CallSpan]:
        """A span for one call through the executor (a client's, or a composite's inner call), current
        while the call runs so its inner calls and its backend call nest under it."""

    def backend(self, entry: Any) -> AbstractContextManager[Any]:
        """A client span for the backend call itself; the trace context sent to the backend is its."""

    def waited(self, stage: str, entry: Any, started_ns: int) -> None:
        """A stage (`admission`, `approval`) that made the call wait from `started_ns` until now."""

    def run(self, record: Any) -> None:
        """The call's run record: the span gets its id, the record the trace id."""


_outgoing: Callable[[], dict[str, str]] | None = None


def set_outgoing(inject: Callable[[], dict[str, str]] | None) -> None:
    """Installed by `toolweave.telemetry` when tracing starts."""
    global _outgoing
    _outgoing = inject


def outgoing() -> dict[str, str] | None:
    """`traceparent` (and `tracestate`) of the current span, for a backend's request `_meta` and
    headers; None when tracing is off or no span is current (nothing to add)."""
    inject = _outgoing
    if inject is None:
        return None
    return inject() or None


def current_trace_id() -> str | None:
    """The trace id (32 hex digits) of the current span; None when tracing is off or none is current."""
    carried = outgoing()
    if carried is None:
        return None
    parts = carried.get("traceparent", "").split("-")
    return parts[1] if len(parts) == 4 else None
