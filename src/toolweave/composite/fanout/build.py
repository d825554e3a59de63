"""The fan-out composite: one call sent to many backend tools, results aggregated (seed 000, SPEC §3).

Strategies:

- `parallel` (default): every target at once; the call takes as long as
  the slowest target (or its timeout), not the sum.
- `sequential`: one after another in declared order; a failure does not stop
  the rest.
- `first_success`: every target at once; the first successful result is
  returned and the other targets are cancelled. When all fail, the result is
  an error holding every failure.

Each target's `timeout` (else the definition's) turns a slow target into an
error item `timed out after Xs`. Cancelling the call cancels its targets: they
run in an `asyncio.TaskGroup`, so none outlives `run`.

Arguments: the short form (`tools = [...]`) and targets without `arguments`
receive the call's arguments as they are. A target with `arguments` receives
those instead, rendered per call with the shared sandboxed Jinja2 templates:
the context holds every call argument by name and all of them as `params` /
`arguments`; a string that is exactly one `{{ expr }}` keeps its native type;
rendered text is coerced to the type the target's schema asks for.

The listed input schema is the explicit `input_schema`, or a merge:

- Targets that receive the call's arguments contribute their properties.
- Templated targets contribute the names their templates read: a value that
  is exactly `{{ name }}` / `{{ params.name }}` takes the schema of the
  target parameter it fills; any other read is listed without a type.
  Templates that read `params` as a whole cannot be analysed; the schema
  never forbids unlisted properties, so such targets still get everything.
- The same value goes to every target, so a property's types are
  intersected (`integer` fits `number`) and so are enums; a property whose
  types (or enums) cannot fit every target is a BuildError naming both.
- A property is required only when every target that reads it requires it
  (a templated target requires the names its templates read without
  `default`, `is defined` tests or conditionals).

Result (SPEC §3): for each target a text item naming its tool, then its
content; `isError` when any target failed (successful results kept);
`structuredContent = {results: [{tool, isError, content, structuredContent}]}`;
`_meta["toolweave"] = {kind: "fanout", targets: [{tool, isError, latency_ms, status}]}`
with `status` one of `completed`, `failed`, `timed_out`, `cancelled`.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import mcp_types as types
from jinja2 import nodes

from toolweave.composite.annotations import composite_annotations
from toolweave.composite.base import BuildError, ProgressFn, ResolvedTool, RunContext, ToolResolver
from toolweave.composite.fanout.config import FanoutDef, FanoutTarget
from toolweave.composite.jsonschemas import (
    merge_definitions,
    properties_of,
    renamed_property,
    required_of,
    type_names,
    type_value,
)
from toolweave.composite.router.config import input_schema_problem
from toolweave.composite.targets import resolve_targets
from toolweave.export.describe import ParamUsage, PartDoc, describe_fanout
from toolweave.results import META_KEY, text
from toolweave.templates import (
    ENV,
    TemplateError,
    ValueTemplate,
    check_syntax,
    coerce,
    compile_value,
    copy_json,
    iter_template_strings,
    template_names,
    template_paths,
)

KIND: Final = "fanout"
Status = Literal["completed", "failed", "timed_out", "cancelled"]

_PARAMS_NAMES: Final = frozenset({"params", "arguments"})
_FORWARD_RE: Final = re.compile(
    r"^\s*\{\{-?\s*(?:(?:params|arguments)\.)?([A-Za-z_][A-Za-z0-9_]*)\s*-?\}\}\s*$"
)
_GUARD_FILTERS: Final = frozenset({"default", "d"})
_GUARD_TESTS: Final = frozenset({"defined", "undefined", "none"})

OUTPUT_SCHEMA: Final[dict[str, Any]] = {
    "type": "object",
    "properties": {
        "results": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "tool": {"type": "string"},
                    "isError": {"type": "boolean"},
                    "content": {"type": "array"},
                    "structuredContent": {},
                },
                "required": ["tool", "isError", "content"],
            },
        }
    },
    "required": ["results"],
}
"""What `structuredContent` of every fan-out result looks like (errors included)."""

__all__ = ["KIND", "OUTPUT_SCHEMA", "FanoutComposite", "build_fanout"]


# -- running ---------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Target:
    """One target, ready to call."""

    index: int
    resolved: ResolvedTool
    arguments: ValueTemplate | None
    """None forwards the call's arguments; else rendered per call."""
    timeout: float | None

    @property
    def name(self) -> str:
        return self.resolved.name

    def call_arguments(self, arguments: dict[str, Any], context: Mapping[str, Any]) -> dict[str, Any]:
        """What this target is called with; raises TemplateError when its templates cannot render."""
        if self.arguments is None:
            return dict(arguments)
        rendered = coerce(self.arguments.render(context), self.resolved.tool.input_schema)
        if not isinstance(rendered, dict):
            raise TemplateError("the arguments template did not render to an object")
        return rendered


@dataclass(slots=True)
class Outcome:
    target: Target
    result: types.CallToolResult
    latency_ms: float
    status: Status


class _FirstSuccess(Exception):
    """Raised inside the task group to cancel the remaining targets once one succeeded."""


@dataclass(slots=True)
class _Progress:
    """Reports `done / total` as targets finish; a failing progress channel never fails the call."""

    report: ProgressFn | None
    total: int
    done: int = field(default=0)

    async def finished(self, outcome: Outcome) -> None:
        self.done += 1
        if self.report is None:
            return
        try:
            await self.report(float(self.done), float(self.total), f"{outcome.target.name} {outcome.status}")
        except Exception:  # noqa: BLE001 - progress is best effort; the results matter, not the notification
            return


@dataclass(slots=True)
class FanoutComposite:
    """A built fan-out; `run` is the per-call path."""

    name: str
    tool: types.Tool
    references: frozenset[str]
    targets: tuple[Target, ...]
    strategy: Literal["parallel", "sequential", "first_success"]
    order: Literal["completion", "declared"]
    templated: bool
    kind: str = KIND

    async def run(self, arguments: Mapping[str, Any], ctx: RunContext) -> types.CallToolResult:
        args = dict(arguments) if isinstance(arguments, Mapping) else {}
        context = arguments_context(args) if self.templated else {}
        progress = _Progress(ctx.progress, len(self.targets))
        if self.strategy == "sequential":
            outcomes = [await self._finish(target, args, context, ctx, progress) for target in self.targets]
        else:
            outcomes = await self._concurrently(args, context, ctx, progress)
        return self._aggregate(outcomes)

    async def _finish(
        self,
        target: Target,
        args: dict[str, Any],
        context: Mapping[str, Any],
        ctx: RunContext,
        progress: _Progress,
    ) -> Outcome:
        outcome = await call_target(target, args, context, ctx)
        await progress.finished(outcome)
        return outcome

    async def _concurrently(
        self, args: dict[str, Any], context: Mapping[str, Any], ctx: RunContext, progress: _Progress
    ) -> list[Outcome]:
        outcomes: list[Outcome] = []
        stop_on_success = self.strategy == "first_success"

        async def one(target: Target) -> None:
            outcome = await call_target(target, args, context, ctx)
            outcomes.append(outcome)
            await progress.finished(outcome)
            if stop_on_success and not outcome.result.is_error:
                raise _FirstSuccess

        try:
            async with asyncio.TaskGroup() as group:
                for target in self.targets:
                    group.create_task(one(target))
        except* _FirstSuccess:
            pass
        return outcomes

    def _aggregate(self, outcomes: list[Outcome]) -> types.CallToolResult:
        if self.order == "declared":
            outcomes.sort(key=lambda outcome: outcome.target.index)
        shown = outcomes
        if self.strategy == "first_success":
            winner = next((o for o in outcomes if not o.result.is_error), None)
            shown = [winner] if winner is not None else outcomes
        finished = {outcome.target.index for outcome in outcomes}
        cancelled = [
            Outcome(t, types.CallToolResult(content=[]), 0.0, "cancelled")
            for t in self.targets
            if t.index not in finished
        ]
        content: list[Any] = []
        for outcome in shown:
            content.append(text(_heading(outcome)))
            content.extend(outcome.result.content)
        return types.CallToolResult(
            content=content,
            structured_content={"results": [_result_entry(outcome) for outcome in shown]},
            is_error=any(outcome.result.is_error for outcome in shown),
            _meta={META_KEY: {"kind": KIND, "targets": [_meta_entry(o) for o in [*outcomes, *cancelled]]}},
        )


def _heading(outcome: Outcome) -> str:
    return f"## {outcome.target.name}" + (" (failed)" if outcome.result.is_error else "")


def _result_entry(outcome: Outcome) -> dict[str, Any]:
    result = outcome.result
    return {
        "tool": outcome.target.name,
        "isError": result.is_error,
        "content": [
            item.model_dump(by_alias=True, mode="json", exclude_none=True) for item in result.content
        ],
        "structuredContent": result.structured_content,
    }


def _meta_entry(outcome: Outcome) -> dict[str, Any]:
    return {
        "tool": outcome.target.name,
        "isError": outcome.result.is_error,
        "latency_ms": outcome.latency_ms,
        "status": outcome.status,
    }


def arguments_context(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """What argument templates see: each call argument by name, and all of them as `params` / `arguments`."""
    plain = dict(arguments)
    return {**plain, "params": plain, "arguments": plain}


async def call_target(
    target: Target, args: dict[str, Any], context: Mapping[str, Any], ctx: RunContext
) -> Outcome:
    """Call one target; every failure becomes an error result (cancellation still propagates)."""
    started = time.perf_counter()
    try:
        call_args = target.call_arguments(args, context)
    except TemplateError as error:
        failure = _error(f"cannot build the arguments for {target.name}: {error}")
        return Outcome(target, failure, _elapsed_ms(started), "failed")
    status: Status = "completed"
    try:
        result = await _call_with_timeout(target, call_args, ctx)
    except _TargetTimedOut:
        result = _error(f"timed out after {target.timeout:g}s")
        status = "timed_out"
    except Exception as error:  # noqa: BLE001 - a broken call is this target's error item, not a crash
        result = _error(f"calling {target.name} failed: {error or type(error).__name__}")
    if status == "completed" and result.is_error:
        status = "failed"
    return Outcome(target, result, _elapsed_ms(started), status)


class _TargetTimedOut(Exception):
    """This target's own timeout expired (as opposed to a TimeoutError from inside the call)."""


async def _call_with_timeout(
    target: Target, call_args: dict[str, Any], ctx: RunContext
) -> types.CallToolResult:
    if target.timeout is None:
        return await ctx.call(target.name, call_args)
    scope = asyncio.timeout(target.timeout)
    try:
        async with scope:
            return await ctx.call(target.name, call_args)
    except TimeoutError:
        if scope.expired():
            raise _TargetTimedOut from None
        raise


def _error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[text(message)], is_error=True)


def _elapsed_ms(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


# -- building ----------------------------------------------------------------------


def build_fanout(defn: FanoutDef, resolver: ToolResolver) -> FanoutComposite:
    """Build a fan-out against the catalog; raise BuildError listing every problem."""
    specs = defn.all_targets()
    paths = _target_paths(defn)
    resolved = resolve_targets(
        [(_tool_path(defn, path), spec.tool) for path, spec in zip(paths, specs, strict=True)], resolver
    )
    issues = [
        issue for path, spec in zip(paths, specs, strict=True) for issue in _template_issues(path, spec)
    ]
    if issues:
        raise BuildError(issues)
    targets = tuple(
        Target(
            index=index,
            resolved=tool,
            arguments=compile_value(spec.arguments) if spec.arguments is not None else None,
            timeout=spec.timeout if spec.timeout is not None else defn.timeout,
        )
        for index, (spec, tool) in enumerate(zip(specs, resolved, strict=True))
    )
    schema, usage, schema_issues = _input_schema(defn, list(zip(paths, specs, resolved, strict=True)))
    issues.extend(schema_issues)
    try:
        annotations = composite_annotations(resolved, defn.annotations, defn.title)
    except BuildError as error:
        issues.extend(error.issues)
        annotations = None
    if issues:
        raise BuildError(issues)
    tool = types.Tool(
        name=defn.name,
        title=defn.title,
        description=_description(defn, specs, resolved, schema, usage),
        input_schema=schema,
        output_schema=copy_json(OUTPUT_SCHEMA),
        annotations=annotations,
        _meta=dict(defn.meta) or None,
    )
    return FanoutComposite(
        name=defn.name,
        tool=tool,
        references=frozenset(target.name for target in resolved),
        targets=targets,
        strategy=defn.strategy,
        order=defn.order,
        templated=any(spec.arguments is not None for spec in specs),
    )


def _target_paths(defn: FanoutDef) -> list[str]:
    if defn.targets:
        return [f"targets[{index}]" for index in range(len(defn.targets))]
    return [f"tools[{index}]" for index in range(len(defn.tools))]


def _tool_path(defn: FanoutDef, path: str) -> str:
    return f"{path}.tool" if defn.targets else path


def _template_issues(path: str, spec: FanoutTarget) -> list[tuple[str, str]]:
    if spec.arguments is None:
        return []
    issues = []
    for sub, source in iter_template_strings(spec.arguments):
        problem = check_syntax(source)
        if problem:
            issues.append((f"{path}.arguments.{sub}", problem))
    return issues


def _description(
    defn: FanoutDef,
    specs: Sequence[FanoutTarget],
    resolved: Sequence[ResolvedTool],
    schema: Mapping[str, Any],
    usage: Mapping[str, ParamUsage],
) -> str:
    parts = [
        PartDoc(
            label=tool.name,
            description=tool.tool.description or "",
            note="called with its own arguments" if spec.arguments is not None else None,
        )
        for spec, tool in zip(specs, resolved, strict=True)
    ]
    return describe_fanout(
        defn.description, strategy=defn.strategy, input_schema=schema, targets=parts, usage=usage
    )


# -- the merged input schema ---------------------------------------------------------------


@dataclass(slots=True)
class _Read:
    """One target reading one unified property."""

    path: str
    tool: str
    prop: Mapping[str, Any]
    required: bool
    via_template: bool = False


def _input_schema(
    defn: FanoutDef, targets: Sequence[tuple[str, FanoutTarget, ResolvedTool]]
) -> tuple[dict[str, Any], dict[str, ParamUsage], list[tuple[str, str]]]:
    reads = _reads(targets)
    usage = {
        name: ParamUsage(
            tuple(dict.fromkeys(r.tool for r in found)),
            tuple(dict.fromkeys(r.tool for r in found if r.required)),
        )
        for name, found in reads.items()
    }
    if defn.input_schema is not None:
        problem = input_schema_problem(defn.input_schema)
        return copy_json(defn.input_schema), usage, [("input_schema", problem)] if problem else []
    forwarding_paths = {path for path, spec, _tool in targets if spec.arguments is None}
    properties: dict[str, Any] = {}
    issues: list[tuple[str, str]] = []
    for name, found in reads.items():
        merged, problems = _narrowed(name, found)
        if "description" not in merged:
            _describe_template_read(merged, found)
        properties[name] = merged
        issues.extend(problems)
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    required = [name for name, found in reads.items() if _required(found, forwarding_paths)]
    if required:
        schema["required"] = required
    definitions, problems = merge_definitions(
        [(path, tool.tool.input_schema) for path, _spec, tool in targets]
    )
    schema.update(definitions)
    issues.extend(problems)
    return schema, usage, issues


def _reads(targets: Sequence[tuple[str, FanoutTarget, ResolvedTool]]) -> dict[str, list[_Read]]:
    """Every (property, target) read, in target order then property order."""
    reads: dict[str, list[_Read]] = {}
    for path, spec, tool in targets:
        schema = tool.tool.input_schema
        if spec.arguments is None:
            required = set(required_of(schema))
            for name, prop in properties_of(schema).items():
                reads.setdefault(name, []).append(_Read(path, tool.name, prop, name in required))
        else:
            for name, read in _template_reads(path, spec.arguments, tool).items():
                reads.setdefault(name, []).append(read)
    return reads


def _template_reads(path: str, arguments: Mapping[str, Any], tool: ResolvedTool) -> dict[str, _Read]:
    """The call arguments a templated target reads, each with the schema it can be given."""
    schema = tool.tool.input_schema
    target_properties = properties_of(schema)
    reads: dict[str, _Read] = {}
    for key, value in arguments.items():
        forwarded = _FORWARD_RE.match(value) if isinstance(value, str) else None
        if forwarded is not None and key in target_properties:
            name = forwarded.group(1)
            prop = renamed_property(target_properties[key], renamed=name != key)
            reads[name] = _Read(path, tool.name, prop, True, via_template=True)
    for _sub, source in iter_template_strings(dict(arguments)):
        unguarded = _unguarded_names(source)
        for name in _names_read(source):
            if name not in reads:
                reads[name] = _Read(path, tool.name, {}, name in unguarded, via_template=True)
            elif name in unguarded:
                reads[name].required = True
    return reads


def _describe_template_read(prop: dict[str, Any], found: Sequence[_Read]) -> None:
    tools = list(dict.fromkeys(read.tool for read in found if read.via_template))
    if tools:
        prop["description"] = f"Passed to {', '.join(tools)} through its arguments template."


def _names_read(source: str) -> list[str]:
    """Call-argument names a template reads; a read of `params` as a whole adds nothing we can list."""
    names = sorted(template_names(source) - _PARAMS_NAMES)
    if template_names(source) & _PARAMS_NAMES:
        for chain in sorted(template_paths(source)):
            if chain[0] in _PARAMS_NAMES and len(chain) > 1 and chain[1] not in names:
                names.append(chain[1])
    return names


def _unguarded_names(source: str) -> set[str]:
    """Names a template reads outside `default`, `is defined` tests and conditionals.

    Templates are strict, so each of these must be given or the target fails:
    they are what the target requires. (Loop variables may appear here too;
    callers intersect with the names the template reads from its context.)
    """
    found: set[str] = set()
    _visit_unguarded(ENV.parse(source), False, found)
    return found


def _visit_unguarded(node: nodes.Node, guarded: bool, found: set[str]) -> None:
    if _is_guard(node):
        guarded = True
    elif isinstance(node, nodes.Getattr) and _is_params(node.node):
        if not guarded:
            found.add(node.attr)
        return
    elif isinstance(node, nodes.Getitem) and _is_params(node.node) and isinstance(node.arg, nodes.Const):
        if not guarded:
            found.add(str(node.arg.value))
        return
    elif isinstance(node, nodes.Name) and node.ctx == "load" and not guarded:
        found.add(node.name)
    for child in node.iter_child_nodes():
        _visit_unguarded(child, guarded, found)


def _is_guard(node: nodes.Node) -> bool:
    """A construct under which a missing name does not fail the template."""
    if isinstance(node, nodes.If | nodes.CondExpr):
        return True
    if isinstance(node, nodes.Filter):
        return node.name in _GUARD_FILTERS
    return isinstance(node, nodes.Test) and node.name in _GUARD_TESTS


def _is_params(node: nodes.Node) -> bool:
    return isinstance(node, nodes.Name) and node.name in _PARAMS_NAMES


def _required(found: Sequence[_Read], forwarding_paths: set[str]) -> bool:
    """Required only when every target that reads the property requires it.

    A target that receives the call's arguments reads every property, so one
    that does not list this property makes it optional.
    """
    readers = {read.path for read in found}
    return forwarding_paths <= readers and all(read.required for read in found)


def _narrowed(name: str, found: Sequence[_Read]) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    """One property's schema that fits every target reading it (the same value goes to all)."""
    first = found[0]
    merged = copy_json(dict(first.prop))
    problems: list[tuple[str, str]] = []
    for read in found[1:]:
        for key, value in read.prop.items():
            if key not in ("type", "enum", "description") and key not in merged:
                merged[key] = copy_json(value)
        problem = _narrow_type(merged, read.prop)
        if problem is None:
            problem = _narrow_enum(merged, read.prop)
        if problem is not None:
            problems.append(
                (
                    read.path,
                    f"property {name!r} {problem[0]} for {first.tool} but {problem[1]} for {read.tool}",
                )
            )
        longer = read.prop.get("description")
        if isinstance(longer, str) and len(longer) > len(str(merged.get("description") or "")):
            merged["description"] = longer
    return merged, problems


def _narrow_type(merged: dict[str, Any], prop: Mapping[str, Any]) -> tuple[str, str] | None:
    mine, theirs = type_names(merged), type_names(prop)
    if theirs is None:
        return None
    if mine is None:
        merged["type"] = type_value(theirs)
        return None
    common = [kind for kind in mine if kind in theirs]
    if _integer_fits_number(mine, theirs) and "integer" not in common:
        common.append("integer")
    if not common:
        return f"is {_types_text(mine)}", f"{_types_text(theirs)}"
    merged["type"] = type_value(common)
    return None


def _integer_fits_number(mine: Sequence[str], theirs: Sequence[str]) -> bool:
    """An integer is a number: `integer` on one side and `number` on the other leaves `integer`."""
    return ("integer" in mine and "number" in theirs) or ("number" in mine and "integer" in theirs)


def _narrow_enum(merged: dict[str, Any], prop: Mapping[str, Any]) -> tuple[str, str] | None:
    mine, theirs = merged.get("enum"), prop.get("enum")
    if not isinstance(theirs, list):
        return None
    if not isinstance(mine, list):
        merged["enum"] = copy_json(theirs)
        return None
    common = [value for value in mine if value in theirs]
    if not common:
        return f"accepts only {mine}", f"only {theirs}"
    merged["enum"] = common
    return None


def _types_text(names: Sequence[str]) -> str:
    return " or ".join(repr(name) for name in names)
