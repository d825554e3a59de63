"""Safety annotations of a router or fan-out, derived from the tools it may call.

Clients, the executor's admission pools and approval rules all trust these
hints, so a composite may never look safer than what it can do:

- MCP semantics for absent hints: `readOnlyHint` false, `destructiveHint`
  true (meaningful only when not read-only), `idempotentHint` false,
  `openWorldHint` true. A read-only tool counts as non-destructive and
  idempotent.
- The composite is read-only / idempotent only if EVERY target is;
  destructive / open-world if ANY target is.
- A definition may state annotations more cautious than derived (e.g.
  `readOnlyHint: false` over read-only targets); one claiming more safety
  than its targets (`readOnlyHint: true` over a mutating target,
  `destructiveHint: false` over a destructive one, ...) is a BuildError.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import mcp_types as types

from toolweave.composite.base import ResolvedTool
from toolweave.composite.definition import AnnotationsDef
from toolweave.composite.errors import BuildError


@dataclass(frozen=True, slots=True)
class Hints:
    """Annotations with MCP defaults applied: every field is a definite answer."""

    read_only: bool
    destructive: bool
    idempotent: bool
    open_world: bool


def effective_hints(tool: types.Tool) -> Hints:
    annotations = tool.annotations or types.ToolAnnotations()
    read_only = annotations.read_only_hint is True
    return Hints(
        read_only=read_only,
        destructive=not read_only and annotations.destructive_hint is not False,
        idempotent=read_only or annotations.idempotent_hint is True,
        open_world=annotations.open_world_hint is not False,
    )


def combined_hints(targets: Sequence[ResolvedTool]) -> Hints:
    hints = [effective_hints(target.tool) for target in targets]
    return Hints(
        read_only=all(h.read_only for h in hints),
        destructive=any(h.destructive for h in hints),
        idempotent=all(h.idempotent for h in hints),
        open_world=any(h.open_world for h in hints),
    )


_CLAIMS = (
    # (field, wire name, the claimed value that means "safer", what a target lacks to break it)
    ("read_only", "readOnlyHint", True, "is not read-only"),
    ("destructive", "destructiveHint", False, "is destructive"),
    ("idempotent", "idempotentHint", True, "is not idempotent"),
    ("open_world", "openWorldHint", False, "reaches an open world"),
)


def composite_annotations(
    targets: Sequence[ResolvedTool], declared: AnnotationsDef | None, title: str | None = None
) -> types.ToolAnnotations:
    """The annotations to list; raises BuildError when `declared` claims more safety than the targets."""
    derived = combined_hints(targets)
    issues = _overclaims(targets, derived, declared)
    if issues:
        raise BuildError(issues)
    final = {field: getattr(derived, field) for field, *_ in _CLAIMS}
    if declared is not None:
        for field, wire, _safe, _broken in _CLAIMS:
            stated = getattr(declared, wire)
            if stated is not None:
                final[field] = stated
    return types.ToolAnnotations(
        title=(declared.title if declared and declared.title else None) or title,
        read_only_hint=final["read_only"],
        destructive_hint=final["destructive"],
        idempotent_hint=final["idempotent"],
        open_world_hint=final["open_world"],
    )


def _overclaims(
    targets: Sequence[ResolvedTool], derived: Hints, declared: AnnotationsDef | None
) -> list[tuple[str, str]]:
    if declared is None:
        return []
    issues = []
    for field, wire, safe_value, broken in _CLAIMS:
        if getattr(declared, wire) is safe_value and getattr(derived, field) is not safe_value:
            culprits = [t.name for t in targets if getattr(effective_hints(t.tool), field) is not safe_value]
            issues.append(
                (
                    f"annotations.{wire}",
                    f"{wire}: {str(safe_value).lower()} claims more safety than the targets: "
                    f"{', '.join(culprits)} {broken}",
                )
            )
    return issues
