"""Workflow definitions (seed 003). PLACEHOLDER being completed by the workflow work."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from toolweave.config.composite_base import CompositeBase


class WorkflowDef(CompositeBase):
    kind: Literal["workflow"] = "workflow"
    parameters: dict[str, Any] = Field(default_factory=lambda: {"type": "object", "properties": {}})
    steps: list[dict[str, Any]] = Field(default_factory=list)
