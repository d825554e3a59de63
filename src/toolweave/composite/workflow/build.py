"""Building a workflow composite.

`build_workflow(defn, resolver)` compiles a validated `WorkflowDef` against
the catalog once; the returned composite's `run` executes one call. The
catalog uses `find_composite_cycles` to reject composites that call each
other in a loop.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import mcp_types as types

from toolweave.composite.base import ResolvedTool, RunContext, ToolResolver
from toolweave.composite.workflow.config import WorkflowDef
from toolweave.composite.workflow.engine import WorkflowRun
from toolweave.composite.workflow.plan import WorkflowPlan, compile_plan


class WorkflowComposite:
    """A built workflow: what clients see (`tool`) and how a call runs (`run`)."""

    kind = "workflow"

    def __init__(self, defn: WorkflowDef, plan: WorkflowPlan, targets: list[ResolvedTool]) -> None:
        self.name = defn.name
        self.definition = defn
        self.plan = plan
        self.references = plan.references
        self.tool = types.Tool(
            name=defn.name,
            title=defn.title,
            description=defn.description,
            input_schema=dict(defn.parameters),
            output_schema=plan.output.schema if plan.output is not None else None,
            annotations=_annotations(defn, targets),
        )

    async def run(self, arguments: Mapping[str, Any], ctx: RunContext) -> types.CallToolResult:
        """Run one call; failures, timeouts and aborts come back as `isError` results, never as exceptions."""
        run = WorkflowRun(self.plan, arguments, ctx)
        await run.execute()
        return run.result()


def build_workflow(defn: WorkflowDef, resolver: ToolResolver) -> WorkflowComposite:
    """Compile a workflow against the catalog; BuildError names every unknown tool and call cycle with its path."""
    plan, targets = compile_plan(defn, resolver)
    return WorkflowComposite(defn, plan, targets)


def _annotations(defn: WorkflowDef, targets: list[ResolvedTool]) -> types.ToolAnnotations | None:
    """The definition's own hints win; missing ones are derived from the tools the workflow calls.

    Read-only only when every step tool is; destructive or open-world when any
    step tool says so. Elicitation-only workflows claim nothing.
    """
    given = defn.annotations.model_dump(exclude_none=True) if defn.annotations is not None else {}
    hints = [target.tool.annotations for target in targets]
    derived: dict[str, Any] = {}
    if hints and all(hint is not None and hint.read_only_hint for hint in hints):
        derived["readOnlyHint"] = True
    if any(hint is not None and hint.destructive_hint for hint in hints):
        derived["destructiveHint"] = True
    if any(hint is not None and hint.open_world_hint for hint in hints):
        derived["openWorldHint"] = True
    merged = {**derived, **given}
    return types.ToolAnnotations.model_validate(merged) if merged else None


__all__ = ["WorkflowComposite", "build_workflow"]
