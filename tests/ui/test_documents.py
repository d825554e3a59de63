"""The builder's text editor formats: a definition written as TOML reads back as the same definition."""

from __future__ import annotations

from typing import Any

import pytest

from toolweave.server.ui import documents
from toolweave.server.ui.builder_forms import MAX_DEPTH, kept_of

ODD: dict[str, Any] = {
    "kind": "workflow",
    "name": "odd",
    "description": 'Two lines,\nwith "quotes", a \\ backslash and ünïcode.',
    "meta": {"a key with spaces": 1.5, "x.y": True, "empty": {}},
    "tags": [],
    "steps": [
        {"id": "a", "tool": "b/c", "arguments": {"q": "{{ params.q }}", "n": [1, 2, {"k": False}]}},
        {"id": "d", "type": "elicitation", "message": "Sure?", "dependsOn": ["a"]},
    ],
}


@pytest.mark.parametrize("fmt", documents.FORMATS)
def test_a_definition_survives_its_text_form(fmt: str) -> None:
    text = documents.write(ODD, fmt)
    assert documents.read(text, fmt) == (ODD, "")


def test_toml_is_a_config_file_entry_and_a_bare_table_reads_too() -> None:
    text = documents.to_toml({"name": "x", "tools": ["a/b"]})
    assert text.startswith("[[composite_tools]]\n")
    assert documents.read('name = "x"\ntools = ["a/b"]\n', "toml") == ({"name": "x", "tools": ["a/b"]}, "")


@pytest.mark.parametrize(
    ("text", "fmt", "why"),
    [
        ("name = ", "toml", "not valid TOML"),
        ("[[composite_tools]]\nname = 'a'\n[[composite_tools]]\nname = 'b'\n", "toml", "exactly one"),
        ("- a\n- b\n", "yaml", "must be a mapping"),
        ("x" * (documents.MAX_TEXT + 1), "yaml", "longer than"),
        ("a: " + "[" * 100 + "]" * 100, "yaml", f"nested deeper than {MAX_DEPTH}"),
        ("a = " + "[" * 100 + "]" * 100, "toml", f"nested deeper than {MAX_DEPTH}"),
    ],
)
def test_text_that_is_not_one_definition_says_why(text: str, fmt: str, why: str) -> None:
    definition, problem = documents.read(text, fmt)
    assert definition is None and why in problem


def test_a_kept_field_too_deep_or_not_json_is_dropped_not_a_crash() -> None:
    assert kept_of({"kept": "[" * 5000 + "]" * 5000}, "kept") == {}
    assert kept_of({"kept": '{"a": ' + "[" * 100 + "]" * 100 + "}"}, "kept") == {}
    assert kept_of({"kept": "{not json"}, "kept") == {}
    assert kept_of({"kept": '{"tags": ["a"]}'}, "kept") == {"tags": ["a"]}
