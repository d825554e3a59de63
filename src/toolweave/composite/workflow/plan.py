"""Compiling a workflow definition against the catalog, once, into what the engine runs.

Everything that does not depend on a call is done here: tool references
resolved, templates compiled, the DAG's in-degrees and dependents computed,
retry policies and timeouts fixed, elicitation schemas wrapped for MCP. The
engine then only evaluates.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

from toolweave.composite.annotations import effective_hints
from toolweave.composite.base import ResolvedTool, ToolResolver
from toolweave.composite.errors import BuildError
from toolweave.composite.workflow.config import (
    DEFAULT_STEP_TIMEOUT,
    StepDef,
    WorkflowDef,
)
from toolweave.composite.workflow.graph import format_cycle
from toolweave.composite.workflow.output import OutputPlan
from toolweave.composite.workflow.validation import workflow_problems
from toolweave.problems import Problem
from toolweave.schemas.read import properties_of
from toolweave.schemas.validate import compile_validator
from toolweave.secrets import secret_fields
from toolweave.suggest import did_you_mean
from toolweave.templates import (
    CompiledTemplate,
    ValueTemplate,
    compile_template,
    compile_value,
    iter_template_strings,
    template_paths,
)

ELICIT_VALUE_KEY = "value"
"""The property a non-object elicitation schema is wrapped in (MCP asks for flat object forms)."""

_EMPTY = ValueTemplate(lambda _context: {}, True, ())


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Exponential backoff: `delay`, then twice that, ... never more than `cap`."""

    retries: int = 0
    delay: float = 1.0
    cap: float = 60.0

    def delay_before(self, retry: int) -> float:
        """Seconds to wait before retry number `retry` (1-based)."""
        growth: int = 2 ** (retry - 1)
        return min(self.delay * growth, self.cap)


@dataclass(frozen=True, slots=True)
class ToolCallPlan:
    """One tool a step calls: where, with which compiled arguments, how persistently."""

    reference: str
    target: str
    """The exposed name passed to `ctx.call`."""
    schema: Mapping[str, Any] | None
    """The target's input schema, for coercing rendered text."""
    arguments: ValueTemplate
    retry: RetryPolicy
    timeout: float | None
    idempotent: bool = False
    """The target is read-only or says `idempotentHint: true`: safe to call again after a crash."""
    secret_fields: frozenset[str] = frozenset()
    """Argument fields whose templates read a secret parameter: secret themselves, whatever the
    template does to the value (`|lower`, `|reverse`), so never recorded."""


@dataclass(frozen=True, slots=True)
class ElicitPlan:
    message: CompiledTemplate
    schema: dict[str, Any]
    """What is sent as `requestedSchema` (a flat object schema)."""
    wrapped: bool
    """The step asked for a single value; the answer is unwrapped from `value`."""
    validator: Any
    on_decline: str
    on_cancel: str
    has_default: bool
    default_response: Any
    timeout: float


@dataclass(frozen=True, slots=True)
class ForEachPlan:
    collection: ValueTemplate
    item_var: str
    max_parallel: int
    max_iterations: int
    call: ToolCallPlan
    continue_on_error: bool


@dataclass(slots=True)
class StepPlan:
    id: str
    index: int
    kind: str
    condition: ValueTemplate | None
    action: str
    """onError action: abort, continue or retry."""
    default_results: dict[str, Any] | None
    timeout: float
    deps: tuple[int, ...] = ()
    dependents: tuple[int, ...] = ()
    call: ToolCallPlan | None = None
    elicit: ElicitPlan | None = None
    for_each: ForEachPlan | None = None


@dataclass(slots=True)
class WorkflowPlan:
    name: str
    steps: tuple[StepPlan, ...]
    indegree: tuple[int, ...]
    timeout: float
    failure_mode: str
    max_parallel: int
    defaults: dict[str, Any]
    """Top-level parameter defaults, applied under the caller's arguments."""
    secret_params: frozenset[str]
    output: OutputPlan | None
    references: frozenset[str] = field(default_factory=frozenset)


def compile_plan(defn: WorkflowDef, resolver: ToolResolver) -> tuple[WorkflowPlan, list[ResolvedTool]]:
    """Resolve and compile; raise BuildError listing every unknown tool or call cycle."""
    issues = list(workflow_problems(defn))
    if issues:
        raise BuildError(issues)
    resolved: dict[str, ResolvedTool] = {}
    for path, reference in _tool_references(defn):
        tool = resolver.resolve(reference)
        if tool is None:
            hint = did_you_mean(reference, resolver.names_like(reference))
            issues.append(
                Problem(
                    f"{path}.tool",
                    f"unknown tool {reference!r} (no backend tool or composite has this name){hint}",
                )
            )
        else:
            resolved[reference] = tool
            issues.extend(
                Problem(f"{path}.tool", message) for message in _call_cycles(defn.name, tool, resolver)
            )
    if issues:
        raise BuildError(issues)
    index = {step.id: position for position, step in enumerate(defn.steps)}
    steps = tuple(
        _compile_step(step, position, index, resolved, defn) for position, step in enumerate(defn.steps)
    )
    _link_dependents(steps)
    plan = WorkflowPlan(
        name=defn.name,
        steps=steps,
        indegree=tuple(len(step.deps) for step in steps),
        timeout=defn.timeout,
        failure_mode=defn.failure_mode,
        max_parallel=defn.max_parallel,
        defaults=_parameter_defaults(defn.parameters),
        secret_params=secret_fields(defn.parameters),
        output=OutputPlan(defn.output) if defn.output is not None else None,
        references=frozenset(tool.name for tool in resolved.values()),
    )
    return plan, list(resolved.values())


def _tool_references(defn: WorkflowDef) -> Iterator[tuple[str, str]]:
    for position, step in enumerate(defn.steps):
        if step.kind == "tool" and step.tool:
            yield f"steps[{position}]", step.tool
        if step.kind == "forEach" and step.step is not None and step.step.tool:
            yield f"steps[{position}].step", step.step.tool


def _call_cycles(name: str, tool: ResolvedTool, resolver: ToolResolver) -> list[str]:
    """A workflow must not reach itself through the composites it calls (depth-first over `references`)."""
    if tool.name == name:
        return [f"a workflow cannot call itself ({name!r})"]
    if tool.composite_kind is None:
        return []
    seen: set[str] = set()
    stack: list[tuple[str, tuple[str, ...]]] = [(tool.name, (name, tool.name))]
    while stack:
        current, trail = stack.pop()
        found = resolver.resolve(current)
        for ref in sorted(found.references if found is not None else ()):
            if ref == name:
                return [f"calls itself through other composites: {format_cycle(list(trail))}"]
            if ref not in seen:
                seen.add(ref)
                stack.append((ref, (*trail, ref)))
    return []


def _compile_step(
    step: StepDef,
    position: int,
    index: Mapping[str, int],
    resolved: Mapping[str, ResolvedTool],
    defn: WorkflowDef,
) -> StepPlan:
    condition = step.condition
    plan = StepPlan(
        id=step.id,
        index=position,
        kind=step.kind,
        condition=compile_value(condition) if condition not in (None, "", True) else None,
        action=step.action,
        default_results=step.default_results,
        timeout=step.timeout if step.timeout is not None else DEFAULT_STEP_TIMEOUT,
        deps=tuple(sorted({index[dep] for dep in step.depends_on})),
    )
    if step.kind == "tool":
        plan.call = _compile_call(step, resolved, defn)
    elif step.kind == "elicitation":
        plan.elicit = _compile_elicit(step, plan.timeout)
    else:
        plan.for_each = _compile_for_each(step, resolved, defn)
    return plan


def _compile_call(step: StepDef, resolved: Mapping[str, ResolvedTool], defn: WorkflowDef) -> ToolCallPlan:
    reference = step.tool or ""
    tool = resolved[reference]
    on_error = step.on_error
    retry = (
        RetryPolicy(on_error.retries, on_error.retry_delay, on_error.delay_cap)
        if on_error is not None and on_error.action == "retry"
        else RetryPolicy()
    )
    return ToolCallPlan(
        reference=reference,
        target=tool.name,
        schema=tool.tool.input_schema if isinstance(tool.tool.input_schema, Mapping) else None,
        arguments=compile_value(step.arguments) if step.arguments else _EMPTY,
        retry=retry,
        timeout=step.timeout,
        idempotent=effective_hints(tool.tool).idempotent,
        secret_fields=_derived_secrets(step.arguments, secret_fields(defn.parameters)),
    )


def _derived_secrets(arguments: Mapping[str, Any] | None, secrets: frozenset[str]) -> frozenset[str]:
    """The top-level argument fields whose templates read a secret parameter (or `params` whole)."""
    if not arguments or not secrets:
        return frozenset()
    derived = set()
    for field_name, value in arguments.items():
        for _path, source in iter_template_strings(value):
            paths = template_paths(source)
            if any(p[:1] == ("params",) and (len(p) == 1 or p[1] in secrets) for p in paths):
                derived.add(field_name)
                break
    return frozenset(derived)


def _compile_elicit(step: StepDef, timeout: float) -> ElicitPlan:
    schema, wrapped = _elicit_schema(step.request_schema)
    validator = compile_validator(schema)
    assert validator is not None, "elicitation schemas are checked when the definition is validated"
    return ElicitPlan(
        message=compile_template(step.message or ""),
        schema=schema,
        wrapped=wrapped,
        validator=validator,
        on_decline=step.on_decline or "abort",
        on_cancel=step.on_cancel or "abort",
        has_default=step.has_default_response,
        default_response=step.default_response,
        timeout=timeout,
    )


def _elicit_schema(schema: dict[str, Any] | None) -> tuple[dict[str, Any], bool]:
    """MCP elicitation takes a flat object schema; a single-value schema is wrapped as `{value: ...}`."""
    if schema is None:
        return {"type": "object", "properties": {}}, False
    if schema.get("type") == "object":
        return schema, False
    wrapped = {"type": "object", "properties": {ELICIT_VALUE_KEY: schema}, "required": [ELICIT_VALUE_KEY]}
    return wrapped, True


def _compile_for_each(step: StepDef, resolved: Mapping[str, ResolvedTool], defn: WorkflowDef) -> ForEachPlan:
    inner = step.step
    assert inner is not None, "validated: a forEach step has an inner step"
    return ForEachPlan(
        collection=compile_value(step.collection),
        item_var=step.item_var,
        max_parallel=step.max_parallel or defn.max_parallel,
        max_iterations=step.max_iterations,
        call=_compile_call(inner, resolved, defn),
        continue_on_error=step.action == "continue",
    )


def _link_dependents(steps: tuple[StepPlan, ...]) -> None:
    dependents: list[list[int]] = [[] for _ in steps]
    for step in steps:
        for dep in step.deps:
            dependents[dep].append(step.index)
    for step, found in zip(steps, dependents, strict=True):
        step.dependents = tuple(found)


def _parameter_defaults(schema: Mapping[str, Any]) -> dict[str, Any]:
    return {name: prop["default"] for name, prop in properties_of(schema).items() if "default" in prop}
