"""Export formats: shapes, provider-safe names, the OpenAI strict rule, determinism, secrets."""

from __future__ import annotations

import copy
import json
import re
from typing import Any

import mcp_types as types
import pytest

from toolweave import Gateway
from toolweave.export import (
    FORMATS,
    NAME_PATTERN,
    export_tool,
    export_tools,
    exported_names,
    is_strict_compatible,
    safe_name,
    safe_names,
    strict_problems,
)

STRICT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "url": {"type": "string", "description": "The full URL to scrape."},
        "format": {"type": "string", "enum": ["markdown", "html", "text"]},
    },
    "required": ["url", "format"],
    "additionalProperties": False,
}
LOOSE_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"url": {"type": "string"}, "max_length": {"type": "integer"}},
    "required": ["url"],
}
NAME_RE = re.compile(NAME_PATTERN)
LLM_FORMATS = [f for f in FORMATS if f != "mcp"]


def tool(name: str = "scrape", schema: dict[str, Any] | None = None, **fields: Any) -> types.Tool:
    return types.Tool(
        name=name,
        description=fields.pop("description", "Use this tool to scrape a URL."),
        input_schema=copy.deepcopy(STRICT_SCHEMA if schema is None else schema),
        **fields,
    )


def obj(properties: dict[str, Any], required: list[str] | None = None, **extra: Any) -> dict[str, Any]:
    """An object schema that is strict unless told otherwise."""
    return {
        "type": "object",
        "properties": properties,
        "required": list(properties) if required is None else required,
        "additionalProperties": False,
        **extra,
    }


# -- formats ------------------------------------------------------------------


def test_formats_constant_lists_every_format() -> None:
    assert FORMATS == ("mcp", "openai", "openai-responses", "anthropic", "langchain", "universal")


def test_mcp_is_the_camel_case_tool_json_without_meta() -> None:
    source = tool(
        "ts.scrape",
        title="Scrape",
        output_schema={"type": "object", "properties": {"content": {"type": "string"}}},
        annotations=types.ToolAnnotations(read_only_hint=True, open_world_hint=True),
        icons=[types.Icon(src="https://example.com/i.png")],
        _meta={"vendor": "internal-token-123"},
    )
    [entry] = export_tools([source], "mcp")
    assert list(entry) == ["name", "title", "description", "inputSchema", "outputSchema", "annotations"]
    assert entry["name"] == "ts.scrape"  # MCP keeps names verbatim
    assert entry["inputSchema"] == STRICT_SCHEMA
    assert entry["outputSchema"] == {"type": "object", "properties": {"content": {"type": "string"}}}
    assert entry["annotations"] == {"readOnlyHint": True, "openWorldHint": True}
    assert "internal-token-123" not in json.dumps(entry)


def test_mcp_omits_what_the_tool_does_not_have() -> None:
    source = types.Tool(name="bare", input_schema={"type": "object"})
    assert export_tool(source, "mcp") == {"name": "bare", "inputSchema": {"type": "object"}}


def test_openai_chat_completions_shape() -> None:
    assert export_tool(tool(), "openai") == {
        "type": "function",
        "function": {
            "name": "scrape",
            "description": "Use this tool to scrape a URL.",
            "parameters": STRICT_SCHEMA,
            "strict": True,
        },
    }


def test_openai_responses_shape() -> None:
    assert export_tool(tool(), "openai-responses") == {
        "type": "function",
        "name": "scrape",
        "description": "Use this tool to scrape a URL.",
        "parameters": STRICT_SCHEMA,
        "strict": True,
    }


def test_anthropic_shape() -> None:
    assert export_tool(tool(), "anthropic") == {
        "name": "scrape",
        "description": "Use this tool to scrape a URL.",
        "input_schema": STRICT_SCHEMA,
    }


def test_langchain_shape_is_structured_tool_fields() -> None:
    assert export_tool(tool(), "langchain") == {
        "name": "scrape",
        "description": "Use this tool to scrape a URL.",
        "args_schema": STRICT_SCHEMA,
    }


def test_universal_shape_is_seed_002() -> None:
    assert export_tool(tool(schema=LOOSE_SCHEMA), "universal") == {
        "name": "scrape",
        "description": "Use this tool to scrape a URL.",
        "parameters": LOOSE_SCHEMA,
    }


def test_mini_prompt_description_is_exported_verbatim() -> None:
    mini_prompt = (
        "Use this tool to scrape content from any URL.\n\n"
        "# Required inputs (always include these):\n- url: The full URL to scrape.\n\n"
        "# What the tool outputs:\nThe page content."
    )
    for format in FORMATS:
        entry = export_tool(tool(description=mini_prompt), format)
        assert entry.get("function", entry)["description"] == mini_prompt


def test_description_falls_back_to_title_then_empty() -> None:
    titled = types.Tool(name="t", title="Scrape a page", input_schema={"type": "object"})
    bare = types.Tool(name="b", input_schema={"type": "object"})
    assert export_tool(titled, "anthropic")["description"] == "Scrape a page"
    assert export_tool(bare, "universal")["description"] == ""


@pytest.mark.parametrize("format", LLM_FORMATS)
def test_llm_formats_get_an_object_root_with_properties(format: str) -> None:
    entry = export_tool(types.Tool(name="noargs", input_schema={}), format)
    schema = entry.get("function", entry)
    schema = schema.get("parameters") or schema.get("input_schema") or schema.get("args_schema")
    assert schema == {"type": "object", "properties": {}}


def test_unknown_format_lists_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="unknown export format 'gemini'") as caught:
        export_tools([tool()], "gemini")
    for format in FORMATS:
        assert format in str(caught.value)


def test_empty_tool_list_exports_empty_list() -> None:
    assert export_tools([], "openai") == []


# -- names ----------------------------------------------------------------------


def test_valid_names_are_kept() -> None:
    assert safe_name("ts__search-v2") == "ts__search-v2"
    assert safe_name("x" * 64) == "x" * 64


def test_invalid_characters_become_underscores() -> None:
    assert safe_name("github.create issue/v2") == "github_create_issue_v2"
    assert safe_name("café") == "caf_"
    assert safe_name("") == "_"


def test_long_names_are_cut_with_a_stable_hash() -> None:
    first = "backend__" + "a" * 70 + "_one"
    second = "backend__" + "a" * 70 + "_two"
    safe_first, safe_second = safe_name(first), safe_name(second)
    assert safe_first != safe_second
    for safe in (safe_first, safe_second):
        assert len(safe) == 64 and NAME_RE.match(safe)
        assert safe.startswith("backend__aaaa")
    assert safe_name(first) == safe_first  # stable across calls
    assert re.fullmatch(r".{55}_[0-9a-f]{8}", safe_first)
    assert len(safe_name("y" * 65)) == 64


@pytest.mark.parametrize("format", LLM_FORMATS)
def test_llm_formats_sanitise_names(format: str) -> None:
    long_name = "svc__" + "very_long_operation_name_" * 4
    exported = export_tools([tool("svc.get/item"), tool(long_name)], format)
    names = [entry.get("name") or entry["function"]["name"] for entry in exported]
    assert names[0] == "svc_get_item"
    assert NAME_RE.match(names[1]) and names[1] != long_name
    assert exported_names(["svc.get/item", long_name], format) == {
        "svc.get/item": names[0],
        long_name: names[1],
    }


def test_collision_names_both_originals() -> None:
    with pytest.raises(ValueError, match=r"'a\.b' and 'a/b' would both be exported as 'a_b'"):
        export_tools([tool("a.b"), tool("a/b")], "anthropic")
    with pytest.raises(ValueError, match=r"'a_b' and 'a\.b'"):
        safe_names(["a_b", "a.b"])


def test_duplicate_names_are_refused_in_every_format() -> None:
    for format in FORMATS:
        with pytest.raises(ValueError, match="'scrape' appears more than once"):
            export_tools([tool(), tool()], format)


def test_mcp_keeps_names_that_llm_formats_would_collapse() -> None:
    exported = export_tools([tool("a.b"), tool("a/b")], "mcp")
    assert [entry["name"] for entry in exported] == ["a.b", "a/b"]


# -- strict -----------------------------------------------------------------------


QUALIFYING: dict[str, dict[str, Any]] = {
    "flat": STRICT_SCHEMA,
    "no properties": obj({}),
    "nested objects": obj(
        {"filter": obj({"field": {"type": "string"}, "range": obj({"lo": {"type": "number"}})})}
    ),
    "nullable instead of optional": obj(
        {"limit": {"type": ["integer", "null"]}, "cursor": {"anyOf": [{"type": "string"}, {"type": "null"}]}}
    ),
    "array of objects": obj(
        {"rows": {"type": "array", "items": obj({"id": {"type": "integer"}}), "minItems": 1, "maxItems": 5}}
    ),
    "supported keywords": obj(
        {
            "when": {"type": "string", "format": "date-time", "title": "When"},
            "code": {"type": "string", "pattern": "^[A-Z]{3}$"},
            "n": {"type": "number", "minimum": 0, "exclusiveMaximum": 10, "multipleOf": 0.5},
            "kind": {"type": "string", "const": "fixed"},
        }
    ),
    "definitions and recursion": obj(
        {"tree": {"$ref": "#/$defs/node"}},
        **{
            "$defs": {
                "node": obj(
                    {
                        "value": {"type": "string"},
                        "children": {"type": "array", "items": {"$ref": "#/$defs/node"}},
                    }
                )
            }
        },
    ),
    "root recursion": obj(
        {"name": {"type": "string"}, "parent": {"anyOf": [{"$ref": "#"}, {"type": "null"}]}}
    ),
}

NOT_QUALIFYING: dict[str, tuple[dict[str, Any], str]] = {
    "optional property": (LOOSE_SCHEMA, "optional: ['max_length']"),
    "missing additionalProperties": (
        {"type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"]},
        "additionalProperties",
    ),
    "additionalProperties true": (
        obj({"a": {"type": "string"}}, additionalProperties=True),
        "additionalProperties",
    ),
    "nested optional": (
        obj({"f": obj({"x": {"type": "string"}, "y": {"type": "string"}}, required=["x"])}),
        "#/properties/f",
    ),
    "nested open object": (obj({"f": {"type": "object", "properties": {}}}), "#/properties/f"),
    "object without properties": (
        obj({"f": {"type": "object", "additionalProperties": False}}),
        "need 'properties'",
    ),
    "required names unknown": (obj({"a": {"type": "string"}}, required=["a", "b"]), "undeclared"),
    "default": (obj({"a": {"type": "string", "default": "x"}}), "'default'"),
    "minLength": (obj({"a": {"type": "string", "minLength": 1}}), "'minLength'"),
    "uniqueItems": (
        obj({"a": {"type": "array", "items": {"type": "string"}, "uniqueItems": True}}),
        "'uniqueItems'",
    ),
    "unsupported format": (obj({"a": {"type": "string", "format": "uri"}}), "format 'uri'"),
    "oneOf": (obj({"a": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}), "'type'"),
    "allOf": (obj({"a": {"type": "string", "allOf": [{"type": "string"}]}}), "'allOf'"),
    "ref with siblings": (
        obj({"a": {"$ref": "#/$defs/x", "description": "d"}}, **{"$defs": {"x": {"type": "string"}}}),
        "stand alone",
    ),
    "unknown ref": (obj({"a": {"$ref": "#/$defs/missing"}}), "'#/$defs/missing'"),
    "no type": (obj({"a": {"description": "anything"}}), "needs a 'type'"),
    "array without items": (obj({"a": {"type": "array"}}), "'items'"),
    "root anyOf": ({"anyOf": [obj({})]}, "root must not be an anyOf"),
    "root not an object": ({"type": "array", "items": {"type": "string"}}, "root must be of type 'object'"),
    "$schema": (obj({}, **{"$schema": "http://json-schema.org/draft-07/schema#"}), "'$schema'"),
    "nested $defs": (obj({"a": obj({}, **{"$defs": {}})}), "'$defs'"),
    "writeOnly": (obj({"password": {"type": "string", "writeOnly": True}}), "'writeOnly'"),
}


@pytest.mark.parametrize("schema", QUALIFYING.values(), ids=QUALIFYING.keys())
def test_qualifying_schemas_are_strict(schema: dict[str, Any]) -> None:
    assert strict_problems(schema) == []
    exported = export_tool(tool(schema=schema), "openai")
    assert exported["function"]["strict"] is True
    assert export_tool(tool(schema=schema), "openai-responses")["strict"] is True


@pytest.mark.parametrize(("schema", "reason"), NOT_QUALIFYING.values(), ids=NOT_QUALIFYING.keys())
def test_non_qualifying_schemas_are_not_strict(schema: dict[str, Any], reason: str) -> None:
    problems = strict_problems(schema)
    assert any(reason in problem for problem in problems), problems
    assert "strict" not in export_tool(tool(schema=schema), "openai")["function"]
    assert export_tool(tool(schema=schema), "openai-responses")["strict"] is False


def test_exported_schema_is_never_rewritten_to_qualify() -> None:
    exported = export_tool(tool(schema=LOOSE_SCHEMA), "openai")["function"]["parameters"]
    assert exported == LOOSE_SCHEMA


def test_nesting_limit_is_ten_objects() -> None:
    def nested(levels: int) -> dict[str, Any]:
        schema = obj({"leaf": {"type": "string"}})
        for _ in range(levels - 1):
            schema = obj({"child": schema})
        return schema

    assert is_strict_compatible(nested(10))
    assert any("nested 11 deep" in p for p in strict_problems(nested(11)))


def test_nesting_follows_references() -> None:
    inner = obj({"leaf": {"type": "string"}})
    for _ in range(8):
        inner = obj({"child": inner})
    schema = obj({"a": obj({"b": {"$ref": "#/$defs/deep"}})}, **{"$defs": {"deep": inner}})
    assert any("nested 11 deep" in p for p in strict_problems(schema))


def test_size_limits() -> None:
    many_properties = obj({f"p{i}": {"type": "string"} for i in range(5001)})
    assert any("5001 object properties" in p for p in strict_problems(many_properties))
    many_enum_values = obj({f"e{i}": {"type": "integer", "enum": list(range(101))} for i in range(10)})
    assert any("1010 enum values" in p for p in strict_problems(many_enum_values))
    big_enum = obj({"e": {"type": "string", "enum": [f"{i:03d}" + "x" * 57 for i in range(251)]}})
    assert any("15000 characters" in p for p in strict_problems(big_enum))
    long_names = obj({f"{i:03d}" + "n" * 1997: {"type": "string"} for i in range(61)})
    assert any("characters of names and values" in p for p in strict_problems(long_names))


def test_strict_problems_of_a_non_object() -> None:
    assert strict_problems(["not", "a", "schema"]) == ["#: the schema is not a JSON object"]


# -- determinism and secrets -------------------------------------------------------


@pytest.mark.parametrize("format", FORMATS)
def test_output_is_deterministic_whatever_the_keyword_order(format: str) -> None:
    reordered = {
        "additionalProperties": False,
        "required": ["url", "format"],
        "properties": {
            "url": {"description": "The full URL to scrape.", "type": "string"},
            "format": {"enum": ["markdown", "html", "text"], "type": "string"},
        },
        "type": "object",
    }
    first = json.dumps(export_tools([tool(), tool("other")], format))
    assert json.dumps(export_tools([tool(), tool("other")], format)) == first
    assert json.dumps(export_tool(tool(schema=reordered), format)) == json.dumps(export_tool(tool(), format))


def test_property_order_is_kept_and_definitions_sorted() -> None:
    schema = obj(
        {"zeta": {"type": "string"}, "alpha": {"type": "string"}},
        **{"$defs": {"b": {"type": "string"}, "a": {"type": "string"}}},
    )
    parameters = export_tool(tool(schema=schema), "universal")["parameters"]
    assert list(parameters["properties"]) == ["zeta", "alpha"]
    assert list(parameters["$defs"]) == ["a", "b"]
    assert list(parameters) == ["type", "properties", "required", "additionalProperties", "$defs"]


def test_export_does_not_share_or_mutate_the_tool_schema() -> None:
    source = tool()
    exported = export_tool(source, "anthropic")
    exported["input_schema"]["properties"]["url"]["type"] = "integer"
    assert source.input_schema == STRICT_SCHEMA


@pytest.mark.parametrize("format", FORMATS)
def test_secret_values_never_appear(format: str) -> None:
    schema = {
        "type": "object",
        "properties": {
            "api_key": {"type": "string", "writeOnly": True, "default": "sk-live-SECRET1"},
            "nested": {
                "type": "object",
                "properties": {
                    "password": {
                        "type": "string",
                        "format": "password",
                        "examples": ["SECRET2"],
                        "const": "SECRET3",
                    }
                },
            },
            "mode": {"type": "string", "default": "fast"},
        },
    }
    source = tool("login", schema=schema, _meta={"token": "SECRET4"})
    text = json.dumps(export_tool(source, format))
    for secret in ("SECRET1", "SECRET2", "SECRET3", "SECRET4"):
        assert secret not in text
    assert '"writeOnly": true' in text and '"format": "password"' in text
    assert '"default": "fast"' in text  # ordinary defaults stay


# -- through a real gateway ---------------------------------------------------------


async def test_gateway_export_uses_these_formats(ts_gateway: Gateway) -> None:
    anthropic = ts_gateway.export("anthropic")
    names = [entry["name"] for entry in anthropic]
    assert "ts__echo" in names and all(NAME_RE.match(name) for name in names)
    echo = next(entry for entry in anthropic if entry["name"] == "ts__echo")
    assert echo["description"] == "Echo the text back."
    assert echo["input_schema"]["properties"]["text"]["type"] == "string"
    [responses] = ts_gateway.export("openai-responses", ["ts__search"])
    assert responses["name"] == "ts__search" and responses["strict"] is False  # `limit` is optional
    with pytest.raises(ValueError, match="valid formats"):
        ts_gateway.export("yaml")
