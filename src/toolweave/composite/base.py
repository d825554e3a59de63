"""The contract between the gateway core and the composite kinds.

A composite is built once per catalog snapshot from its definition and the
tools it references, then run per call. It never talks to a backend itself:
every inner call goes back through the executor (`CallFn`), so policy,
validation, filters and admission apply to inner calls exactly as to a
client's call.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import mcp_types as types

from toolweave.common_types import ProgressFn
from toolweave.runs import RunRecord, RunStore, StepRecord

CallFn = Callable[[str, dict[str, Any]], Awaitable[types.CallToolResult]]
"""Make an inner call: `await call(reference, arguments)`. Never raises for tool failures."""


@dataclass(frozen=True, slots=True)
class ElicitOutcome:
    """What the user answered: `accept` (with `content`), `decline` or `cancel`."""

    action: Literal["accept", "decline", "cancel"]
    content: dict[str, Any] | None = None


ElicitFn = Callable[[str, dict[str, Any], float | None], Awaitable[ElicitOutcome]]
"""Ask the user: `(message, requested_schema, timeout_seconds)`; raises ElicitUnavailable or TimeoutError."""


@dataclass(frozen=True, slots=True)
class ResolvedTool:
    """A tool a composite references, as the catalog sees it (hidden tools included)."""

    name: str
    """The exposed name used to call it through `CallFn`."""
    tool: types.Tool
    """The definition (input schema, annotations, description) under that name."""
    backend: str | None
    composite_kind: str | None = None
    """None for backend tools; 'fanout' / 'router' / 'workflow' for composites."""
    references: frozenset[str] = frozenset()
    """For composites: the exposed names they call (for cycle detection)."""


class ToolResolver(Protocol):
    def resolve(self, reference: str) -> ResolvedTool | None:
        """`backend/tool`, `backend.tool` or an exposed name → the tool, or None if unknown."""
        ...

    def names_like(self, reference: str) -> list[str]:
        """The names an unknown `reference` may have meant (for a "did you mean"), in its own form."""
        ...


@dataclass(slots=True)
class RunContext:
    """Per-call services a composite may use; each is optional."""

    call: CallFn
    progress: ProgressFn | None = None
    elicit: ElicitFn | None = None
    run_id: str | None = None
    tenant: str | None = None
    runs: RunStore | None = None
    """Where a workflow checkpoints its steps (durable runs); None when not recorded."""
    resume: RunRecord | None = None
    """An interrupted run to continue: completed steps are not re-run."""
    steps: list[StepRecord] | None = None
    """The run record's steps, where a composite that does not checkpoint (a fan-out: one per target)
    puts what it ran, so the run's page shows each part's outcome; None when not recorded."""
    extra: dict[str, Any] = field(default_factory=dict)


class Composite(Protocol):
    kind: str
    name: str
    tool: types.Tool
    """What clients see in tools/list (input schema, output schema, annotations, description)."""
    references: frozenset[str]
    """Exposed names of the tools it calls."""

    async def run(self, arguments: Mapping[str, Any], ctx: RunContext) -> types.CallToolResult:
        """Run one call. Returns an `isError` result for failures; never raises for them.

        The result's `_meta["toolweave"]` carries `kind` and the kind's keys (docs/composites.md);
        the executor adds `run_id` and `latency_ms`.
        """
        ...
