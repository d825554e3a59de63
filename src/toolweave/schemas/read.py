"""Reading a JSON Schema keyword by keyword: `properties`, `required`, `type`, definitions.

Tool input schemas come from backends we do not control, so every helper
accepts sloppy input (not a mapping, missing `properties`, a `required` that is
not a list) and reads it the way a lenient validator would. The router and
fan-out merges, coercion, the UI's forms and search all read schemas here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from toolweave.templates import copy_json

DEFINITION_KEYS: Final = ("$defs", "definitions")
"""Where local `$ref` targets live (2020-12 and draft-07 spelling)."""


def properties_of(schema: Any) -> dict[str, Any]:
    """The schema's `properties`, each a mapping (a non-mapping property reads as `{}`)."""
    if not isinstance(schema, Mapping):
        return {}
    found = schema.get("properties")
    if not isinstance(found, Mapping):
        return {}
    return {name: prop if isinstance(prop, Mapping) else {} for name, prop in found.items()}


def required_of(schema: Any) -> list[str]:
    """The names `required` lists (non-strings skipped; empty when absent or not a list)."""
    if not isinstance(schema, Mapping):
        return []
    found = schema.get("required")
    return [name for name in found if isinstance(name, str)] if isinstance(found, list) else []


def accepts_unlisted(schema: Mapping[str, Any]) -> bool:
    """True when the schema explicitly accepts properties it does not list.

    JSON Schema's default is to accept them, but tool schemas rarely mean it:
    a mapping onto a parameter the tool does not list is far more often a typo,
    so only an explicit `additionalProperties: true` (or a schema) allows it —
    or a schema that lists no properties at all.
    """
    extra = schema.get("additionalProperties")
    return extra is True or isinstance(extra, Mapping) or not properties_of(schema)


def type_names(prop: Any) -> list[str] | None:
    """The schema's `type` as a list; None when it does not constrain the type."""
    if not isinstance(prop, Mapping):
        return None
    kind = prop.get("type")
    if isinstance(kind, str):
        return [kind]
    if isinstance(kind, list) and kind:
        return [item for item in kind if isinstance(item, str)]
    return None


def type_value(names: Sequence[str]) -> str | list[str]:
    return names[0] if len(names) == 1 else list(names)


def renamed_property(prop: Mapping[str, Any], *, renamed: bool) -> Mapping[str, Any]:
    """A renamed parameter drops its `title`: generated titles spell the old name (`Profile Url`)."""
    if renamed and "title" in prop:
        return {key: value for key, value in prop.items() if key != "title"}
    return prop


def merge_definitions(
    schemas: Sequence[tuple[str, Mapping[str, Any]]],
) -> tuple[dict[str, dict[str, Any]], list[tuple[str, str]]]:
    """Unite the `$defs` / `definitions` of several schemas, so merged `$ref`s still resolve.

    `schemas` are (path, schema). Identical definitions under one name merge;
    different ones are problems (path, message), since one name cannot point
    at two shapes.
    """
    merged: dict[str, dict[str, Any]] = {key: {} for key in DEFINITION_KEYS}
    owner: dict[tuple[str, str], str] = {}
    problems: list[tuple[str, str]] = []
    for path, schema in schemas:
        for key in DEFINITION_KEYS:
            definitions = schema.get(key)
            if not isinstance(definitions, Mapping):
                continue
            for name, definition in definitions.items():
                existing = merged[key].get(name)
                if existing is None:
                    merged[key][name] = copy_json(definition)
                    owner[(key, name)] = path
                elif existing != definition:
                    problems.append(
                        (path, f"its schema defines {key}/{name} differently from {owner[(key, name)]}")
                    )
    return {key: value for key, value in merged.items() if value}, problems
