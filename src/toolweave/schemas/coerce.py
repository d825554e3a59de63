"""Coercion: rendered template text turned into the type a tool's schema asks for.

A template that is exactly one `{{ expr }}` keeps its native value; any other renders to text, and
a tool that asks for an integer should get `4`, not `"4"`. `coerce` walks the value beside the
schema (into `properties` and `items`) and converts only strings the schema types otherwise.
Messages never quote the value (it may be secret).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from toolweave.schemas.read import type_names
from toolweave.templates import TemplateError


class CoercionError(TemplateError):
    """Rendered text cannot be turned into the type a schema asks for (a template error: the
    template rendered the wrong thing)."""


_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})
_INT_RE = re.compile(r"^[+-]?\d+$")


def coerce(value: Any, schema: Any) -> Any:
    """Turn rendered text into the type `schema` asks for; walks into objects and arrays.

    Strings are left alone when the schema allows a string or says nothing;
    non-strings are left alone (native values are already typed). Raises
    CoercionError with a message that never quotes the value.
    """
    if isinstance(value, str):
        return _coerce_text(value, tuple(type_names(schema) or ()))
    if isinstance(value, dict) and isinstance(schema, Mapping):
        properties = schema.get("properties")
        if isinstance(properties, Mapping) and any(key in properties for key in value):
            return {key: _coerce_field(key, item, properties.get(key)) for key, item in value.items()}
        return value
    if isinstance(value, list) and isinstance(schema, Mapping) and isinstance(schema.get("items"), Mapping):
        items = schema["items"]
        return [coerce(item, items) for item in value]
    return value


def _coerce_field(key: str, value: Any, schema: Any) -> Any:
    if schema is None:
        return value
    try:
        return coerce(value, schema)
    except CoercionError as error:
        raise CoercionError(f"{key}: {error}") from None


def _coerce_text(text: str, types: tuple[str, ...]) -> Any:
    if not types or "string" in types:
        return text
    stripped = text.strip()
    for kind in types:
        converted = _convert(stripped, kind)
        if converted is not _NO:
            return converted
    expected = " or ".join(types)
    raise CoercionError(f"expected {expected}, but the template rendered text that is not one")


_NO = object()


def _convert(text: str, kind: str) -> Any:
    if kind == "integer":
        if _INT_RE.match(text):
            return int(text)
        number = _float(text)
        return int(number) if isinstance(number, float) and number.is_integer() else _NO
    if kind == "number":
        if _INT_RE.match(text):
            return int(text)
        number = _float(text)
        return _NO if number is None else number
    if kind == "boolean":
        lowered = text.lower()
        return True if lowered in _TRUE else False if lowered in _FALSE else _NO
    if kind == "null":
        return None if text in ("", "null", "None") else _NO
    if kind in ("object", "array"):
        try:
            parsed = json.loads(text)
        except ValueError:
            return _NO
        wanted = dict if kind == "object" else list
        return parsed if isinstance(parsed, wanted) else _NO
    return _NO


def _float(text: str) -> float | None:
    try:
        number = float(text)
    except ValueError:
        return None
    return number if number == number and number not in (float("inf"), float("-inf")) else None
