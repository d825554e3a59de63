"""OpenAPI schemas (2.0, 3.0, 3.1) → self-contained JSON Schema 2020-12, as tools advertise them.

- A referenced component becomes an entry of the tool schema's `$defs` and a
  `{"$ref": "#/$defs/Name"}` where it is used, so a recursive schema (a tree,
  a linked list) needs no special case and every component is converted once
  per document (memoised), however many tools use it.
- OpenAPI-only keywords are translated: `nullable` / `x-nullable` → a `"null"`
  type, boolean `exclusiveMinimum`/`exclusiveMaximum` → numbers, `example` →
  `examples`, Swagger's `type: file` → a binary string; `discriminator`, `xml`,
  `externalDocs` and `x-*` are dropped. Values that are not valid JSON Schema
  (a `required: true` on a property, an unknown type, a regex Python cannot
  compile) are dropped instead of making the whole schema unusable.
- Inputs leave out `readOnly` properties, outputs leave out `writeOnly` ones.
- What comes out is valid JSON Schema by construction (only known keywords,
  each value type-checked), so no metaschema check runs per tool (for GitHub's
  description that check alone costs seconds); the tests check every tool of
  GitHub's and a sample of public documents against the metaschema instead.
- Every walk has a node budget and a depth limit: a hostile document (a YAML
  alias bomb) costs bounded time.
"""

from __future__ import annotations

import re
import warnings
from typing import Any, Literal

from toolweave.backends.errors import DocumentError
from toolweave.backends.openapi.refs import Refs, child

Mode = Literal["input", "output"]

MAX_NODES = 50_000
"""Schema nodes one walk (a root or one component) may visit."""
MAX_DEPTH = 64
"""Nesting of one schema without going through a `$ref`."""

_TYPES = frozenset({"string", "number", "integer", "boolean", "array", "object", "null"})
_SCHEMA_MAPS = ("properties", "patternProperties", "dependentSchemas")
_SCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems")
_SCHEMA_ONE = (
    "additionalProperties",
    "not",
    "contains",
    "propertyNames",
    "if",
    "then",
    "else",
    "unevaluatedItems",
    "unevaluatedProperties",
)
_NUMBERS = ("multipleOf", "maximum", "minimum")
_COUNTS = ("maxLength", "minLength", "maxItems", "minItems", "maxProperties", "minProperties")
_TEXTS = ("title", "description", "format", "contentMediaType", "contentEncoding")
_FLAGS = ("uniqueItems", "readOnly", "writeOnly", "deprecated")
_DEF_NAME = re.compile(r"[^A-Za-z0-9_.-]+")


class SchemaConverter:
    """Converts the schemas of one document; components are memoised per mode."""

    def __init__(self, refs: Refs, version: str) -> None:
        self.refs = refs
        self.version = version
        self._names: dict[str, str] = {}
        self._taken: set[str] = set()
        self._done: dict[tuple[str, Mode], tuple[Any, frozenset[str]] | DocumentError] = {}
        self._roots: dict[tuple[str, Mode], tuple[Any, dict[str, Any]] | DocumentError] = {}

    def convert(self, node: Any, at: str, mode: Mode) -> tuple[Any, dict[str, Any]]:
        """(schema, `$defs` it needs) for a schema at pointer `at`; a leading `$ref` chain is followed.

        A root reached through a reference (a shared parameter, response or body component) is
        converted once per mode; callers treat what they get as immutable.
        """
        pointer, target = self.refs.follow(node, at)
        shared = pointer != at
        if shared:
            found = self._roots.get((pointer, mode))
            if isinstance(found, DocumentError):
                raise found
            if found is not None:
                return found
        try:
            walk = _Walk(self, mode)
            result = (walk.schema(target, pointer, 0), self._defs_for(walk.used, mode))
        except DocumentError as error:
            if shared:
                self._roots[(pointer, mode)] = error
            raise
        if shared:
            self._roots[(pointer, mode)] = result
        return result

    def name_of(self, pointer: str) -> str:
        found = self._names.get(pointer)
        if found is not None:
            return found
        last = pointer.rsplit("/", 1)[-1].replace("~1", "/").replace("~0", "~")
        base = _DEF_NAME.sub("_", last).strip("_") or "schema"
        name, count = base, 1
        while name in self._taken:
            count += 1
            name = f"{base}_{count}"
        self._taken.add(name)
        self._names[pointer] = name
        return name

    def _defs_for(self, used: set[str], mode: Mode) -> dict[str, Any]:
        """Convert (once) every component reachable from `used`; return them by `$defs` name."""
        if not used:
            return {}
        defs: dict[str, Any] = {}
        pending = sorted(used)
        seen = set(pending)
        while pending:
            pointer = pending.pop()
            schema, deps = self._component(pointer, mode)
            defs[self.name_of(pointer)] = schema
            for dep in deps:
                if dep not in seen:
                    seen.add(dep)
                    pending.append(dep)
        return dict(sorted(defs.items()))

    def _component(self, pointer: str, mode: Mode) -> tuple[Any, frozenset[str]]:
        found = self._done.get((pointer, mode))
        if isinstance(found, DocumentError):
            raise found
        if found is not None:
            return found
        try:
            _, node = self.refs.resolve("#" + pointer, pointer)
            walk = _Walk(self, mode)
            result = (walk.schema(node, pointer, 0), frozenset(walk.used))
        except DocumentError as error:
            self._done[(pointer, mode)] = error
            raise
        self._done[(pointer, mode)] = result
        return result


class _Walk:
    """One schema walk: converts nodes, records the components it references."""

    def __init__(self, converter: SchemaConverter, mode: Mode) -> None:
        self.converter = converter
        self.mode = mode
        self.used: set[str] = set()
        self.nodes = 0

    def schema(self, node: Any, at: str, depth: int) -> Any:
        if isinstance(node, bool):
            return node
        if not isinstance(node, dict):
            raise DocumentError(at, f"a schema must be an object, not {type(node).__name__}")
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise DocumentError(at, f"the schema is too large (more than {MAX_NODES} nodes)")
        if depth > MAX_DEPTH:
            raise DocumentError(at, f"the schema nests deeper than {MAX_DEPTH} levels")
        out: dict[str, Any] = {}
        if "$ref" in node:
            pointer, _ = self.converter.refs.resolve(node["$ref"], at)
            self.used.add(pointer)
            out["$ref"] = "#/$defs/" + self.converter.name_of(pointer)
        dropped: set[str] = set()
        for key, value in node.items():
            if key != "$ref":  # `at` is this node's pointer: a keyword's is built only where a schema nests
                self._keyword(out, key, value, at, depth, dropped)
        if "required" in out and dropped:
            out["required"] = [name for name in out["required"] if name not in dropped]
        _exclusive_bounds(out, node)
        if node.get("nullable") is True or node.get("x-nullable") is True:
            out = _nullable(out)
        return out

    def _keyword(
        self, out: dict[str, Any], key: str, value: Any, at: str, depth: int, dropped: set[str]
    ) -> None:
        if key in _SCHEMA_MAPS:
            if isinstance(value, dict):
                out[key] = (
                    self._properties(value, child(at, key), depth, dropped)
                    if key == "properties"
                    else {
                        name: self.schema(item, child(at, key, name), depth + 1)
                        for name, item in value.items()
                    }
                )
        elif key in _SCHEMA_LISTS:
            if isinstance(value, list):
                out[key] = [self.schema(item, child(at, key, i), depth + 1) for i, item in enumerate(value)]
        elif key in _SCHEMA_ONE:
            if isinstance(value, dict | bool):
                out[key] = self.schema(value, child(at, key), depth + 1)
        elif key == "items":
            if isinstance(value, list):  # draft-4 tuple form
                out["prefixItems"] = [
                    self.schema(item, child(at, key, i), depth + 1) for i, item in enumerate(value)
                ]
            elif isinstance(value, dict | bool):
                out["items"] = self.schema(value, child(at, key), depth + 1)
        elif key == "type":
            _type(out, value)
        elif key in _TEXTS:
            if isinstance(value, str):
                out[key] = value
        elif key in _NUMBERS:
            if _is_number(value):
                out[key] = value
        elif key in _COUNTS:
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                out[key] = value
        elif key in _FLAGS:
            if isinstance(value, bool):
                out[key] = value
        elif key in ("exclusiveMinimum", "exclusiveMaximum"):
            if _is_number(value):
                out[key] = value
        elif key == "required":
            if isinstance(value, list):
                out[key] = list(dict.fromkeys(item for item in value if isinstance(item, str)))
        elif key == "enum":
            if isinstance(value, list) and value:
                out[key] = value
        elif key in ("default", "const"):
            out[key] = value
        elif key == "examples":
            if isinstance(value, list):
                out[key] = value
        elif key == "example":
            out.setdefault("examples", [value])
        elif key == "pattern":
            if isinstance(value, str) and _compiles(value):
                out[key] = value
        elif key == "dependentRequired" and isinstance(value, dict):
            out[key] = {
                k: [name for name in v if isinstance(name, str)]
                for k, v in value.items()
                if isinstance(v, list)
            }

    def _properties(self, value: dict[str, Any], at: str, depth: int, dropped: set[str]) -> dict[str, Any]:
        hidden = "readOnly" if self.mode == "input" else "writeOnly"
        properties: dict[str, Any] = {}
        for name, item in value.items():
            if self._flagged(item, child(at, name), hidden):
                dropped.add(name)
                continue
            properties[name] = self.schema(item, child(at, name), depth + 1)
        return properties

    def _flagged(self, node: Any, at: str, flag: str) -> bool:
        """Whether a property is `readOnly`/`writeOnly`, on itself or on the component it references."""
        if not isinstance(node, dict):
            return False
        if node.get(flag) is True:
            return True
        if "$ref" in node:
            try:
                _, target = self.converter.refs.follow(node, at)
            except DocumentError:
                return False
            return isinstance(target, dict) and target.get(flag) is True
        return False


def _type(out: dict[str, Any], value: Any) -> None:
    names = value if isinstance(value, list) else [value]
    kept: list[str] = []
    for name in names:
        if name == "file":  # Swagger 2.0
            name = "string"
            out.setdefault("format", "binary")
        if isinstance(name, str) and name in _TYPES and name not in kept:
            kept.append(name)
    if kept:
        out["type"] = kept[0] if len(kept) == 1 else kept


def _exclusive_bounds(out: dict[str, Any], node: dict[str, Any]) -> None:
    """OpenAPI 3.0 / Swagger: `exclusiveMinimum: true` qualifies `minimum` (JSON Schema: a number)."""
    for flag, bound in (("exclusiveMinimum", "minimum"), ("exclusiveMaximum", "maximum")):
        value = node.get(flag)
        if isinstance(value, bool):
            out.pop(flag, None)
            if value and bound in out:
                out[flag] = out.pop(bound)


def _nullable(out: dict[str, Any]) -> dict[str, Any]:
    kind = out.get("type")
    if isinstance(kind, str):
        out["type"] = [kind, "null"] if kind != "null" else kind
    elif isinstance(kind, list):
        if "null" not in kind:
            out["type"] = [*kind, "null"]
    else:
        return {"anyOf": [out, {"type": "null"}]}
    if "enum" in out and None not in out["enum"]:
        out["enum"] = [*out["enum"], None]
    return out


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _compiles(pattern: str) -> bool:
    """`jsonschema` checks `pattern` with Python's `re`; one it cannot compile would disable validation."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ECMA-style classes (`[[a]]`) compile with a FutureWarning
        try:
            re.compile(pattern)
        except (re.error, RecursionError, OverflowError):
            return False
    return True


def is_object_schema(schema: Any) -> bool:
    """A schema whose instances are JSON objects (and only objects)."""
    if not isinstance(schema, dict):
        return False
    kind = schema.get("type")
    if kind == "object":
        return True
    return bool(
        kind is None and "properties" in schema and not any(k in schema for k in ("anyOf", "oneOf", "$ref"))
    )
