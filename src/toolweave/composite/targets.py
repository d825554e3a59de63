"""Resolving the tools a router or fan-out calls, with every problem reported at once."""

from __future__ import annotations

from collections.abc import Sequence

from toolweave.composite.base import ResolvedTool, ToolResolver
from toolweave.composite.errors import BuildError
from toolweave.problems import Problem
from toolweave.suggest import did_you_mean

BACKEND_ONLY = "routers and fan-outs target backend tools only"


def resolve_targets(references: Sequence[tuple[str, str]], resolver: ToolResolver) -> list[ResolvedTool]:
    """Resolve (path, reference) pairs in order; raise one BuildError naming every bad reference.

    Routers and fan-outs call backend tools only: nesting composites would
    hide inner calls from their annotations and make their results unreadable.
    """
    resolved: list[ResolvedTool] = []
    issues: list[Problem] = []
    for path, reference in references:
        found = resolver.resolve(reference)
        if found is None:
            hint = did_you_mean(reference, resolver.names_like(reference))
            issues.append(Problem(path, f"unknown tool {reference!r}{hint}"))
        elif found.composite_kind is not None:
            issues.append(Problem(path, f"{reference!r} is a {found.composite_kind}: {BACKEND_ONLY}"))
        else:
            resolved.append(found)
    if issues:
        raise BuildError(issues)
    return resolved
