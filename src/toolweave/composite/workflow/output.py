"""The typed output of a workflow: built from templates, advertised as the tool's outputSchema.

Follows ToolHive's output constructor: each property renders its `value`
template and is shaped to its declared type (text parsed as JSON for objects
and arrays, coerced for scalars); when rendering or shaping fails, or the
value is null, the property's `default` is used; a `required` property that
ends up missing or null fails the workflow. Unlike ToolHive, a `value` that is
exactly one `{{ expr }}` keeps the expression's native type, so most values
need no parsing at all.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from toolweave.composite.errors import OutputError
from toolweave.composite.workflow.config import OutputDef, OutputPropertyDef
from toolweave.schemas.coerce import CoercionError, coerce
from toolweave.templates import TemplateError, ValueTemplate, compile_value, copy_json


@dataclass(frozen=True, slots=True)
class PropertyPlan:
    path: str
    type: str
    value: ValueTemplate | None
    children: tuple[tuple[str, PropertyPlan], ...]
    required: tuple[str, ...]
    has_default: bool
    default: Any

    def build(self, context: Mapping[str, Any]) -> Any:
        if self.value is None:
            return _build_object(self.children, self.required, context, self.path)
        try:
            value = _shape(self.value.render(context), self.type)
        except (TemplateError, OutputError) as error:
            if self.has_default:
                return self.fallback()
            raise OutputError(f"{self.path}: {error}") from None
        if value is None and self.has_default:
            return self.fallback()
        return value

    def fallback(self) -> Any:
        try:
            return _shape(copy_json(self.default), self.type)
        except (TemplateError, OutputError) as error:
            raise OutputError(f"{self.path}: the default does not fit: {error}") from None


class OutputPlan:
    """A compiled `output` section: `build(context)` gives the structured result, `schema` the outputSchema."""

    __slots__ = ("properties", "required", "schema")

    def __init__(self, definition: OutputDef) -> None:
        self.properties = tuple(
            (name, _plan(prop, f"output.{name}")) for name, prop in definition.properties.items()
        )
        self.required = tuple(definition.required)
        self.schema = output_schema(definition)

    def build(self, context: Mapping[str, Any]) -> dict[str, Any]:
        return _build_object(self.properties, self.required, context, "output")


def _plan(prop: OutputPropertyDef, path: str) -> PropertyPlan:
    children = tuple(
        (name, _plan(child, f"{path}.{name}")) for name, child in (prop.properties or {}).items()
    )
    value = compile_value(prop.value) if prop.has_value else None
    return PropertyPlan(
        path=path,
        type=prop.type,
        value=value,
        children=children,
        required=tuple(prop.required),
        has_default=prop.has_default,
        default=prop.default,
    )


def _build_object(
    children: tuple[tuple[str, PropertyPlan], ...],
    required: tuple[str, ...],
    context: Mapping[str, Any],
    path: str,
) -> dict[str, Any]:
    result = {name: plan.build(context) for name, plan in children}
    for name in required:
        if result.get(name) is None:
            raise OutputError(f"{path}.{name} is required but has no value")
    return result


def _shape(value: Any, kind: str) -> Any:
    """Make a rendered value fit a JSON Schema type, or raise OutputError."""
    if value is None:
        return None
    if kind == "string":
        return _as_string(value)
    if isinstance(value, str):
        try:
            return coerce(value, {"type": kind})
        except CoercionError as error:
            raise OutputError(str(error)) from None
    shaped = _SHAPERS[kind](value) if kind in _SHAPERS else _NO_FIT
    if shaped is _NO_FIT:
        raise OutputError(f"expected {kind}, got {_type_name(value)}")
    return shaped


_NO_FIT = object()


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


_SHAPERS: dict[str, Callable[[Any], object]] = {
    "integer": lambda value: int(value) if _is_number(value) and float(value).is_integer() else _NO_FIT,
    "number": lambda value: value if _is_number(value) else _NO_FIT,
    "boolean": lambda value: bool(value) if isinstance(value, bool) or value in (0, 1) else _NO_FIT,
    "object": lambda value: value if isinstance(value, dict) else _NO_FIT,
    "array": lambda value: value if isinstance(value, list) else _NO_FIT,
}


def _as_string(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    return str(value)


def _type_name(value: Any) -> str:
    names = {dict: "object", list: "array", str: "string", bool: "boolean", int: "integer", float: "number"}
    return names.get(type(value), type(value).__name__)


def output_schema(definition: OutputDef) -> dict[str, Any]:
    """The JSON Schema advertised as the tool's `outputSchema`."""
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {name: _property_schema(prop) for name, prop in definition.properties.items()},
    }
    if definition.description:
        schema["description"] = definition.description
    if definition.required:
        schema["required"] = list(definition.required)
    return schema


def _property_schema(prop: OutputPropertyDef) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": prop.type}
    if prop.description:
        schema["description"] = prop.description
    if prop.properties:
        schema["properties"] = {name: _property_schema(child) for name, child in prop.properties.items()}
    if prop.required:
        schema["required"] = list(prop.required)
    if prop.items is not None:
        schema["items"] = prop.items
    if prop.has_default:
        with contextlib.suppress(TemplateError, OutputError):
            schema["default"] = _shape(copy_json(prop.default), prop.type)
    return schema
