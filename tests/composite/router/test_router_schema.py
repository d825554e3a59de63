"""The router's unified input schema (seed 002 §4.4) and build-time checks against the catalog."""

from __future__ import annotations

from typing import Any

import pytest

from support.configs import parse_composite_def
from support.fakes import FakeCatalog, tool
from toolweave.composite.errors import BuildError
from toolweave.composite.router.build import build_router
from toolweave.composite.router.schema import exposed_parameters, merge_property


def scraper_catalog() -> FakeCatalog:
    return FakeCatalog(
        [
            tool(
                "linkedin__scrape_profile",
                {
                    "profile_url": {"type": "string", "description": "LinkedIn profile URL."},
                    "format": {"type": "string", "enum": ["json"]},
                },
                ["profile_url"],
                read_only=True,
                description="Scrape a LinkedIn profile. Needs a public profile.",
            ),
            tool(
                "reddit__fetch_post",
                {"reddit_url": {"type": "string", "description": "The full URL of a Reddit post to fetch."}},
                ["reddit_url"],
                read_only=True,
            ),
            tool(
                "firecrawl__scrape",
                {
                    "url": {"type": "string", "description": "The URL to scrape"},
                    "format": {"type": "string", "enum": ["markdown", "html", "json"], "default": "markdown"},
                    "include_metadata": {
                        "type": "boolean",
                        "description": "Whether to include page metadata.",
                    },
                },
                ["url"],
                read_only=True,
                description="Scrape any web page.",
            ),
        ]
    )


def scraper(**overrides: Any) -> Any:
    definition: dict[str, Any] = {
        "name": "smart_scraper",
        "description": "Scrape any URL with the best scraper for its site.",
        "operations": [
            {
                "slug": "linkedin-scraper",
                "tool": "linkedin/scrape_profile",
                "parameter_mapping": {"url": "profile_url"},
            },
            {
                "slug": "reddit-scraper",
                "tool": "reddit/fetch_post",
                "parameter_mapping": {"url": "reddit_url"},
            },
            {"slug": "generic", "tool": "firecrawl/scrape"},
        ],
        "rules": [
            {
                "condition": {"type": "contains", "field": "url", "value": "linkedin.com"},
                "operation": "linkedin-scraper",
            },
            {
                "condition": {"type": "contains", "field": "url", "value": "reddit.com"},
                "operation": "reddit-scraper",
            },
        ],
        "default_operation": "generic",
    }
    definition.update(overrides)
    return parse_composite_def(definition)


def build(definition: Any, catalog: FakeCatalog | None = None):
    return build_router(definition, catalog or scraper_catalog())


def test_merged_schema_unites_properties_through_mappings() -> None:
    schema = build(scraper()).tool.input_schema
    assert list(schema["properties"]) == ["url", "format", "include_metadata"]
    url = schema["properties"]["url"]
    assert url["type"] == "string"
    assert url["description"] == "The full URL of a Reddit post to fetch."  # the longest
    assert schema["properties"]["format"]["enum"] == ["json", "markdown", "html"]  # union, first-seen order
    assert schema["properties"]["format"]["default"] == "markdown"
    assert schema["required"] == ["url"]  # every operation requires it (through its mapping)


def test_required_strategy_all_is_the_default() -> None:
    definition = scraper(
        operations=[
            {"slug": "linkedin-scraper", "tool": "linkedin/scrape_profile"},
            {"slug": "generic", "tool": "firecrawl/scrape"},
        ],
        rules=[{"condition": {"type": "exists", "field": "profile_url"}, "operation": "linkedin-scraper"}],
    )
    schema = build(definition).tool.input_schema
    assert "required" not in schema  # profile_url and url are each required by one operation only


def test_required_strategy_any() -> None:
    definition = scraper(
        operations=[
            {"slug": "linkedin-scraper", "tool": "linkedin/scrape_profile"},
            {"slug": "generic", "tool": "firecrawl/scrape"},
        ],
        rules=[{"condition": {"type": "exists", "field": "profile_url"}, "operation": "linkedin-scraper"}],
        required_strategy="any",
    )
    assert build(definition).tool.input_schema["required"] == ["profile_url", "url"]


def test_agent_driven_adds_a_required_operation_enum_first() -> None:
    definition = scraper(routing="agent_driven", rules=[], default_operation=None)
    schema = build(definition).tool.input_schema
    assert next(iter(schema["properties"])) == "operation"
    assert schema["properties"]["operation"]["enum"] == ["linkedin-scraper", "reddit-scraper", "generic"]
    assert schema["properties"]["operation"]["type"] == "string"
    assert schema["required"] == ["operation", "url"]


def test_explicit_schema_is_used_as_given() -> None:
    explicit = {
        "type": "object",
        "properties": {"url": {"type": "string", "description": "Mine."}},
        "required": ["url"],
    }
    composite = build(scraper(input_schema=explicit))
    assert composite.tool.input_schema == explicit


def test_explicit_schema_gets_the_selector_for_agent_driven() -> None:
    explicit = {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]}
    schema = build(
        scraper(input_schema=explicit, routing="agent_driven", rules=[], default_operation=None)
    ).tool.input_schema
    assert list(schema["properties"]) == ["operation", "url"]
    assert schema["required"] == ["operation", "url"]
    assert explicit == {"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]}


def test_fixed_arguments_are_hidden_from_the_unified_schema() -> None:
    definition = scraper(
        operations=[{"slug": "generic", "tool": "firecrawl/scrape", "arguments": {"format": "html"}}],
        rules=[],
    )
    assert list(build(definition).tool.input_schema["properties"]) == ["url", "include_metadata"]


def test_merge_property_types_enums_descriptions() -> None:
    assert merge_property({"type": "string"}, {"type": "integer"})["type"] == ["string", "integer"]
    assert "type" not in merge_property({"type": "string"}, {"description": "anything"})
    assert "enum" not in merge_property({"type": "string", "enum": ["a"]}, {"type": "string"})
    merged = merge_property(
        {"description": "short", "format": "uri"}, {"description": "much longer", "format": "email"}
    )
    assert merged == {"description": "much longer", "format": "uri"}
    first = {"type": "string", "enum": ["a"]}
    merge_property(first, {"type": "string", "enum": ["b"]})
    assert first == {"type": "string", "enum": ["a"]}  # inputs are never mutated


def test_exposed_parameters() -> None:
    schema = {"type": "object", "properties": {"profile_url": {}, "url": {}, "mode": {}, "operation": {}}}
    pairs = exposed_parameters(schema, {"url": "profile_url"}, {"mode": "fast"}, selector="operation")
    # `url` of the tool is shadowed by the unified `url`, `mode` is fixed, `operation` is the selector
    assert pairs == (("url", "profile_url"),)
    assert exposed_parameters(schema, {}, {}, selector=None) == (
        ("profile_url", "profile_url"),
        ("url", "url"),
        ("mode", "mode"),
        ("operation", "operation"),
    )


def test_defs_are_united_so_refs_still_resolve() -> None:
    shared = {"Point": {"type": "object", "properties": {"x": {"type": "number"}}}}
    catalog = FakeCatalog(
        [
            tool("a__one", {"p": {"$ref": "#/$defs/Point"}}, extra={"$defs": shared}),
            tool("b__two", {"p": {"$ref": "#/$defs/Point"}}, extra={"$defs": shared}),
        ]
    )
    definition = parse_composite_def(
        {
            "name": "r",
            "operations": [{"slug": "one", "tool": "a/one"}, {"slug": "two", "tool": "b/two"}],
            "default_operation": "one",
        }
    )
    assert build(definition, catalog).tool.input_schema["$defs"] == shared


def test_conflicting_defs_are_a_build_error() -> None:
    catalog = FakeCatalog(
        [
            tool("a__one", {"p": {"$ref": "#/$defs/Point"}}, extra={"$defs": {"Point": {"type": "string"}}}),
            tool("b__two", {"p": {"$ref": "#/$defs/Point"}}, extra={"$defs": {"Point": {"type": "number"}}}),
        ]
    )
    definition = parse_composite_def(
        {
            "name": "r",
            "operations": [{"slug": "one", "tool": "a/one"}, {"slug": "two", "tool": "b/two"}],
            "default_operation": "one",
        }
    )
    with pytest.raises(BuildError) as caught:
        build(definition, catalog)
    assert caught.value.issues[0][0] == "operations[1].tool"
    assert "$defs/Point" in caught.value.issues[0][1]


# -- build errors ------------------------------------------------------------------------


def test_unknown_tool_reference_names_path_and_reference() -> None:
    definition = scraper()
    catalog = FakeCatalog([t for t in scraper_catalog().tools.values() if t.name != "reddit__fetch_post"])
    with pytest.raises(BuildError) as caught:
        build(definition, catalog)
    assert caught.value.issues == [("operations[1].tool", "unknown tool 'reddit/fetch_post'")]


def test_every_unknown_reference_is_reported() -> None:
    with pytest.raises(BuildError) as caught:
        build(scraper(), FakeCatalog())
    assert [path for path, _ in caught.value.issues] == [
        "operations[0].tool",
        "operations[1].tool",
        "operations[2].tool",
    ]


def test_composite_targets_are_rejected() -> None:
    catalog = scraper_catalog()
    catalog.composites["firecrawl__scrape"] = "fanout"
    with pytest.raises(BuildError) as caught:
        build(scraper(), catalog)
    path, message = caught.value.issues[0]
    assert path == "operations[2].tool"
    assert "routers and fan-outs target backend tools only" in message


def test_mapping_onto_a_parameter_the_tool_lacks() -> None:
    definition = scraper(
        operations=[
            {
                "slug": "linkedin-scraper",
                "tool": "linkedin/scrape_profile",
                "parameter_mapping": {"url": "profile_uri"},
            },
            {"slug": "generic", "tool": "firecrawl/scrape", "arguments": {"colour": "red"}},
        ],
        rules=[],
    )
    with pytest.raises(BuildError) as caught:
        build(definition)
    assert [path for path, _ in caught.value.issues] == [
        "operations[0].parameter_mapping.url",
        "operations[1].arguments.colour",
    ]
    assert "linkedin__scrape_profile has no parameter 'profile_uri'" in caught.value.issues[0][1]


def test_mapping_onto_unlisted_parameter_is_fine_when_the_tool_accepts_extras() -> None:
    catalog = FakeCatalog([tool("x__open", {"a": {"type": "string"}}, extra={"additionalProperties": True})])
    definition = parse_composite_def(
        {
            "name": "r",
            "operations": [{"slug": "o", "tool": "x/open", "parameter_mapping": {"q": "query"}}],
            "default_operation": "o",
        }
    )
    schema = build(definition, catalog).tool.input_schema
    assert list(schema["properties"]) == ["a", "q"]


def test_rule_on_a_field_the_schema_lacks() -> None:
    definition = scraper(
        rules=[
            {
                "condition": {"type": "contains", "field": "uri", "value": "linkedin.com"},
                "operation": "linkedin-scraper",
            },
            {
                "condition": {"type": "not", "condition": {"type": "exists", "field": "url.host"}},
                "operation": "generic",
            },
        ]
    )
    with pytest.raises(BuildError) as caught:
        build(definition)
    assert caught.value.issues == [
        (
            "rules[0].condition.field",
            "'uri' is not a parameter of the unified input schema (url, format, include_metadata)",
        )
    ]


def test_static_issues_are_build_errors_too() -> None:
    """A definition that skipped the loader (built directly) is still checked."""
    definition = scraper().model_copy(update={"default_operation": "nope"})
    with pytest.raises(BuildError) as caught:
        build(definition)
    assert caught.value.issues[0][0] == "default_operation"


def test_agent_driven_operation_that_needs_its_own_operation_parameter() -> None:
    catalog = FakeCatalog([tool("k__apply", {"operation": {"type": "string"}}, ["operation"])])
    base = {"name": "r", "routing": "agent_driven", "operations": [{"slug": "apply", "tool": "k/apply"}]}
    with pytest.raises(BuildError) as caught:
        build(parse_composite_def(base), catalog)
    assert caught.value.issues[0][0] == "operations[0]"
    mapped = {
        **base,
        "operations": [{"slug": "apply", "tool": "k/apply", "parameter_mapping": {"action": "operation"}}],
    }
    schema = build(parse_composite_def(mapped), catalog).tool.input_schema
    assert list(schema["properties"]) == ["operation", "action"]
    assert schema["required"] == ["operation", "action"]


def test_tool_metadata() -> None:
    composite = build(scraper(title="Smart scraper", meta={"team": "web"}))
    assert composite.kind == "router"
    assert composite.name == "smart_scraper"
    assert composite.tool.name == "smart_scraper"
    assert composite.tool.title == "Smart scraper"
    assert composite.tool.meta == {"team": "web"}
    assert composite.references == frozenset(
        {"linkedin__scrape_profile", "reddit__fetch_post", "firecrawl__scrape"}
    )


def test_shared_output_schema_is_listed_only_when_every_operation_has_it() -> None:
    out = {"type": "object", "properties": {"content": {"type": "string", "description": "Page content."}}}
    same = FakeCatalog(
        [tool("a__x", {"u": {}}, output_schema=out), tool("b__y", {"u": {}}, output_schema=out)]
    )
    differ = FakeCatalog([tool("a__x", {"u": {}}, output_schema=out), tool("b__y", {"u": {}})])
    definition = parse_composite_def(
        {
            "name": "r",
            "operations": [{"slug": "x", "tool": "a/x"}, {"slug": "y", "tool": "b/y"}],
            "default_operation": "x",
        }
    )
    assert build(definition, same).tool.output_schema == out
    assert build(definition, differ).tool.output_schema is None
    assert "- content: Page content." in (build(definition, same).tool.description or "")


def test_renamed_parameters_drop_their_generated_title() -> None:
    catalog = FakeCatalog(
        [
            tool("li__p", {"profile_url": {"type": "string", "title": "Profile Url"}}, ["profile_url"]),
            tool("fc__s", {"url": {"type": "string", "title": "Url"}}, ["url"]),
        ]
    )
    definition = parse_composite_def(
        {
            "name": "r",
            "operations": [
                {"slug": "li", "tool": "li/p", "parameter_mapping": {"link": "profile_url"}},
                {"slug": "fc", "tool": "fc/s"},
            ],
            "default_operation": "fc",
        }
    )
    properties = build(definition, catalog).tool.input_schema["properties"]
    assert properties == {"link": {"type": "string"}, "url": {"type": "string", "title": "Url"}}
