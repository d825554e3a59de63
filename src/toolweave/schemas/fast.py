"""The validation fast path: a plain schema compiled into a small predicate.

`jsonschema`'s `is_valid` costs tens of microseconds per call even for a two-field schema. Most
tool schemas are plain (typed properties, `required`, `additionalProperties`, `items`, `anyOf` of
those), so each is also compiled here into a predicate that says "valid" only when jsonschema
would; anything it does not understand, and every failure, goes to jsonschema for the verdict and
the messages (`toolweave.schemas.validate.ArgumentValidator`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

Check = Callable[[Any], bool]

_ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "deprecated",
        "readOnly",
        "writeOnly",
        "$comment",
        "$schema",
        "$id",
        "$defs",
        "definitions",
        "format",  # an annotation: no format checker is configured
        "contentMediaType",
        "contentEncoding",
    }
)


def _is_integer(value: Any) -> bool:
    if isinstance(value, bool):
        return False
    return isinstance(value, int) or (isinstance(value, float) and value.is_integer())


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


_TYPES: dict[str, Check] = {
    "string": lambda value: isinstance(value, str),
    "integer": _is_integer,
    "number": _is_number,
    "boolean": lambda value: isinstance(value, bool),
    "object": lambda value: isinstance(value, dict),
    "array": lambda value: isinstance(value, list),
    "null": lambda value: value is None,
}


def fast_check(schema: Any) -> Check | None:
    """A predicate that is True only for instances `jsonschema` (2020-12) accepts; None if the schema
    uses anything beyond typed properties, `required`, `additionalProperties`, `items` and `anyOf`.

    False means "not sure": the caller asks jsonschema.
    """
    if schema is True or schema == {}:
        return lambda _value: True
    if not isinstance(schema, Mapping):
        return None
    checks: list[Check] = []
    object_checks: list[Check] = []
    for key, value in schema.items():
        if key in _ANNOTATIONS or key.startswith("x-"):
            continue
        if key == "type":
            names = [value] if isinstance(value, str) else value
            if not isinstance(names, list) or not names or any(name not in _TYPES for name in names):
                return None
            tests = [_TYPES[name] for name in names]
            checks.append(tests[0] if len(tests) == 1 else _any_of(tests))
        elif key == "properties":
            if not isinstance(value, Mapping):
                return None
            compiled: dict[str, Check] = {}
            for name, sub in value.items():
                check = fast_check(sub)
                if check is None:
                    return None
                compiled[name] = check
            object_checks.append(_properties(compiled))
        elif key == "required":
            if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
                return None
            required = tuple(value)
            object_checks.append(_required(required))
        elif key == "additionalProperties":
            if value is True or value == {}:
                continue
            if value is not False:
                return None
            known = frozenset(schema.get("properties") or ())
            if schema.get("patternProperties"):
                return None
            object_checks.append(_only(known))
        elif key == "items":
            check = fast_check(value)
            if check is None:
                return None
            checks.append(_each_item(check))
        elif key == "anyOf":
            if not isinstance(value, list) or not value:
                return None
            options = [option for option in map(fast_check, value) if option is not None]
            if len(options) != len(value):
                return None
            checks.append(_any_of(options))
        else:
            return None
    if object_checks:
        checks.append(lambda v: not isinstance(v, dict) or all(check(v) for check in object_checks))
    if not checks:
        return lambda _value: True
    if len(checks) == 1:
        return checks[0]
    return lambda v: all(check(v) for check in checks)


def _any_of(checks: list[Check]) -> Check:
    return lambda v: any(check(v) for check in checks)


def _properties(compiled: dict[str, Check]) -> Check:
    return lambda v: all(check(v[name]) for name, check in compiled.items() if name in v)


def _required(names: tuple[str, ...]) -> Check:
    return lambda v: all(name in v for name in names)


def _only(known: frozenset[str]) -> Check:
    return lambda v: all(name in known for name in v)


def _each_item(check: Check) -> Check:
    return lambda v: not isinstance(v, list) or all(check(item) for item in v)
