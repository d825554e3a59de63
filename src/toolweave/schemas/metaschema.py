"""The JSON Schema 2020-12 metaschema as a table, checked in one linear walk.

jsonschema's `check_schema` evaluates the metaschema itself (dynamic references, a resolver per
subschema): ~0.3 ms per property, 8 s for a legal 20,000-property schema, on the event loop. The
metaschema only says what kind of value each keyword takes, so this module walks a schema once
and checks each keyword against that table. It answers "no problem" only where the metaschema
would, and otherwise names the first keyword it doubts, which `schemas` hands to jsonschema
for the verdict and the message. Format checks follow jsonschema's as installed: `regex` (Python's
`re`); `uri`/`uri-reference` are not checked.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Final

Path = list[str | int]

_SIMPLE_TYPES: Final = frozenset({"array", "boolean", "integer", "null", "number", "object", "string"})
_ANCHOR: Final = re.compile(r"^[A-Za-z_][-A-Za-z0-9._]*$")
_ID: Final = re.compile(r"^[^#]*#?$")


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _non_negative_integer(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    if isinstance(value, float):
        return value.is_integer() and value >= 0
    return isinstance(value, int) and value >= 0


def _string_array(value: Any) -> bool:
    return (
        isinstance(value, list)
        and all(isinstance(item, str) for item in value)
        and len(set(value)) == len(value)
    )


def _type(value: Any) -> bool:
    if isinstance(value, str):
        return value in _SIMPLE_TYPES
    return (
        isinstance(value, list)
        and bool(value)
        and all(isinstance(item, str) and item in _SIMPLE_TYPES for item in value)
        and len(set(value)) == len(value)
    )


def _regex(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        re.compile(value)
    except (re.error, RecursionError, OverflowError):
        return False
    return True


def _vocabulary(value: Any) -> bool:
    return isinstance(value, dict) and all(isinstance(flag, bool) for flag in value.values())


def _string(value: Any) -> bool:
    return isinstance(value, str)


_VALUES: Final[dict[str, Callable[[Any], bool]]] = {
    "$id": lambda v: isinstance(v, str) and _ID.match(v) is not None,
    "$schema": _string,
    "$ref": _string,
    "$anchor": lambda v: isinstance(v, str) and _ANCHOR.match(v) is not None,
    "$dynamicRef": _string,
    "$dynamicAnchor": lambda v: isinstance(v, str) and _ANCHOR.match(v) is not None,
    "$recursiveRef": _string,
    "$recursiveAnchor": lambda v: isinstance(v, str) and _ANCHOR.match(v) is not None,
    "$vocabulary": _vocabulary,
    "$comment": _string,
    "type": _type,
    "enum": lambda v: isinstance(v, list),
    "multipleOf": lambda v: _number(v) and v > 0,
    "maximum": _number,
    "exclusiveMaximum": _number,
    "minimum": _number,
    "exclusiveMinimum": _number,
    "maxLength": _non_negative_integer,
    "minLength": _non_negative_integer,
    "pattern": _regex,
    "maxItems": _non_negative_integer,
    "minItems": _non_negative_integer,
    "uniqueItems": lambda v: isinstance(v, bool),
    "maxContains": _non_negative_integer,
    "minContains": _non_negative_integer,
    "maxProperties": _non_negative_integer,
    "minProperties": _non_negative_integer,
    "required": _string_array,
    "dependentRequired": lambda v: isinstance(v, dict) and all(_string_array(x) for x in v.values()),
    "title": _string,
    "description": _string,
    "deprecated": lambda v: isinstance(v, bool),
    "readOnly": lambda v: isinstance(v, bool),
    "writeOnly": lambda v: isinstance(v, bool),
    "examples": lambda v: isinstance(v, list),
    "format": _string,
    "contentEncoding": _string,
    "contentMediaType": _string,
}
"""Keywords whose value is data of a kind (`const` and `default` take anything)."""

_SCHEMA: Final = frozenset(
    {
        "items",
        "contains",
        "additionalProperties",
        "propertyNames",
        "if",
        "then",
        "else",
        "not",
        "unevaluatedItems",
        "unevaluatedProperties",
        "contentSchema",
    }
)
_SCHEMA_LIST: Final = frozenset({"prefixItems", "allOf", "anyOf", "oneOf"})
_SCHEMA_MAP: Final = frozenset({"$defs", "definitions", "properties", "dependentSchemas"})


Problem = tuple[Path, str, Any]
"""(path of a subschema, a keyword of it, the smallest value of that keyword showing the problem)."""


def first_problem(schema: Any) -> Problem | None:
    """A keyword the 2020-12 metaschema may refuse; None: it accepts `schema`.

    The value is cut to what shows the problem (a map of subschemas to the one entry, a list to
    the entries up to the one, earlier ones `true`), so checking it again costs little.
    """
    if not isinstance(schema, dict | bool):
        return [], "", schema
    stack: list[tuple[Any, Path]] = [(schema, [])]
    while stack:
        node, path = stack.pop()
        if isinstance(node, bool):
            continue
        for keyword, value in node.items():
            problem = _keyword_problem(keyword, value, path, stack)
            if problem is not None:
                return path, keyword, problem[0]
    return None


def _keyword_problem(
    keyword: str, value: Any, path: Path, stack: list[tuple[Any, Path]]
) -> tuple[Any] | None:
    """(the part of `value` the metaschema may refuse,), or None after queueing its subschemas."""
    if keyword in _SCHEMA:
        if not isinstance(value, dict | bool):
            return (value,)
        stack.append((value, [*path, keyword]))
    elif keyword in _SCHEMA_LIST:
        if not isinstance(value, list) or not value:
            return (value,)
        for index, sub in enumerate(value):
            if not isinstance(sub, dict | bool):
                return ([*([True] * index), sub],)
            stack.append((sub, [*path, keyword, index]))
    elif keyword in _SCHEMA_MAP or keyword in ("patternProperties", "dependencies"):
        return _map_problem(keyword, value, path, stack)
    else:
        check = _VALUES.get(keyword)
        if check is not None and not check(value):
            return (value,)
    return None


def _map_problem(keyword: str, value: Any, path: Path, stack: list[tuple[Any, Path]]) -> tuple[Any] | None:
    if not isinstance(value, dict):
        return (value,)
    for name, sub in value.items():
        if keyword == "patternProperties" and not _regex(name):
            return ({name: True},)
        if keyword == "dependencies" and isinstance(sub, list):
            if not _string_array(sub):
                return ({name: sub},)
            continue
        if not isinstance(sub, dict | bool):
            return ({name: sub},)
        stack.append((sub, [*path, keyword, name]))
    return None
