"""Composite kinds: fan-out, router, workflow. `build_composite` picks the builder by kind."""

from toolweave.composite.base import BuildError, Composite, RunContext, ToolResolver
from toolweave.composite.kinds import KINDS, build_composite, parse_composite

__all__ = [
    "KINDS",
    "BuildError",
    "Composite",
    "RunContext",
    "ToolResolver",
    "build_composite",
    "parse_composite",
]
