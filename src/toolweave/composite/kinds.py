"""The composite kinds: each one's definition model, its own checks and its builder, in one table.

`parse_composite` turns one entry of `composite_tools` (native, or a ToolHive
`VirtualMCPCompositeToolDefinition`) into a validated model with every problem
reported; `build_composite` builds a model against a catalog snapshot. The
config loader and the API's definition service both go through here, so a
definition means the same thing wherever it comes from.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from toolweave.composite.definition import CompositeBase, ToolReference
from toolweave.composite.fanout.config import FanoutDef
from toolweave.composite.router.config import RouterDef
from toolweave.composite.workflow.config import WorkflowDef
from toolweave.composite.workflow.toolhive import TOOLHIVE_KIND, translate_toolhive
from toolweave.composite.workflow.validation import workflow_problems
from toolweave.problems import Problem, join_path, problems_from_validation

if TYPE_CHECKING:
    from toolweave.composite.base import Composite, ToolResolver


@dataclass(frozen=True, slots=True)
class Kind:
    model: type[CompositeBase]
    check: Callable[[Any], list[Problem]]
    """The definition's own problems (no catalog needed), paths relative to it."""
    build: Callable[[Any, ToolResolver], Composite]
    """The builder: a definition against a catalog snapshot."""


# The builders import their kind's build module when first called: reading a config needs only the
# models, and the builders pull in the MCP types and the engines (`toolweave --help` stays fast).


def _build_fanout(definition: Any, resolver: ToolResolver) -> Composite:
    from toolweave.composite.fanout.build import build_fanout

    return build_fanout(definition, resolver)


def _build_router(definition: Any, resolver: ToolResolver) -> Composite:
    from toolweave.composite.router.build import build_router

    return build_router(definition, resolver)


def _build_workflow(definition: Any, resolver: ToolResolver) -> Composite:
    from toolweave.composite.workflow.build import build_workflow

    return build_workflow(definition, resolver)


KINDS: dict[str, Kind] = {
    "fanout": Kind(FanoutDef, lambda _model: [], _build_fanout),
    "router": Kind(RouterDef, lambda model: model.static_issues(), _build_router),
    "workflow": Kind(WorkflowDef, workflow_problems, _build_workflow),
}


def infer_kind(entry: Mapping[str, Any]) -> str | None:
    """`kind` if given, else from the fields: tools/targets → fanout, operations → router, steps → workflow."""
    kind = entry.get("kind")
    if isinstance(kind, str):
        return kind
    if "operations" in entry:
        return "router"
    if "steps" in entry:
        return "workflow"
    if "tools" in entry or "targets" in entry:
        return "fanout"
    return None


def parse_composite(entry: Any, path: str, problems: list[Problem]) -> CompositeBase | None:
    """Validate one composite definition (native, or a ToolHive document); problems go to `problems`."""
    if not isinstance(entry, Mapping):
        problems.append(Problem(path, "a composite tool definition must be a mapping"))
        return None
    if entry.get("kind") == TOOLHIVE_KIND:
        try:
            entry = translate_toolhive(entry)
        except ValueError as error:
            problems.append(Problem(path, str(error)))
            return None
    kind = infer_kind(entry)
    found = KINDS.get(kind or "")
    if found is None:
        known = ", ".join(sorted(KINDS))
        message = (
            f"unknown kind {kind!r} (known: {known})"
            if kind
            else "cannot tell the kind: give 'tools' (fan-out), 'operations' (router) or 'steps' (workflow)"
        )
        problems.append(Problem(join_path(path, "kind"), message))
        return None
    try:
        model = found.model.model_validate({**entry, "kind": kind})
    except ValidationError as error:
        problems.extend(problems_from_validation(error, path, found.model))
        return None
    problems.extend(Problem(*problem).under(path) for problem in found.check(model))
    return model


def build_composite(definition: Any, resolver: ToolResolver) -> Composite:
    """Build a validated definition against a catalog; BuildError lists every problem."""
    found = KINDS.get(getattr(definition, "kind", ""))
    if found is None:
        from toolweave.composite.errors import BuildError

        raise BuildError([Problem("kind", f"unknown composite kind {definition.kind!r}")])
    return found.build(definition, resolver)


def tool_references(definition: Any) -> list[ToolReference]:
    """Every tool a definition calls (none for an object that is not a definition model)."""
    references = getattr(definition, "tool_references", None)
    return references() if callable(references) else []
