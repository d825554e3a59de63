"""Building a fan-out against the catalog: targets resolved, templates compiled, the listed
input schema merged from the targets (checked once per catalog snapshot).

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
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

import mcp_types as types
from jinja2 import nodes

from toolweave.composite.annotations import composite_annotations
from toolweave.composite.base import ResolvedTool, ToolResolver
from toolweave.composite.errors import BuildError
from toolweave.composite.fanout.config import FanoutDef, FanoutTarget
from toolweave.composite.fanout.run import OUTPUT_SCHEMA, FanoutComposite, Target
from toolweave.composite.targets import resolve_targets
from toolweave.export.describe import ParamUsage, PartDoc, describe_fanout
from toolweave.problems import Problem, as_problems
from toolweave.schemas.check import input_schema_problem
from toolweave.schemas.read import (
    merge_definitions,
    properties_of,
    renamed_property,
    required_of,
    type_names,
    type_value,
)
from toolweave.templates import (
    check_syntax,
    compile_template,
    compile_value,
    copy_json,
    iter_template_strings,
    template_names,
    template_paths,
)

_PARAMS_NAMES: Final = frozenset({"params", "arguments"})
_FORWARD_RE: Final = re.compile(
    r"^\s*\{\{-?\s*(?:(?:params|arguments)\.)?([A-Za-z_][A-Za-z0-9_]*)\s*-?\}\}\s*$"
)
_GUARD_FILTERS: Final = frozenset({"default", "d"})
_GUARD_TESTS: Final = frozenset({"defined", "undefined", "none"})


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
    issues.extend(as_problems(schema_issues))
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


def _template_issues(path: str, spec: FanoutTarget) -> list[Problem]:
    if spec.arguments is None:
        return []
    issues = []
    for sub, source in iter_template_strings(spec.arguments):
        problem = check_syntax(source)
        if problem:
            issues.append(Problem(f"{path}.arguments.{sub}", problem))
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
    tree = compile_template(source).tree
    if tree is not None:
        _visit_unguarded(tree, False, found)
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
