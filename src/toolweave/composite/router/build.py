"""Building a router against the catalog: references resolved, conditions compiled, rules
sorted, the unified schema merged, each operation's validator created, templates compiled;
every problem reported at once."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import mcp_types as types

from toolweave.composite.annotations import composite_annotations
from toolweave.composite.base import ResolvedTool, ToolResolver
from toolweave.composite.errors import BuildError
from toolweave.composite.router.conditions import compile_condition
from toolweave.composite.router.config import SELECTOR_PARAM, RouterDef, RouterOperation
from toolweave.composite.router.run import Operation, RouterComposite, Rule
from toolweave.composite.router.schema import OperationInput, UnifiedSchema, exposed_parameters, unify
from toolweave.composite.targets import resolve_targets
from toolweave.export.describe import PartDoc, describe_router, output_fields
from toolweave.problems import Problem, as_problems
from toolweave.schemas.fast import fast_check
from toolweave.schemas.read import accepts_unlisted, properties_of, required_of
from toolweave.schemas.validate import compile_validator
from toolweave.secrets import secret_fields
from toolweave.templates import compile_template

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
    issues: list[Problem] = list(static)  # and every other problem, so one fix round is enough
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
    issues.extend(as_problems(unified.problems))
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
        validator=(validator := compile_validator(target.tool.input_schema)),
        secrets=secret_fields(target.tool.input_schema),
        accepts=fast_check(target.tool.input_schema) if validator is not None else None,
    )


def _reference_issues(
    index: int, op: RouterOperation, target: ResolvedTool, selector: str | None
) -> list[Problem]:
    """Mapped / fixed parameters the operation's tool does not have, and an unreachable required one."""
    schema = target.tool.input_schema
    listed = properties_of(schema)
    names = ", ".join(listed) or "none"
    issues: list[Problem] = []
    if not accepts_unlisted(schema):
        for unified, param in op.parameter_mapping.items():
            if param not in listed:
                issues.append(
                    Problem(
                        f"operations[{index}].parameter_mapping.{unified}",
                        f"{target.name} has no parameter {param!r} (its parameters: {names})",
                    )
                )
        for key in op.arguments:
            if key not in listed:
                issues.append(
                    Problem(
                        f"operations[{index}].arguments.{key}",
                        f"{target.name} has no parameter {key!r} (its parameters: {names})",
                    )
                )
    reachable = set(op.parameter_mapping.values()) | set(op.arguments)
    if selector is not None and selector in required_of(schema) and selector not in reachable:
        issues.append(
            Problem(
                f"operations[{index}]",
                f"{target.name} requires its own {selector!r} parameter, which the agent_driven selector hides; "
                f"map it from another unified name in parameter_mapping (or fix it in arguments)",
            )
        )
    return issues


def _rule_field_issues(defn: RouterDef, schema: Mapping[str, Any]) -> list[Problem]:
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
                    Problem(
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
