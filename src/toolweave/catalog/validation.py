"""Argument validation against a tool's `inputSchema`, with validators compiled once per tool.

Invalid arguments never reach a backend, and the error names the field
(never its value when the schema marks it secret).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jsonschema
from jsonschema.exceptions import ValidationError
from jsonschema.validators import validator_for


class ArgumentValidator:
    __slots__ = ("_secret_fields", "_validator")

    def __init__(self, schema: Mapping[str, Any] | None) -> None:
        schema = dict(schema or {"type": "object"})
        cls = validator_for(schema, default=jsonschema.Draft202012Validator)
        try:
            cls.check_schema(schema)
            self._validator: Any = cls(schema)
        except jsonschema.SchemaError:
            self._validator = None  # a backend's broken schema must not make its tool uncallable
        self._secret_fields = secret_fields(schema)

    def problems(self, arguments: Any) -> list[str]:
        """Every problem with the arguments, each naming its field; empty when valid."""
        if self._validator is None or self._validator.is_valid(arguments):
            return []
        errors = sorted(self._validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
        return [describe_error(error, self._secret_fields) for error in errors]


def describe_error(error: ValidationError, secrets: frozenset[str] = frozenset()) -> str:
    path = ".".join(str(p) for p in error.absolute_path)
    if error.validator == "required":
        missing = error.message.split("'")[1] if "'" in error.message else error.message
        where = f"{path}." if path else ""
        return f"missing required argument '{where}{missing}'"
    if error.validator == "additionalProperties":
        return f"unexpected argument(s) at '{path or '(root)'}': {error.message.split('(')[-1].rstrip(')')}"
    field = path or "(arguments)"
    top = str(error.absolute_path[0]) if error.absolute_path else ""
    if top in secrets:
        return f"argument '{field}' is invalid ({error.validator} {error.validator_value!r} failed)"
    return f"argument '{field}': {error.message}"


def secret_fields(schema: Mapping[str, Any] | None) -> frozenset[str]:
    """Top-level properties marked `writeOnly` or `format: password` (their values are never shown)."""
    properties = (schema or {}).get("properties") or {}
    return frozenset(
        name
        for name, prop in properties.items()
        if isinstance(prop, Mapping) and (prop.get("writeOnly") is True or prop.get("format") == "password")
    )


def redact(arguments: Mapping[str, Any], secrets: frozenset[str]) -> dict[str, Any]:
    if not secrets:
        return dict(arguments)
    return {key: ("[redacted]" if key in secrets else value) for key, value in arguments.items()}
