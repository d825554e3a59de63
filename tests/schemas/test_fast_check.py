"""The argument validator's fast path says "valid" only where jsonschema does (it never decides a failure)."""

from __future__ import annotations

import random
from typing import Any

import jsonschema
import pytest

from toolweave.schemas.fast import fast_check
from toolweave.schemas.validate import ArgumentValidator

SCHEMAS: list[dict[str, Any]] = [
    {"type": "object", "properties": {"text": {"type": "string", "title": "Text"}}, "required": ["text"]},
    {
        "type": "object",
        "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
        "required": ["a", "b"],
        "additionalProperties": False,
    },
    {
        "type": "object",
        "properties": {
            "x": {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None},
            "n": {"type": "number", "description": "a number"},
            "l": {"type": "array", "items": {"type": "integer"}},
            "o": {"type": "object"},
            "b": {"type": "boolean"},
            "s": {"type": "string", "format": "email", "x-mcp-header": "S"},
        },
    },
    {"type": "object", "properties": {"t": {"type": ["string", "integer"]}}, "additionalProperties": True},
    {"type": "object"},
    {},
]
UNSUPPORTED: list[dict[str, Any]] = [
    {"type": "object", "properties": {"e": {"enum": [1, 2]}}},
    {"type": "object", "properties": {"m": {"type": "integer", "minimum": 3}}},
    {"type": "object", "properties": {"r": {"$ref": "#/$defs/R"}}, "$defs": {"R": {"type": "string"}}},
    {"type": "object", "additionalProperties": {"type": "string"}},
    {"type": "object", "properties": {"p": {"type": "string", "pattern": "^a"}}},
]
VALUES = [None, True, False, 0, 1, 1.0, 1.5, -3, 2**70, "s", "", [], [1], [1, "a"], [True], {}, {"k": 1}]
KEYS = ["text", "a", "b", "x", "n", "l", "o", "s", "t", "zzz"]


@pytest.mark.parametrize("schema", SCHEMAS)
def test_the_fast_check_never_accepts_what_jsonschema_rejects(schema: dict[str, Any]) -> None:
    check = fast_check(schema)
    assert check is not None
    validator = jsonschema.Draft202012Validator(schema)
    rng = random.Random(7)
    accepted = 0
    for _ in range(5000):
        instance: Any = {key: rng.choice(VALUES) for key in rng.sample(KEYS, rng.randint(0, 4))}
        if rng.random() < 0.05:
            instance = rng.choice(VALUES)
        if check(instance):
            accepted += 1
            assert validator.is_valid(instance), (schema, instance)
    assert accepted > 0


@pytest.mark.parametrize("schema", UNSUPPORTED)
def test_schemas_it_does_not_understand_go_to_jsonschema(schema: dict[str, Any]) -> None:
    assert fast_check(schema) is None


def test_problems_are_still_jsonschema_s() -> None:
    validator = ArgumentValidator(SCHEMAS[1])
    assert validator.problems({"a": 1, "b": 2}) == []
    assert validator.problems({"a": 1.0, "b": 2}) == []  # 1.0 is an integer to JSON Schema
    assert validator.problems({"a": True, "b": 2}) == ["argument 'a': True is not of type 'integer'"]
    assert validator.problems({"a": 1}) == ["missing required argument 'b'"]
    assert validator.problems({"a": 1, "b": 2, "c": 3})[0].startswith("unexpected argument(s) at '(root)'")
