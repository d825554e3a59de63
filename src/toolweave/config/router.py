"""Router definitions (seed 002). PLACEHOLDER being completed by the router work."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from toolweave.config.composite_base import CompositeBase


class RouterDef(CompositeBase):
    kind: Literal["router"] = "router"
    routing: Literal["rule_based", "agent_driven"] = "rule_based"
    operations: list[dict[str, Any]] = Field(default_factory=list)
    rules: list[dict[str, Any]] = Field(default_factory=list)
    default_operation: str | None = None
