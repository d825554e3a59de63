"""Does an input schema qualify for OpenAI strict function calling?

With `strict: true` OpenAI constrains the model's arguments to the schema
(Structured Outputs) — but it then accepts only a subset of JSON Schema and
rejects the whole request when a tool's schema falls outside it. A wrong
`true` breaks every call; a wrong `false` only loses a guarantee. So the
check below is an allow-list of what OpenAI documents as supported, and
anything it does not recognise disqualifies the schema. Schemas are never
rewritten to qualify: making optional properties required or closing an
open object would change what the tool accepts.

The rules (OpenAI "Structured Outputs — supported schemas"):

* the root is `type: "object"` and not an `anyOf`;
* every subschema has a `type` (one of string, number, integer, boolean,
  object, array, null, or a list of them), or is an `anyOf` (with only
  `title` / `description` beside it) or a lone `$ref`;
* every object has `properties`, `additionalProperties: false`, and lists
  every property in `required` (and nothing else there);
* every array has a single `items` schema;
* keywords are limited to: `type`, `title`, `description`, `enum`, `const`
  anywhere; `pattern`, `format` for strings; `minimum`, `maximum`,
  `exclusiveMinimum`, `exclusiveMaximum`, `multipleOf` for numbers and
  integers; `items`, `minItems`, `maxItems` for arrays; `properties`,
  `required`, `additionalProperties` for objects; `$defs` / `definitions`
  at the root only — so `default`, `examples`, `minLength`, `maxLength`,
  `oneOf`, `allOf`, `not`, `if`, `patternProperties`, `uniqueItems`,
  `writeOnly`, `$schema`, ... disqualify;
* `format` is one of date-time, time, date, duration, email, hostname,
  ipv4, ipv6, uuid;
* `$ref` points at `#` (recursion) or at `#/$defs/NAME` /
  `#/definitions/NAME` that exists;
* size limits: at most 5000 object properties in total, objects nested at
  most 10 deep (the root object is level 1; references are followed,
  recursion is not counted twice), at most 1000 enum values in total, at most
  120,000 characters over all property names, definition names, enum values
  and const values, and at most 15,000 characters of string values in one
  enum that has more than 250 values.

What cannot be checked locally — whether a `pattern` uses only the regular
expression features OpenAI supports — is left to OpenAI.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

SUPPORTED_FORMATS: Final = frozenset(
    {"date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"}
)
MAX_PROPERTIES: Final = 5000
MAX_DEPTH: Final = 10
MAX_ENUM_VALUES: Final = 1000
MAX_TOTAL_CHARS: Final = 120_000
LARGE_ENUM_VALUES: Final = 250
LARGE_ENUM_CHARS: Final = 15_000

_TYPES: Final = frozenset({"string", "number", "integer", "boolean", "object", "array", "null"})
_COMMON: Final = frozenset({"type", "title", "description", "enum", "const"})
_NUMERIC: Final = frozenset({"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"})
_BY_TYPE: Final[Mapping[str, frozenset[str]]] = {
    "string": frozenset({"pattern", "format"}),
    "number": _NUMERIC,
    "integer": _NUMERIC,
    "boolean": frozenset(),
    "null": frozenset(),
    "array": frozenset({"items", "minItems", "maxItems"}),
    "object": frozenset({"properties", "required", "additionalProperties"}),
}
_ANY_OF_KEYS: Final = frozenset({"anyOf", "title", "description"})
_DEFINITIONS: Final = ("$defs", "definitions")


def is_strict_compatible(schema: Any) -> bool:
    """True when `schema` may be sent to OpenAI with `strict: true` as it is."""
    return not strict_problems(schema)


def strict_problems(schema: Any) -> list[str]:
    """Why `schema` does not qualify for strict mode (empty when it does), in schema order."""
    if not isinstance(schema, Mapping):
        return ["#: the schema is not a JSON object"]
    checker = _Checker(schema)
    checker.check()
    return checker.problems


@dataclass
class _Checker:
    root: Mapping[str, Any]
    problems: list[str] = field(default_factory=list)
    properties: int = 0
    enum_values: int = 0
    chars: int = 0

    def check(self) -> None:
        if "anyOf" in self.root:
            self.problem("#", "the root must not be an anyOf")
        if self.root.get("type") != "object":
            self.problem("#", "the root must be of type 'object'")
        self.node(self.root, "#", is_root=True)
        self.definitions()
        self.limits()

    def problem(self, path: str, message: str) -> None:
        self.problems.append(f"{path}: {message}")

    # -- structure ----------------------------------------------------------

    def node(self, schema: Any, path: str, *, is_root: bool = False) -> None:
        if not isinstance(schema, Mapping):
            self.problem(path, "a subschema must be a JSON object")
        elif "$ref" in schema:
            self.ref(schema, path)
        elif "anyOf" in schema and not is_root:
            self.any_of(schema, path)
        else:
            self.typed(schema, path, is_root=is_root)

    def typed(self, schema: Mapping[str, Any], path: str, *, is_root: bool) -> None:
        types = self.types(schema, path)
        if types is None:
            return
        allowed = _COMMON.union(*(_BY_TYPE[name] for name in types))
        if is_root:
            allowed = allowed.union(_DEFINITIONS)
        for keyword in schema:
            if keyword not in allowed and not (is_root and keyword == "anyOf"):
                self.problem(path, f"keyword {keyword!r} is not supported")
        self.values(schema, path)
        if "string" in types and "format" in schema and schema["format"] not in SUPPORTED_FORMATS:
            self.problem(path, f"format {schema['format']!r} is not supported")
        if "object" in types:
            self.object(schema, path)
        if "array" in types:
            self.array(schema, path)

    def types(self, schema: Mapping[str, Any], path: str) -> list[str] | None:
        declared = schema.get("type")
        if declared is None:
            self.problem(path, "every subschema needs a 'type' (or anyOf / $ref)")
            return None
        names = [declared] if isinstance(declared, str) else declared
        if not isinstance(names, list) or not names or not all(isinstance(n, str) for n in names):
            self.problem(path, f"'type' must be a type name or a list of them, not {declared!r}")
            return None
        unknown = [name for name in names if name not in _TYPES]
        if unknown:
            self.problem(path, f"unknown type(s) {unknown}")
            return None
        return names

    def object(self, schema: Mapping[str, Any], path: str) -> None:
        if schema.get("additionalProperties") is not False:
            self.problem(path, "objects need 'additionalProperties': false")
        properties = schema.get("properties")
        if not isinstance(properties, Mapping):
            self.problem(path, "objects need 'properties'")
            return
        required = schema.get("required", [])
        if not isinstance(required, list) or not all(isinstance(name, str) for name in required):
            self.problem(path, "'required' must be a list of property names")
            required = []
        optional = [name for name in properties if name not in required]
        if optional:
            self.problem(path, f"every property must be required; optional: {optional}")
        undeclared = [name for name in required if name not in properties]
        if undeclared:
            self.problem(path, f"'required' names undeclared properties {undeclared}")
        self.properties += len(properties)
        for name, sub in properties.items():
            self.chars += len(name)
            self.node(sub, f"{path}/properties/{_escape(name)}")

    def array(self, schema: Mapping[str, Any], path: str) -> None:
        items = schema.get("items")
        if not isinstance(items, Mapping):
            self.problem(path, "arrays need one 'items' schema")
            return
        self.node(items, f"{path}/items")

    def any_of(self, schema: Mapping[str, Any], path: str) -> None:
        extra = sorted(set(schema) - _ANY_OF_KEYS)
        if extra:
            self.problem(path, f"anyOf may only carry title / description beside it, not {extra}")
        branches = schema["anyOf"]
        if not isinstance(branches, list) or not branches:
            self.problem(path, "'anyOf' must be a non-empty list")
            return
        for index, branch in enumerate(branches):
            self.node(branch, f"{path}/anyOf/{index}")

    def ref(self, schema: Mapping[str, Any], path: str) -> None:
        if len(schema) > 1:
            extra = sorted(key for key in schema if key != "$ref")
            self.problem(path, f"'$ref' must stand alone, not beside {extra}")
        reference = schema["$ref"]
        if not isinstance(reference, str) or _resolve(self.root, reference) is None:
            self.problem(path, f"'$ref' {reference!r} must point at '#' or an existing '#/$defs/NAME'")

    def definitions(self) -> None:
        for container in _DEFINITIONS:
            definitions = self.root.get(container)
            if definitions is None:
                continue
            if not isinstance(definitions, Mapping):
                self.problem(f"#/{container}", "must map names to schemas")
                continue
            for name, sub in definitions.items():
                self.chars += len(name)
                self.node(sub, f"#/{container}/{_escape(name)}")

    # -- sizes ----------------------------------------------------------------

    def values(self, schema: Mapping[str, Any], path: str) -> None:
        if "enum" in schema:
            values = schema["enum"]
            if not isinstance(values, list) or not values:
                self.problem(path, "'enum' must be a non-empty list")
                return
            self.enum_values += len(values)
            strings = sum(len(value) for value in values if isinstance(value, str))
            self.chars += strings
            if len(values) > LARGE_ENUM_VALUES and strings > LARGE_ENUM_CHARS:
                self.problem(
                    path,
                    f"an enum of more than {LARGE_ENUM_VALUES} values may hold at most "
                    f"{LARGE_ENUM_CHARS} characters, not {strings}",
                )
        if isinstance(schema.get("const"), str):
            self.chars += len(schema["const"])

    def limits(self) -> None:
        if self.properties > MAX_PROPERTIES:
            self.problem("#", f"{self.properties} object properties (at most {MAX_PROPERTIES})")
        if self.enum_values > MAX_ENUM_VALUES:
            self.problem("#", f"{self.enum_values} enum values (at most {MAX_ENUM_VALUES})")
        if self.chars > MAX_TOTAL_CHARS:
            self.problem("#", f"{self.chars} characters of names and values (at most {MAX_TOTAL_CHARS})")
        depth = _object_depth(self.root, self.root, ("#",))
        if depth > MAX_DEPTH:
            self.problem("#", f"objects nested {depth} deep (at most {MAX_DEPTH})")


def _object_depth(schema: Any, root: Mapping[str, Any], seen: tuple[str, ...]) -> int:
    """Object levels on the deepest path, following `$ref`s but not recursion."""
    if not isinstance(schema, Mapping):
        return 0
    reference = schema.get("$ref")
    if isinstance(reference, str):
        if reference in seen:
            return 0
        return _object_depth(_resolve(root, reference), root, (*seen, reference))
    children: list[Any] = []
    properties = schema.get("properties")
    if isinstance(properties, Mapping):
        children.extend(properties.values())
    if isinstance(schema.get("items"), Mapping):
        children.append(schema["items"])
    if isinstance(schema.get("anyOf"), list):
        children.extend(schema["anyOf"])
    declared = schema.get("type")
    own = 1 if declared == "object" or (isinstance(declared, list) and "object" in declared) else 0
    return own + max((_object_depth(child, root, seen) for child in children), default=0)


def _resolve(root: Mapping[str, Any], reference: str) -> Mapping[str, Any] | None:
    """`#`, `#/$defs/NAME` or `#/definitions/NAME` → the schema, else None."""
    if reference == "#":
        return root
    for container in _DEFINITIONS:
        prefix = f"#/{container}/"
        if reference.startswith(prefix):
            name = reference[len(prefix) :]
            if "/" in name:
                return None
            definitions = root.get(container)
            found = definitions.get(_unescape(name)) if isinstance(definitions, Mapping) else None
            return found if isinstance(found, Mapping) else None
    return None


def _escape(name: str) -> str:
    return name.replace("~", "~0").replace("/", "~1")


def _unescape(name: str) -> str:
    return name.replace("~1", "/").replace("~0", "~")
