"""The router composite: one tool in front of several operations (seed 002).

Built once per catalog snapshot: references resolved, conditions compiled,
rules sorted, the unified schema merged, each operation's validator created,
templates compiled. A call then only picks the operation (a few compiled
predicates), maps and validates the arguments, and makes one inner call.

Call-time semantics (documented for users):

- `rule_based`: rules run lowest `priority` first (ties in declared order);
  the first match wins, else `default_operation`; with neither, the result is
  an error listing the rules tried, and nothing is called.
- `agent_driven`: the `operation` argument names the slug; a missing or
  unknown one is an error listing the valid slugs.
- Arguments: mapped parameters are renamed (`parameter_mapping`); other
  arguments pass through under their own name only when the operation's
  schema lists them (arguments meant for other operations are dropped);
  fixed `arguments` are added last. The result is validated against the
  operation tool's own schema; problems name the UNIFIED parameter.
- `_meta["toolweave"]` = `{kind: "router", operation, tool, reason}`, where
  `tool` is the exposed name of the backend tool that ran and `reason` is the
  matching rule (`url contains 'linkedin.com'`), `default operation` or
  `agent selected`.
- `success_template` / `error_template` are rendered into a leading text
  item. Their context: every field of the result's structured content, then
  every argument (unified names), then `params` / `arguments` (all
  arguments), `data` / `structured` (the structured content), `text` (the
  result's text), `content_preview` (its first 500 characters),
  `error_message` (the text of an error, else empty), `is_error`,
  `operation`, `operation_name`, `tool` and `reason`. Templates are strict
  (an undefined name is an error, use `| default(...)`); a template that
  fails to render leaves the result intact and says why in that text item.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import mcp_types as types
from jsonschema.protocols import Validator

from toolweave.composite.annotations import composite_annotations
from toolweave.composite.base import BuildError, ResolvedTool, RunContext, ToolResolver
from toolweave.composite.jsonschemas import accepts_unlisted, make_validator, properties_of, required_of
from toolweave.composite.router.conditions import CompiledCondition, compile_condition
from toolweave.composite.router.config import SELECTOR_PARAM, RouterDef, RouterOperation
from toolweave.composite.router.schema import OperationInput, UnifiedSchema, exposed_parameters, unify
from toolweave.composite.targets import resolve_targets
from toolweave.export.describe import PartDoc, describe_router, output_fields
from toolweave.results import META_KEY, error_result, joined_text, text
from toolweave.schemas import fast_check
from toolweave.templates import CompiledTemplate, TemplateError, compile_template, secret_names

KIND: Final = "router"
REASON_DEFAULT: Final = "default operation"
REASON_AGENT: Final = "agent selected"
PREVIEW_CHARS: Final = 500

__all__ = ["KIND", "RouterComposite", "build_router"]


@dataclass(frozen=True, slots=True)
class Operation:
    """One operation, ready to run: its tool, how arguments reach it, how they are checked."""

    slug: str
    label: str
    target: ResolvedTool
    mapping: tuple[tuple[str, str], ...]
    """(unified name, operation parameter) renames."""
    passthrough: frozenset[str]
    """Argument names forwarded as they are (the operation lists them and nothing else claims them)."""
    fixed: Mapping[str, Any]
    unified_names: Mapping[str, str]
    """operation parameter → the unified name the agent should use for it."""
    validator: Validator | None
    secrets: frozenset[str] = frozenset()
    """Operation parameters holding secrets: their values never appear in a message."""
    accepts: Callable[[Any], bool] | None = None
    """A fast check that says only "valid" (`catalog.validation.fast_check`); jsonschema decides the rest."""

    def arguments_for(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        mapped: dict[str, Any] = {}
        for unified, target in self.mapping:
            if unified in arguments:
                mapped[target] = arguments[unified]
        for name, value in arguments.items():
            if name in self.passthrough:
                mapped[name] = value
        if self.fixed:
            mapped.update(self.fixed)
        return mapped

    def problems(self, mapped: Mapping[str, Any]) -> list[str]:
        """Why `mapped` does not fit the operation's schema, in the agent's (unified) terms."""
        if self.validator is None or (self.accepts is not None and self.accepts(mapped)):
            return []
        return sorted(self._problem(error, mapped) for error in self.validator.iter_errors(mapped))

    def _problem(self, error: Any, mapped: Mapping[str, Any]) -> str:
        if error.validator == "required" and not error.path:
            missing = [name for name in error.validator_value if name not in mapped]
            return "; ".join(self._missing(name) for name in missing) or error.message
        if not error.path:
            return error.message
        first = str(error.path[0])
        detail = f"invalid ({error.validator})" if first in self.secrets else error.message
        if first in self.fixed:
            return f"the fixed argument {first!r} is rejected by {self.target.name}: {detail} (fix the router definition)"
        where = ".".join([self._unified(first), *(str(part) for part in list(error.path)[1:])])
        return f"parameter {where!r}: {detail}"

    def _missing(self, target: str) -> str:
        unified = self._unified(target)
        if unified == target:
            return f"missing required parameter {unified!r}"
        return f"missing required parameter {unified!r} (sent to {self.target.name} as {target!r})"

    def _unified(self, target: str) -> str:
        return self.unified_names.get(target, target)


@dataclass(frozen=True, slots=True)
class Rule:
    condition: CompiledCondition
    operation: Operation
    priority: int


@dataclass(slots=True)
class RouterComposite:
    """A built router; `run` is the per-call path."""

    name: str
    tool: types.Tool
    references: frozenset[str]
    operations: dict[str, Operation]
    rules: tuple[Rule, ...]
    default: Operation | None
    agent_driven: bool
    success_template: CompiledTemplate | None
    error_template: CompiledTemplate | None
    kind: str = KIND

    async def run(self, arguments: Mapping[str, Any], ctx: RunContext) -> types.CallToolResult:
        args = arguments if isinstance(arguments, Mapping) else {}
        chosen = self._choose(args)
        if isinstance(chosen, types.CallToolResult):
            return self._decorated(chosen, args, None, chosen_reason(chosen))
        operation, reason = chosen
        mapped = operation.arguments_for(args)
        problems = operation.problems(mapped)
        if problems:
            message = f"Invalid arguments for operation {operation.slug!r}:\n" + "\n".join(
                f"- {problem}" for problem in problems
            )
            return self._decorated(error_result(message), args, operation, reason)
        try:
            result = await ctx.call(operation.target.name, mapped)
        except Exception as error:  # noqa: BLE001 - the agent gets an error result, never a crash
            result = error_result(f"calling {operation.target.name} failed: {error or type(error).__name__}")
        return self._decorated(result, args, operation, reason)

    def choose(self, arguments: Mapping[str, Any]) -> tuple[str, str] | None:
        """(slug, reason) the router would pick for these arguments, None when it would refuse."""
        chosen = self._choose(arguments)
        if isinstance(chosen, types.CallToolResult):
            return None
        return chosen[0].slug, chosen[1]

    def _choose(self, args: Mapping[str, Any]) -> tuple[Operation, str] | types.CallToolResult:
        if self.agent_driven:
            return self._agent_choice(args)
        for rule in self.rules:
            reason = rule.condition.match(args)
            if reason is not None:
                return rule.operation, reason
        if self.default is not None:
            return self.default, REASON_DEFAULT
        return self._no_match()

    def _agent_choice(self, args: Mapping[str, Any]) -> tuple[Operation, str] | types.CallToolResult:
        slug = args.get(SELECTOR_PARAM)
        operation = self.operations.get(slug) if isinstance(slug, str) else None
        if operation is not None:
            return operation, REASON_AGENT
        valid = ", ".join(self.operations)
        if slug is None:
            message = f"Missing required parameter 'operation': choose one of: {valid}."
            reason = "no operation given"
        else:
            message = f"Unknown operation {slug!r}: choose one of: {valid}."
            reason = "unknown operation"
        return error_result(message, meta=_meta(None, reason))

    def _no_match(self) -> types.CallToolResult:
        tried = "\n".join(
            f"{index}. {rule.condition.description} → {rule.operation.slug}"
            for index, rule in enumerate(self.rules, start=1)
        )
        message = (
            f"No routing rule of {self.name!r} matched these arguments and no default operation is configured, "
            "so nothing was called. Rules tried, in order:\n" + (tried or "(none)")
        )
        return error_result(message, meta=_meta(None, "no rule matched"))

    def _decorated(
        self,
        result: types.CallToolResult,
        args: Mapping[str, Any],
        operation: Operation | None,
        reason: str,
    ) -> types.CallToolResult:
        meta = dict(result.meta or {})
        meta[META_KEY] = _meta(operation, reason)
        template = self.error_template if result.is_error else self.success_template
        content = list(result.content)
        if template is not None:
            content.insert(0, text(self._render(template, result, args, operation, reason)))
        return result.model_copy(update={"meta": meta, "content": content})

    def _render(
        self,
        template: CompiledTemplate,
        result: types.CallToolResult,
        args: Mapping[str, Any],
        operation: Operation | None,
        reason: str,
    ) -> str:
        try:
            return template.render_text(template_context(result, args, operation, reason))
        except TemplateError as error:
            which = "error_template" if result.is_error else "success_template"
            return f"[{self.name}: {which} could not be rendered: {error}]"


def chosen_reason(result: types.CallToolResult) -> str:
    found = (result.meta or {}).get(META_KEY) or {}
    return str(found.get("reason") or "")


def _meta(operation: Operation | None, reason: str) -> dict[str, Any]:
    return {
        "kind": KIND,
        "operation": operation.slug if operation else None,
        "tool": operation.target.name if operation else None,
        "reason": reason,
    }


def template_context(
    result: types.CallToolResult, args: Mapping[str, Any], operation: Operation | None, reason: str
) -> dict[str, Any]:
    """What success/error templates see (see the module docstring)."""
    structured = result.structured_content
    body = joined_text(result)
    context: dict[str, Any] = dict(structured) if isinstance(structured, Mapping) else {}
    context.update(args)
    context.update(
        params=dict(args),
        arguments=dict(args),
        data=structured,
        structured=structured,
        text=body,
        content_preview=body[:PREVIEW_CHARS],
        error_message=body if result.is_error else "",
        is_error=result.is_error,
        operation=operation.slug if operation else None,
        operation_name=operation.label if operation else None,
        tool=operation.target.name if operation else None,
        reason=reason,
    )
    return context


# -- building ------------------------------------------------------------------------


def build_router(defn: RouterDef, resolver: ToolResolver) -> RouterComposite:
    """Build a router against the catalog; raise BuildError listing every problem."""
    static = defn.static_issues()
    try:
        targets = resolve_targets(
            [(f"operations[{i}].tool", op.tool) for i, op in enumerate(defn.operations)], resolver
        )
    except BuildError as error:  # report unknown tools together with the definition's own problems
        raise BuildError([*static, *error.issues]) from None
    agent_driven = defn.routing == "agent_driven"
    selector = SELECTOR_PARAM if agent_driven else None
    issues: list[tuple[str, str]] = list(static)  # and every other problem, so one fix round is enough
    inputs = []
    for index, (op, target) in enumerate(zip(defn.operations, targets, strict=True)):
        issues.extend(_reference_issues(index, op, target, selector))
        schema = target.tool.input_schema
        exposed = exposed_parameters(schema, op.parameter_mapping, op.arguments, selector=selector)
        inputs.append(OperationInput(op.slug, f"operations[{index}]", schema, exposed))
    unified = unify(
        inputs,
        required_strategy=defn.required_strategy,
        agent_driven=agent_driven,
        explicit=defn.input_schema,
    )
    issues.extend(unified.problems)
    issues.extend(_rule_field_issues(defn, unified.schema))
    try:
        annotations = composite_annotations(targets, defn.annotations, defn.title)
    except BuildError as error:
        issues.extend(error.issues)
        annotations = None
    if issues:
        raise BuildError(issues)
    return _assemble(defn, targets, inputs, unified, annotations)


def _assemble(
    defn: RouterDef,
    targets: Sequence[ResolvedTool],
    inputs: Sequence[OperationInput],
    unified: UnifiedSchema,
    annotations: types.ToolAnnotations | None,
) -> RouterComposite:
    operations = {
        op.slug: _operation(op, target, spec.exposed)
        for op, target, spec in zip(defn.operations, targets, inputs, strict=True)
    }
    ordered = sorted(enumerate(defn.rules), key=lambda item: (item[1].priority, item[0]))
    rules = tuple(
        Rule(compile_condition(rule.condition), operations[rule.operation], rule.priority)
        for _i, rule in ordered
    )
    tool = types.Tool(
        name=defn.name,
        title=defn.title,
        description=_description(defn, targets, unified),
        input_schema=unified.schema,
        output_schema=_shared_output_schema(targets),
        annotations=annotations,
        _meta=dict(defn.meta) or None,
    )
    return RouterComposite(
        name=defn.name,
        tool=tool,
        references=frozenset(target.name for target in targets),
        operations=operations,
        rules=rules,
        default=operations.get(defn.default_operation) if defn.default_operation else None,
        agent_driven=defn.routing == "agent_driven",
        success_template=compile_template(defn.success_template) if defn.success_template else None,
        error_template=compile_template(defn.error_template) if defn.error_template else None,
    )


def _operation(op: RouterOperation, target: ResolvedTool, exposed: Sequence[tuple[str, str]]) -> Operation:
    mapping = tuple(op.parameter_mapping.items())
    mapped_targets = {target_param for _unified, target_param in mapping}
    passthrough = frozenset(
        target_param
        for unified, target_param in exposed
        if unified == target_param and target_param not in mapped_targets
    )
    unified_names = {target_param: unified for unified, target_param in exposed}
    return Operation(
        slug=op.slug,
        label=op.label,
        target=target,
        mapping=mapping,
        passthrough=passthrough,
        fixed=dict(op.arguments),
        unified_names=unified_names,
        validator=(validator := make_validator(target.tool.input_schema)),
        secrets=secret_names(target.tool.input_schema),
        accepts=fast_check(target.tool.input_schema) if validator is not None else None,
    )


def _reference_issues(
    index: int, op: RouterOperation, target: ResolvedTool, selector: str | None
) -> list[tuple[str, str]]:
    """Mapped / fixed parameters the operation's tool does not have, and an unreachable required one."""
    schema = target.tool.input_schema
    listed = properties_of(schema)
    names = ", ".join(listed) or "none"
    issues: list[tuple[str, str]] = []
    if not accepts_unlisted(schema):
        for unified, param in op.parameter_mapping.items():
            if param not in listed:
                issues.append(
                    (
                        f"operations[{index}].parameter_mapping.{unified}",
                        f"{target.name} has no parameter {param!r} (its parameters: {names})",
                    )
                )
        for key in op.arguments:
            if key not in listed:
                issues.append(
                    (
                        f"operations[{index}].arguments.{key}",
                        f"{target.name} has no parameter {key!r} (its parameters: {names})",
                    )
                )
    reachable = set(op.parameter_mapping.values()) | set(op.arguments)
    if selector is not None and selector in required_of(schema) and selector not in reachable:
        issues.append(
            (
                f"operations[{index}]",
                f"{target.name} requires its own {selector!r} parameter, which the agent_driven selector hides; "
                f"map it from another unified name in parameter_mapping (or fix it in arguments)",
            )
        )
    return issues


def _rule_field_issues(defn: RouterDef, schema: Mapping[str, Any]) -> list[tuple[str, str]]:
    """Rules reading a parameter the unified schema does not have could never match: report them."""
    listed = properties_of(schema)
    if not listed or accepts_unlisted(schema):
        return []
    issues = []
    for index, rule in enumerate(defn.rules):
        for path, node in rule.condition.walk(f"rules[{index}].condition"):
            if node.field is None:
                continue
            top = node.field.split(".", 1)[0]
            if node.field not in listed and top not in listed:
                issues.append(
                    (
                        f"{path}.field",
                        f"{top!r} is not a parameter of the unified input schema ({', '.join(listed)})",
                    )
                )
    return issues


def _description(defn: RouterDef, targets: Sequence[ResolvedTool], unified: UnifiedSchema) -> str:
    parts = [
        PartDoc(
            label=op.slug,
            title=op.display_name,
            description=op.description or target.tool.description or "",
            note="used when no rule matches" if op.slug == defn.default_operation else None,
        )
        for op, target in zip(defn.operations, targets, strict=True)
    ]
    return describe_router(
        defn.description,
        name=defn.name,
        agent_driven=defn.routing == "agent_driven",
        input_schema=unified.schema,
        operations=parts,
        usage=unified.usage,
        output_fields=output_fields([target.tool.output_schema for target in targets]),
    )


def _shared_output_schema(targets: Sequence[ResolvedTool]) -> dict[str, Any] | None:
    """The operations' output schema when they all declare the same one (the result is theirs)."""
    schemas = [target.tool.output_schema for target in targets]
    first = schemas[0] if schemas else None
    if first is None or any(schema != first for schema in schemas):
        return None
    return dict(first)
