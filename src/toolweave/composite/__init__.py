"""Composite kinds: fan-out, router, workflow. `build_composite` picks the builder by kind."""

from __future__ import annotations

from typing import Any

from toolweave.composite.base import BuildError, Composite, RunContext, ToolResolver


def build_composite(definition: Any, resolver: ToolResolver) -> Composite:
    kind = definition.kind
    if kind == "fanout":
        from toolweave.composite.fanout import build_fanout

        return build_fanout(definition, resolver)
    if kind == "router":
        from toolweave.composite.router import build_router

        return build_router(definition, resolver)
    if kind == "workflow":
        from toolweave.composite.workflow import build_workflow

        return build_workflow(definition, resolver)
    raise BuildError([("kind", f"unknown composite kind {kind!r}")])


__all__ = ["BuildError", "Composite", "RunContext", "ToolResolver", "build_composite"]
