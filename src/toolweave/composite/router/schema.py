"""The unified input schema of a router (docs/composites.md).

Each operation contributes its own parameters under their unified names
(`parameter_mapping` renames; unmapped parameters keep their name; fixed
`arguments` are hidden). A unified parameter fed by several operations is
merged:

- `type`: the union of the operations' types (only one operation runs per
  call, so a value valid for any of them is acceptable); a property without a
  type accepts anything, and so does the union.
- `enum`: the union of the enums, in first-seen order; dropped when one of the
  operations accepts any value.
- `description`: the longest one.
- other keywords (`format`, `default`, `items`, ...): from the first operation
  declaring them, in operation order.
- `required`: per `required_strategy` — `all` (default): only when every
  operation requires it; `any`: when one does.

`agent_driven` routers get a required `operation` enum of the slugs, listed
first. An explicit `input_schema` is used as given (plus `operation` for
agent_driven routers when it lacks one).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from toolweave.composite.router.config import SELECTOR_PARAM
from toolweave.export.describe import ParamUsage
from toolweave.schemas.read import (
    merge_definitions,
    properties_of,
    renamed_property,
    required_of,
    type_names,
    type_value,
)
from toolweave.templates import copy_json

_MERGED_KEYS: Final = frozenset({"type", "enum", "description"})


@dataclass(frozen=True, slots=True)
class OperationInput:
    """What one operation contributes to the unified schema."""

    slug: str
    path: str
    """Where the operation sits in the definition (`operations[2]`), for problems."""
    schema: Mapping[str, Any]
    """The operation tool's own input schema."""
    exposed: tuple[tuple[str, str], ...]
    """(unified name, operation parameter) pairs, in the tool's parameter order."""


@dataclass(frozen=True, slots=True)
class UnifiedSchema:
    schema: dict[str, Any]
    usage: dict[str, ParamUsage]
    """Which operations use / require each unified parameter (for descriptions)."""
    problems: list[tuple[str, str]]


def exposed_parameters(
    schema: Mapping[str, Any],
    mapping: Mapping[str, str],
    fixed: Mapping[str, Any],
    *,
    selector: str | None,
) -> tuple[tuple[str, str], ...]:
    """(unified name, operation parameter) for every parameter the agent can reach.

    A mapped parameter appears under its unified name; an unmapped one under
    its own name unless that name is taken by a mapping source (it would be
    ambiguous) or is the agent's `operation` selector; fixed ones not at all.
    """
    by_target = {target: unified for unified, target in mapping.items()}
    pairs: list[tuple[str, str]] = []
    for name in properties_of(schema):
        if name in fixed:
            continue
        unified = by_target.get(name)
        if unified is None:
            if name in mapping or name == selector:
                continue
            unified = name
        pairs.append((unified, name))
    listed = {target for _unified, target in pairs}
    pairs.extend((unified, target) for unified, target in mapping.items() if target not in listed)
    return tuple(pairs)


def unify(
    operations: Sequence[OperationInput],
    *,
    required_strategy: Literal["any", "all"],
    agent_driven: bool,
    explicit: Mapping[str, Any] | None,
) -> UnifiedSchema:
    """Merge the operations' schemas (or take `explicit`) into the router's input schema."""
    usage = _usage(operations)
    if explicit is not None:
        schema = copy_json(dict(explicit))
        problems: list[tuple[str, str]] = []
    else:
        schema, problems = _merged(operations, usage, required_strategy)
    if agent_driven:
        _add_selector(schema, [op.slug for op in operations])
    return UnifiedSchema(schema, usage, problems)


def _usage(operations: Sequence[OperationInput]) -> dict[str, ParamUsage]:
    used: dict[str, list[str]] = {}
    required: dict[str, list[str]] = {}
    for op in operations:
        op_required = set(required_of(op.schema))
        for unified, target in op.exposed:
            used.setdefault(unified, []).append(op.slug)
            if target in op_required:
                required.setdefault(unified, []).append(op.slug)
    return {
        name: ParamUsage(tuple(dict.fromkeys(slugs)), tuple(dict.fromkeys(required.get(name, ()))))
        for name, slugs in used.items()
    }


def _merged(
    operations: Sequence[OperationInput], usage: Mapping[str, ParamUsage], strategy: Literal["any", "all"]
) -> tuple[dict[str, Any], list[tuple[str, str]]]:
    properties: dict[str, dict[str, Any]] = {}
    for op in operations:
        op_properties = properties_of(op.schema)
        for unified, target in op.exposed:
            prop = renamed_property(op_properties.get(target, {}), renamed=unified != target)
            if unified in properties:
                properties[unified] = merge_property(properties[unified], prop)
            else:
                properties[unified] = copy_json(dict(prop))
    schema: dict[str, Any] = {"type": "object", "properties": properties}
    required = [name for name in properties if _is_required(usage[name], len(operations), strategy)]
    if required:
        schema["required"] = required
    definitions, problems = merge_definitions([(f"{op.path}.tool", op.schema) for op in operations])
    schema.update(definitions)
    return schema, problems


def _is_required(usage: ParamUsage, operation_count: int, strategy: Literal["any", "all"]) -> bool:
    if strategy == "any":
        return bool(usage.required_by)
    return len(usage.required_by) == operation_count


def merge_property(first: Mapping[str, Any], second: Mapping[str, Any]) -> dict[str, Any]:
    """Unite two operations' schemas of one unified parameter (see the module docstring)."""
    merged: dict[str, Any] = copy_json(dict(first))
    for key, value in second.items():
        if key not in _MERGED_KEYS and key not in merged:
            merged[key] = copy_json(value)
    _unite_types(merged, first, second)
    _unite_enums(merged, first, second)
    second_text = second.get("description")
    if isinstance(second_text, str) and len(second_text) > len(str(merged.get("description") or "")):
        merged["description"] = second_text
    return merged


def _unite_types(merged: dict[str, Any], first: Mapping[str, Any], second: Mapping[str, Any]) -> None:
    first_types, second_types = type_names(first), type_names(second)
    if first_types is None or second_types is None:
        merged.pop("type", None)
        return
    merged["type"] = type_value(list(dict.fromkeys([*first_types, *second_types])))


def _unite_enums(merged: dict[str, Any], first: Mapping[str, Any], second: Mapping[str, Any]) -> None:
    first_enum, second_enum = first.get("enum"), second.get("enum")
    if not isinstance(first_enum, list) or not isinstance(second_enum, list):
        merged.pop("enum", None)
        return
    united = list(first_enum)
    united.extend(value for value in second_enum if value not in united)
    merged["enum"] = united


def _add_selector(schema: dict[str, Any], slugs: list[str]) -> None:
    """Put the required `operation` enum first, unless an explicit schema already defines it."""
    properties = schema.get("properties")
    properties = dict(properties) if isinstance(properties, Mapping) else {}
    if SELECTOR_PARAM not in properties:
        selector = {
            "type": "string",
            "enum": slugs,
            "description": "The operation to run; one of: " + ", ".join(slugs) + ".",
        }
        properties = {SELECTOR_PARAM: selector, **properties}
    schema["properties"] = properties
    required = [name for name in required_of(schema) if name != SELECTOR_PARAM]
    schema["required"] = [SELECTOR_PARAM, *required]
