"""Checking a workflow definition on its own: references, cycles, templates, skippable outputs.

Walks a definition once and reports every problem with its path relative to
the definition (`steps[2].dependsOn[0]`), never stopping at the first. The
catalog-dependent checks (unknown tools, call cycles between composites) are
made when the workflow is built (`plan.compile_plan`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from toolweave.composite.workflow.config import (
    CONTEXT_NAMES,
    ELICIT_ACTIONS,
    ERROR_ACTIONS,
    FAILURE_MODES,
    FOREACH_NAMES,
    MAX_ITERATIONS,
    MAX_OUTPUT_DEPTH,
    MAX_PARALLEL,
    MAX_RETRIES,
    OUTPUT_TYPES,
    RESERVED_ITEM_VARS,
    STEP_TYPES,
    OnErrorDef,
    OutputDef,
    OutputPropertyDef,
    StepDef,
    WorkflowDef,
)
from toolweave.problems import Problem
from toolweave.schemas.check import schema_error
from toolweave.schemas.read import properties_of
from toolweave.templates import (
    TemplateError,
    check_syntax,
    iter_template_strings,
    template_names,
    template_paths,
)

Issue = Problem

_TOOL_REF_RE = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9._/-]*$")
_IDENTIFIER_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def workflow_problems(defn: WorkflowDef) -> list[Problem]:
    """Every problem a definition has on its own, paths relative to it."""
    return _Validator(defn).run()


class _Validator:
    """Walks a definition once and collects every problem; never stops at the first."""

    def __init__(self, defn: WorkflowDef) -> None:
        self.defn = defn
        self.issues: list[Issue] = []
        self.index: dict[str, int] = {}
        self.param_names, self.params_closed = _parameter_names(defn.parameters)

    def add(self, path: str, message: str) -> None:
        self.issues.append(Problem(path, message))

    def run(self) -> list[Issue]:
        self.check_header()
        self.check_parameters()
        self.collect_ids()
        for position, step in enumerate(self.defn.steps):
            self.check_step(step, f"steps[{position}]")
        ancestors = self.check_cycles()
        for position, step in enumerate(self.defn.steps):
            self.check_references(step, f"steps[{position}]", ancestors)
        self.check_default_results()
        if self.defn.output is not None:
            self.check_output(self.defn.output)
        return sorted(self.issues, key=lambda issue: _path_key(issue[0]))

    # header, parameters, ids

    def check_header(self) -> None:
        defn = self.defn
        if not defn.description.strip():
            self.add("description", "is required: agents choose tools by their description")
        if not defn.steps:
            self.add("steps", "a workflow needs at least one step")
        elif len(defn.steps) > defn.max_steps:
            self.add("steps", f"too many steps: {len(defn.steps)} (the limit is {defn.max_steps})")
        if defn.timeout <= 0:
            self.add("timeout", "must be greater than zero")
        self.check_choice(defn.failure_mode, FAILURE_MODES, "failureMode")

    def check_parameters(self) -> None:
        schema = self.defn.parameters
        if schema.get("type") != "object":
            self.add("parameters.type", f"must be 'object' (got {schema.get('type')!r})")
        problem = _schema_problem(schema)
        if problem:
            self.add("parameters", f"not a valid JSON Schema: {problem}")

    def collect_ids(self) -> None:
        for position, step in enumerate(self.defn.steps):
            if not step.id.strip():
                self.add(f"steps[{position}].id", "must not be empty")
            elif step.id in self.index:
                self.add(
                    f"steps[{position}].id",
                    f"duplicate step id {step.id!r} (also steps[{self.index[step.id]}])",
                )
            else:
                self.index[step.id] = position

    def check_choice(self, value: str, choices: Iterable[str], path: str) -> None:
        if value not in choices:
            self.add(path, f"unknown value {value!r} (use {', '.join(choices)})")

    # steps

    def check_step(self, step: StepDef, path: str) -> None:
        if step.type is not None and step.type not in STEP_TYPES:
            self.add(f"{path}.type", f"unknown step type {step.type!r} (use tool, elicitation or forEach)")
            return
        if step.type is None and step.tool is not None and step.message is not None:
            self.add(path, "has both 'tool' and 'message': give 'type' to say which kind of step it is")
        {"tool": self.check_tool_step, "elicitation": self.check_elicitation, "forEach": self.check_for_each}[
            step.kind
        ](step, path)
        for position, dep in enumerate(step.depends_on):
            if dep not in self.index:
                self.add(f"{path}.dependsOn[{position}]", f"unknown step {dep!r}")
            elif dep == step.id:
                self.add(f"{path}.dependsOn[{position}]", "a step cannot depend on itself")
        if step.on_error is not None:
            self.check_on_error(step.on_error, f"{path}.onError")
        if step.timeout is not None and step.timeout <= 0:
            self.add(f"{path}.timeout", "must be greater than zero")
        self.check_templates(step, path)

    def check_tool_step(self, step: StepDef, path: str) -> None:
        if not step.tool:
            self.add(f"{path}.tool", "is required for a tool step")
        elif not _TOOL_REF_RE.match(step.tool):
            self.add(
                f"{path}.tool", f"{step.tool!r} is not a tool reference (use backend/tool or an exposed name)"
            )
        for field in ("message", "collection", "step"):
            if getattr(step, field) is not None:
                self.add(f"{path}.{field}", f"not allowed on a tool step (type {step.kind!r})")

    def check_elicitation(self, step: StepDef, path: str) -> None:
        if not step.message:
            self.add(f"{path}.message", "is required for an elicitation step")
        for field in ("tool", "collection", "step"):
            if getattr(step, field) is not None:
                self.add(f"{path}.{field}", "not allowed on an elicitation step")
        if step.arguments:
            self.add(f"{path}.arguments", "not allowed on an elicitation step")
        for field, alias in (("on_decline", "onDecline"), ("on_cancel", "onCancel")):
            value = getattr(step, field)
            if value is not None:
                self.check_choice(value, ELICIT_ACTIONS, f"{path}.{alias}")
        if step.request_schema is not None:
            self.check_elicit_schema(step.request_schema, f"{path}.schema")

    def check_elicit_schema(self, schema: dict[str, Any], path: str) -> None:
        problem = _schema_problem(schema)
        if problem:
            self.add(path, f"not a valid JSON Schema: {problem}")
            return
        if schema.get("type") != "object":
            return
        for name, prop in properties_of(schema).items():
            kind = prop.get("type")
            if kind not in ("string", "number", "integer", "boolean"):
                self.add(
                    f"{path}.properties.{name}",
                    "MCP elicitation asks for flat forms: each property must be a string, number, integer or boolean",
                )

    def check_for_each(self, step: StepDef, path: str) -> None:
        for field in ("tool", "message"):
            if getattr(step, field) is not None:
                self.add(
                    f"{path}.{field}", f"a forEach step must not have '{field}' (put it on the inner 'step')"
                )
        if step.collection is None or step.collection == "":
            self.add(f"{path}.collection", "is required for a forEach step")
        if not _IDENTIFIER_RE.match(step.item_var):
            self.add(f"{path}.itemVar", f"must be an identifier (got {step.item_var!r})")
        elif step.item_var in RESERVED_ITEM_VARS:
            self.add(f"{path}.itemVar", f"{step.item_var!r} is reserved; choose another name")
        if step.max_parallel is not None and not 1 <= step.max_parallel <= MAX_PARALLEL:
            self.add(f"{path}.maxParallel", f"must be between 1 and {MAX_PARALLEL}")
        if not 1 <= step.max_iterations <= MAX_ITERATIONS:
            self.add(f"{path}.maxIterations", f"must be between 1 and {MAX_ITERATIONS}")
        if step.step is None:
            self.add(f"{path}.step", "is required: the tool step to run for each item")
            return
        self.check_inner(step.step, f"{path}.step")

    def check_inner(self, inner: StepDef, path: str) -> None:
        if inner.kind != "tool":
            self.add(
                f"{path}.type", f"must be 'tool' (got {inner.kind!r}); only tool steps run inside forEach"
            )
            return
        self.check_tool_step(inner, path)
        for field, alias in (
            ("depends_on", "dependsOn"),
            ("condition", "condition"),
            ("default_results", "defaultResults"),
        ):
            if getattr(inner, field):
                self.add(
                    f"{path}.{alias}", "not supported on the inner step of a forEach (put it on the forEach)"
                )
        if inner.on_error is not None:
            self.check_on_error(inner.on_error, f"{path}.onError")
            if inner.on_error.action == "continue":
                self.add(f"{path}.onError.action", "use onError.action: continue on the forEach step itself")

    def check_on_error(self, on_error: OnErrorDef, path: str) -> None:
        self.check_choice(on_error.action, ERROR_ACTIONS, f"{path}.action")
        if on_error.retry_count is not None and on_error.max_retries is not None:
            self.add(path, "give retryCount or maxRetries, not both")
        if on_error.action == "retry":
            if on_error.retries < 1:
                self.add(f"{path}.retryCount", "must be at least 1 when action is retry")
            elif on_error.retries > MAX_RETRIES:
                self.add(f"{path}.retryCount", f"must be at most {MAX_RETRIES}")

    # templates

    def check_templates(self, step: StepDef, path: str) -> None:
        for sub, source in _step_templates(step):
            problem = check_syntax(source)
            if problem:
                self.add(f"{path}.{sub}", problem)

    def check_references(self, step: StepDef, path: str, ancestors: dict[str, set[str]] | None) -> None:
        """Names and step references of a step's templates; the inner step of a forEach also sees its item.

        With cycles in the graph (`ancestors` is None) "does it depend on it"
        has no answer, so that check waits until the cycles are fixed.
        """
        inner_names = CONTEXT_NAMES | FOREACH_NAMES | {step.item_var}
        reachable = _always if ancestors is None else ancestors.get(step.id, set()).__contains__
        for sub, source in _step_templates(step):
            names = inner_names if sub.startswith("step.") else CONTEXT_NAMES
            self.check_source(source, f"{path}.{sub}", names, reachable, step.id)

    def check_source(
        self,
        source: str,
        path: str,
        allowed: Iterable[str],
        reachable: Callable[[str], bool],
        own_id: str | None,
    ) -> None:
        try:
            names = template_names(source)
            paths = template_paths(source)
        except TemplateError:
            return
        allowed_set = set(allowed)
        for name in sorted(names - allowed_set):
            self.add(path, f"unknown name {name!r} (templates see {', '.join(sorted(allowed_set))})")
        for ref in sorted(paths):
            self.check_path(ref, path, reachable, own_id, names)

    def check_path(
        self,
        ref: tuple[str, ...],
        path: str,
        reachable: Callable[[str], bool],
        own_id: str | None,
        names: set[str],
    ) -> None:
        root = ref[0]
        if root not in names:
            return
        if root == "params" and len(ref) > 1 and self.params_closed and ref[1] not in self.param_names:
            self.add(path, f"unknown parameter {ref[1]!r} (not in parameters.properties)")
        if root != "steps" or len(ref) < 2:
            return
        target = ref[1]
        if target not in self.index:
            self.add(path, f"refers to unknown step {target!r}")
        elif target == own_id:
            self.add(path, "a step cannot use its own result")
        elif not reachable(target):
            self.add(path, f"uses step {target!r} but does not depend on it; add it to dependsOn")

    # graph

    def check_cycles(self) -> dict[str, set[str]] | None:
        """Report dependency cycles; return each step's ancestors (None when there are cycles)."""
        from toolweave.composite.workflow.graph import find_cycles

        steps = self.defn.steps
        edges = {
            step_id: [dep for dep in steps[position].depends_on if dep in self.index and dep != step_id]
            for step_id, position in self.index.items()
        }
        cycles = find_cycles(edges)
        for cycle in cycles:
            first = self.index[cycle[0]]
            self.add(f"steps[{first}].dependsOn", "dependency cycle: " + " → ".join([*cycle, cycle[0]]))
        return None if cycles else _ancestors(edges)

    def check_default_results(self) -> None:
        skippable = {step.id: step for step in self.defn.steps if step.may_be_skipped}
        if not skippable:
            return
        for position, step in enumerate(self.defn.steps):
            for _, source in _step_templates(step):
                self.check_defaults_used(source, skippable, f"steps[{position}] ({step.id!r})")
        if self.defn.output is not None:
            for _, source in _output_templates(self.defn.output.properties, "output.properties"):
                self.check_defaults_used(source, skippable, "the output")

    def check_defaults_used(self, source: str, skippable: dict[str, StepDef], user: str) -> None:
        try:
            paths = template_paths(source)
        except TemplateError:
            return
        for ref in sorted(paths):
            if len(ref) < 4 or ref[0] != "steps" or ref[2] != "output" or ref[1] not in skippable:
                continue
            step = skippable[ref[1]]
            if ref[3] not in (step.default_results or {}):
                self.add(
                    f"steps[{self.index[step.id]}].defaultResults",
                    f"needs a value for {ref[3]!r}: step {step.id!r} may be skipped and {user} "
                    f"uses steps.{step.id}.output.{ref[3]}",
                )

    # output

    def check_output(self, output: OutputDef) -> None:
        if output.type != "object":
            self.add("output.type", "the output of a workflow is an object")
        if not output.properties:
            self.add("output.properties", "must define at least one property")
        self.check_required(output.required, output.properties, "output.required")
        for name, prop in output.properties.items():
            self.check_property(name, prop, f"output.properties.{name}", 1)

    def check_required(
        self, required: list[str], properties: dict[str, OutputPropertyDef] | None, path: str
    ) -> None:
        for position, name in enumerate(required):
            if name not in (properties or {}):
                self.add(f"{path}[{position}]", f"required property {name!r} is not defined in properties")

    def check_property(self, name: str, prop: OutputPropertyDef, path: str, depth: int) -> None:
        if depth > MAX_OUTPUT_DEPTH:
            self.add(path, f"output properties nest deeper than {MAX_OUTPUT_DEPTH} levels")
            return
        if prop.type not in OUTPUT_TYPES:
            self.add(f"{path}.type", f"unknown type {prop.type!r} (use {', '.join(OUTPUT_TYPES)})")
        if not (prop.description or "").strip():
            self.add(f"{path}.description", "is required (clients and models read it)")
        if prop.has_value and prop.properties:
            self.add(path, "give either 'value' or 'properties', not both")
        elif not prop.has_value and not prop.properties:
            self.add(path, "needs a 'value' (or, for an object, nested 'properties')")
        if prop.properties and prop.type != "object":
            self.add(
                f"{path}.properties", f"only an object property has nested properties (type is {prop.type!r})"
            )
        if prop.has_default and prop.type in OUTPUT_TYPES and not _default_fits(prop.default, prop.type):
            self.add(f"{path}.default", f"does not fit type {prop.type!r}")
        self.check_required(prop.required, prop.properties, f"{path}.required")
        for sub, source in iter_template_strings(prop.value, "value"):
            problem = check_syntax(source)
            if problem:
                self.add(f"{path}.{sub}", problem)
            else:
                self.check_source(source, f"{path}.{sub}", CONTEXT_NAMES, _always, None)
        for child, child_prop in (prop.properties or {}).items():
            self.check_property(child, child_prop, f"{path}.properties.{child}", depth + 1)


def _always(_step_id: str) -> bool:
    return True


def _path_key(path: str) -> list[tuple[int, int | str]]:
    """Sort `steps[10]` after `steps[2]`: numbers compare as numbers."""
    return [(0, int(part)) if part.isdigit() else (1, part) for part in re.split(r"\[(\d+)\]", path) if part]


def _step_templates(step: StepDef) -> Iterator[tuple[str, str]]:
    """Every template of a step with its path relative to the step (`arguments.ns`, `step.arguments.x`)."""
    yield from iter_template_strings(step.arguments, "arguments")
    if isinstance(step.condition, str):
        yield from iter_template_strings(step.condition, "condition")
    if step.message is not None:
        yield from iter_template_strings(step.message, "message")
    if step.collection is not None:
        yield from iter_template_strings(step.collection, "collection")
    if step.step is not None:
        for sub, source in _step_templates(step.step):
            yield f"step.{sub}", source


def _output_templates(
    properties: dict[str, OutputPropertyDef] | None, path: str
) -> Iterator[tuple[str, str]]:
    for name, prop in (properties or {}).items():
        yield from iter_template_strings(prop.value, f"{path}.{name}.value")
        yield from _output_templates(prop.properties, f"{path}.{name}.properties")


def _parameter_names(schema: dict[str, Any]) -> tuple[frozenset[str], bool]:
    """Declared parameter names, and whether the list is closed (no additionalProperties)."""
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return frozenset(), False
    extra = schema.get("additionalProperties")
    return frozenset(properties), not extra


def _schema_problem(schema: Any) -> str | None:
    error = schema_error(schema)
    if error is None:
        return None
    where = "/".join(str(part) for part in error.absolute_path)
    return f"{error.message}" + (f" (at {where})" if where else "")


def _ancestors(edges: dict[str, list[str]]) -> dict[str, set[str]]:
    """Every step's transitive dependencies (the graph is known to be acyclic)."""
    memo: dict[str, set[str]] = {}

    def visit(node: str) -> set[str]:
        if node not in memo:
            found: set[str] = set()
            for dep in edges.get(node, ()):
                found.add(dep)
                found |= visit(dep)
            memo[node] = found
        return memo[node]

    for node in edges:
        visit(node)
    return memo


def _default_fits(value: Any, kind: str) -> bool:
    """ToolHive's leniency: numbers and strings may stand in for what coercion can turn them into."""
    if value is None:
        return True
    if kind == "string":
        return True
    if kind in ("integer", "number"):
        return isinstance(value, int | float | str) and not isinstance(value, bool)
    if kind == "boolean":
        return isinstance(value, bool | int | str)
    if kind == "object":
        return isinstance(value, dict | str)
    return isinstance(value, list | str)
