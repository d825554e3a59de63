"""Coercion of rendered text to a schema's types (`toolweave.schemas.coerce`)."""

from __future__ import annotations

from typing import Any

import pytest

from toolweave.schemas.coerce import CoercionError, coerce
from toolweave.schemas.read import properties_of, required_of, type_names


@pytest.mark.parametrize(
    ("value", "schema", "expected"),
    [
        ("3", {"type": "integer"}, 3),
        (" 3 ", {"type": "integer"}, 3),
        ("3.0", {"type": "integer"}, 3),
        ("0.99", {"type": "number"}, 0.99),
        ("10", {"type": "number"}, 10),
        ("true", {"type": "boolean"}, True),
        ("False", {"type": "boolean"}, False),
        ("1", {"type": "boolean"}, True),
        ('{"a": 1}', {"type": "object"}, {"a": 1}),
        ("[1, 2]", {"type": "array"}, [1, 2]),
        ("null", {"type": "null"}, None),
        ("3", {"type": ["integer", "null"]}, 3),
        ("3", {"type": ["string", "integer"]}, "3"),
        ("3", {"type": "string"}, "3"),
        ("3", {}, "3"),
        (3, {"type": "string"}, 3),
        (
            {"n": "4", "s": "4"},
            {"properties": {"n": {"type": "integer"}, "s": {"type": "string"}}},
            {"n": 4, "s": "4"},
        ),
        (["1", "2"], {"type": "array", "items": {"type": "integer"}}, [1, 2]),
    ],
)
def test_coerce_turns_text_into_the_schema_type(value: Any, schema: dict[str, Any], expected: Any) -> None:
    assert coerce(value, schema) == expected


def test_coercion_errors_never_quote_the_value() -> None:
    with pytest.raises(CoercionError) as caught:
        coerce({"port": "hunter2-secret"}, {"properties": {"port": {"type": "integer"}}})
    assert "hunter2-secret" not in str(caught.value)
    assert "port" in str(caught.value) and "integer" in str(caught.value)


def test_coercion_reads_the_type_the_way_the_read_helpers_do() -> None:
    assert coerce("3", {"type": ["integer", 7]}) == 3
    assert coerce("3", {"type": []}) == "3"
    assert coerce("3", True) == "3"
    assert type_names({"type": []}) is None and type_names(True) is None


def test_the_read_helpers_accept_what_is_not_a_schema() -> None:
    assert properties_of(None) == {} and properties_of({"properties": ["a"]}) == {}
    assert properties_of({"properties": {"a": True, "b": {"type": "string"}}}) == {
        "a": {},
        "b": {"type": "string"},
    }
    assert required_of("x") == [] and required_of({"required": ["a", 1, "b"]}) == ["a", "b"]
