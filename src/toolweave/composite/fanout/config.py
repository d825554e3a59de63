"""Fan-out definitions (the short `tools = [...]` form, plus strategies, order and per-target arguments)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from toolweave.composite.definition import CompositeBase, ToolReference
from toolweave.fields import Duration, StrictModel


class FanoutTarget(StrictModel):
    tool: str
    arguments: dict[str, Any] | None = None
    """Fixed or templated (Jinja2, sandboxed) arguments; None forwards the call's arguments."""
    timeout: Duration | None = None


class FanoutDef(CompositeBase):
    kind: Literal["fanout"] = "fanout"
    tools: list[str] = Field(default_factory=list)
    targets: list[FanoutTarget] = Field(default_factory=list)
    strategy: Literal["parallel", "sequential", "first_success"] = "parallel"
    order: Literal["completion", "declared"] = "completion"
    timeout: Duration | None = None
    """Default per-target timeout."""
    input_schema: dict[str, Any] | None = None
    """Explicit input schema; merged from the targets' schemas when absent."""

    @model_validator(mode="after")
    def _has_targets(self) -> FanoutDef:
        if self.tools and self.targets:
            raise ValueError("give either 'tools' or 'targets', not both")
        if not self.tools and not self.targets:
            raise ValueError("a fan-out needs at least one target in 'tools' (or 'targets')")
        return self

    def all_targets(self) -> list[FanoutTarget]:
        if self.targets:
            return list(self.targets)
        return [FanoutTarget(tool=tool) for tool in self.tools]

    def tool_references(self) -> list[ToolReference]:
        if self.targets:
            return [ToolReference(f"targets[{i}].tool", t.tool) for i, t in enumerate(self.targets)]
        return [ToolReference(f"tools[{i}]", tool) for i, tool in enumerate(self.tools)]
