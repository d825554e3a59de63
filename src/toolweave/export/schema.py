"""Copying a tool's JSON Schema into an export.

Three things happen on the way out, and only these:

* **Canonical keyword order.** Exports are diffed, cached and compared, so
  the same schema must serialise to the same text even when a backend sends
  its keywords in another order. Keywords of every (sub)schema are put in a
  fixed order; the order of `properties` is kept, because it is the order in
  which the tool's author lists the parameters (and the order models fill
  them in); definition maps (`$defs`) are sorted by name.
* **Secret values removed.** A property marked `writeOnly: true` or
  `format: password` holds a secret (docs/security.md). Its schema keeps the marker but
  loses `default`, `examples`, `example`, `const` and `enum`: any of them
  could be the secret itself, and no export may carry one.
* **An object root.** Every LLM format wants the parameters as an object
  schema; a missing schema becomes `{"type": "object", "properties": {}}`,
  a root without `type` gets `"object"` and an object root without
  `properties` gets an empty one (OpenAI rejects a function whose object
  schema has no `properties`, and LangChain reads `properties` directly).

Nothing else is changed: in particular no property is made required and no
`additionalProperties` is added — that would change what the tool accepts.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from toolweave.secrets import is_secret_schema

SECRET_VALUE_KEYWORDS: Final = frozenset({"default", "examples", "example", "const", "enum"})
"""Keywords dropped from a secret (`writeOnly` / `format: password`) schema."""

_KEYWORD_ORDER: Final = (
    "$schema",
    "$id",
    "$ref",
    "title",
    "description",
    "type",
    "format",
    "enum",
    "const",
    "default",
    "examples",
    "pattern",
    "minLength",
    "maxLength",
    "minimum",
    "exclusiveMinimum",
    "maximum",
    "exclusiveMaximum",
    "multipleOf",
    "properties",
    "required",
    "additionalProperties",
    "patternProperties",
    "items",
    "prefixItems",
    "minItems",
    "maxItems",
    "uniqueItems",
    "anyOf",
    "oneOf",
    "allOf",
    "not",
)
_RANK: Final = {keyword: index for index, keyword in enumerate(_KEYWORD_ORDER)}
_LAST: Final = ("$defs", "definitions")

_SUBSCHEMA: Final = frozenset(
    {
        "items",
        "additionalProperties",
        "additionalItems",
        "not",
        "if",
        "then",
        "else",
        "contains",
        "propertyNames",
        "unevaluatedItems",
        "unevaluatedProperties",
    }
)
"""Keywords whose value is one schema."""
_SUBSCHEMA_LIST: Final = frozenset({"anyOf", "allOf", "oneOf", "prefixItems", "items"})
"""Keywords whose value is a list of schemas (`items` in its old tuple form too)."""
_ORDERED_MAPS: Final = frozenset({"properties", "patternProperties", "dependentSchemas"})
"""Keywords mapping names to schemas whose order means something: kept."""
_SORTED_MAPS: Final = frozenset({"$defs", "definitions"})
"""Keywords mapping names to schemas whose order means nothing: sorted."""


def export_schema(schema: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """A canonical, secret-free deep copy of a schema (None stays None)."""
    if schema is None:
        return None
    return _schema(schema)


def parameters_schema(schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """`export_schema` of a tool's input schema, with an object root guaranteed."""
    root = dict(schema) if isinstance(schema, Mapping) else {}
    root.setdefault("type", "object")
    if root["type"] == "object":
        root.setdefault("properties", {})
    return _schema(root)


def _schema(schema: Mapping[str, Any]) -> dict[str, Any]:
    secret = is_secret_schema(schema)
    copied: dict[str, Any] = {}
    for keyword in sorted(schema, key=_keyword_key):
        if secret and keyword in SECRET_VALUE_KEYWORDS:
            continue
        copied[keyword] = _value(keyword, schema[keyword])
    return copied


def _keyword_key(keyword: str) -> tuple[int, int, str]:
    """Known keywords in `_KEYWORD_ORDER`, then unknown ones by name, definitions last."""
    if keyword in _LAST:
        return (2, _LAST.index(keyword), keyword)
    if keyword in _RANK:
        return (0, _RANK[keyword], keyword)
    return (1, 0, keyword)


def _value(keyword: str, value: Any) -> Any:
    if keyword in _SUBSCHEMA and isinstance(value, Mapping):
        return _schema(value)
    if keyword in _SUBSCHEMA_LIST and isinstance(value, list):
        return [_schema(item) if isinstance(item, Mapping) else _plain(item) for item in value]
    if keyword in _ORDERED_MAPS and isinstance(value, Mapping):
        return {name: _subschema(sub) for name, sub in value.items()}
    if keyword in _SORTED_MAPS and isinstance(value, Mapping):
        return {name: _subschema(value[name]) for name in sorted(value)}
    return _plain(value)


def _subschema(value: Any) -> Any:
    return _schema(value) if isinstance(value, Mapping) else _plain(value)


def _plain(value: Any) -> Any:
    """A deep copy of a literal JSON value (defaults, enums, ...), its own key order kept."""
    if isinstance(value, Mapping):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return value
