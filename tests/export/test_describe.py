"""The mini-prompt description writer (seed 002 §4.5): deterministic, generated from the parts."""

from __future__ import annotations

from typing import Any

import pytest

from support.configs import parse_composite_def
from support.fakes import FakeCatalog, tool
from toolweave.composite.fanout.build import build_fanout
from toolweave.composite.router.build import build_router
from toolweave.export.describe import (
    FULL_DESCRIPTION_CHARS,
    ParamUsage,
    PartDoc,
    describe_fanout,
    describe_router,
    is_complete_description,
    mini_prompt,
    opening,
    output_fields,
    parameter_line,
    summary_of,
    type_text,
)

SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "url": {"type": "string", "description": "The full URL to scrape"},
        "format": {"type": "string", "enum": ["markdown", "html", "text"], "default": "markdown"},
        "include_metadata": {"type": "boolean", "description": "Whether to include page metadata."},
    },
    "required": ["url"],
}
OPERATIONS = [
    PartDoc(
        "linkedin-scraper", "Scrape a LinkedIn profile. Needs a public profile.", title="LinkedIn Scraper"
    ),
    PartDoc("generic", "Scrape any web page.", note="used when no rule matches"),
]
USAGE = {
    "url": ParamUsage(("linkedin-scraper", "generic"), ("linkedin-scraper", "generic")),
    "format": ParamUsage(("generic",)),
    "include_metadata": ParamUsage(("generic",), ("generic",)),
}


def router_text(
    description: str = "Scrape any URL with the best scraper for its site.", **options: Any
) -> str:
    arguments: dict[str, Any] = {
        "name": "smart_scraper",
        "agent_driven": False,
        "input_schema": SCHEMA,
        "operations": OPERATIONS,
        "usage": USAGE,
    }
    arguments.update(options)
    return describe_router(description, **arguments)


def test_router_mini_prompt() -> None:
    assert router_text() == (
        "Use this tool to scrape any URL with the best scraper for its site.\n"
        "\n"
        "# Operations (picked automatically from the input):\n"
        "- linkedin-scraper (LinkedIn Scraper): Scrape a LinkedIn profile.\n"
        "- generic: Scrape any web page. (used when no rule matches)\n"
        "\n"
        "# Required inputs (always include these):\n"
        "- url (string): The full URL to scrape.\n"
        "\n"
        "# Optional inputs (include when relevant):\n"
        '- format (string; one of: "markdown", "html", "text"; default: "markdown"): Only used by: generic.\n'
        "- include_metadata (boolean): Whether to include page metadata. Only used by: generic. "
        "Required by: generic.\n"
        "\n"
        "# What the tool outputs:\n"
        "Returns the result of the operation that ran, as that operation returns it."
    )


def test_agent_driven_heading_and_output_fields() -> None:
    text = router_text(agent_driven=True, output_fields={"content": "Page content.", "source_url": ""})
    assert "# Operations (set `operation` to one of these):" in text
    assert text.endswith("Its structured data has these fields:\n- content: Page content.\n- source_url")


def test_deterministic() -> None:
    assert router_text() == router_text()
    reordered_usage = dict(reversed(list(USAGE.items())))
    assert router_text(usage=reordered_usage) == router_text()


def test_complete_descriptions_are_kept_verbatim() -> None:
    long = "x" * FULL_DESCRIPTION_CHARS
    assert router_text(long) == long
    written = "Use this tool to scrape.\n\n# Required inputs (always include these):\n- url: the URL"
    assert router_text(f"  {written}\n") == written
    assert not is_complete_description("x" * (FULL_DESCRIPTION_CHARS - 1))
    assert is_complete_description("# Optional inputs\n- a")


@pytest.mark.parametrize(
    ("description", "expected"),
    [
        ("Search across all knowledge sources", "Use this tool to search across all knowledge sources."),
        ("Scrape a page.", "Use this tool to scrape a page."),
        ("GitHub search, issues and code", "GitHub search, issues and code."),
        ("URL-aware scraping", "URL-aware scraping."),
        ("Searches every backend", "Searches every backend."),
        ("A router for scrapers", "A router for scrapers."),
        ("Use this tool to fetch things", "Use this tool to fetch things."),
        ("  Access   the\nwiki  ", "Use this tool to access the wiki."),
        ("", "Use this tool to do the thing."),
        ("Ask?", "Use this tool to ask?"),
        ("What time it is anywhere", "What time it is anywhere."),
        ("How long the route takes", "How long the route takes."),
        ("Current weather by city", "Current weather by city."),
        ("For every page, a summary", "For every page, a summary."),
    ],
)
def test_opening(description: str, expected: str) -> None:
    assert opening(description, "do the thing") == expected


def test_fallback_openings() -> None:
    assert router_text("").startswith(
        "Use this tool to run smart_scraper: it picks the right operation for the input automatically."
    )
    assert router_text("", agent_driven=True).startswith(
        "Use this tool to run one of the smart_scraper operations; you choose which with `operation`."
    )


def test_summary_of() -> None:
    assert summary_of("First sentence. Second one.") == "First sentence."
    assert summary_of("  spread\n over\tlines ") == "spread over lines"
    assert summary_of(None) == ""
    long = "word " * 100
    summary = summary_of(long)
    assert len(summary) == 200 and summary.endswith("…")
    assert summary_of("v1.2 is out. More.") == "v1.2 is out."


@pytest.mark.parametrize(
    ("prop", "expected"),
    [
        ({"type": "string"}, "string"),
        ({"type": ["string", "integer"]}, "string or integer"),
        ({"type": "array", "items": {"type": "integer"}}, "array of integer"),
        ({"type": "array"}, "array"),
        ({"anyOf": [{"type": "string"}, {"type": "null"}]}, "string or null"),
        ({"$ref": "#/$defs/Point"}, "object"),
        ({}, ""),
    ],
)
def test_type_text(prop: dict[str, Any], expected: str) -> None:
    assert type_text(prop) == expected


def test_parameter_line() -> None:
    assert parameter_line("q", {}) == "- q"
    assert parameter_line("q", {"description": "Query"}) == "- q: Query."
    assert parameter_line("n", {"type": "integer", "default": 10}, "Only used by: a.") == (
        "- n (integer; default: 10): Only used by: a."
    )


def test_no_inputs() -> None:
    text = mini_prompt("Use this tool.", {"type": "object", "properties": {}})
    assert text == "Use this tool.\n\n# Inputs:\nThis tool takes no inputs."


def test_output_fields_keep_the_longest_description() -> None:
    fields = output_fields(
        [
            {"properties": {"content": {"description": "Text."}, "meta": {}}},
            None,
            {"properties": {"content": {"description": "The main page content."}}},
        ]
    )
    assert fields == {"content": "The main page content.", "meta": ""}


def test_fanout_mini_prompt() -> None:
    targets = [
        PartDoc("github__search", "Search GitHub."),
        PartDoc("docs__search", note="called with its own arguments"),
    ]
    schema = {"type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}
    usage = {"query": ParamUsage(("github__search", "docs__search"), ("github__search", "docs__search"))}
    text = describe_fanout(
        "Search everything", strategy="parallel", input_schema=schema, targets=targets, usage=usage
    )
    assert text.startswith(
        "Use this tool to search everything.\n\n# Targets (all are called at once with the inputs):\n"
    )
    assert "- github__search: Search GitHub.\n- docs__search: called with its own arguments" in text
    assert "- query (string)\n" in text
    assert "structuredContent.results" in text
    first = describe_fanout(
        "Search", strategy="first_success", input_schema=schema, targets=targets, usage=usage
    )
    assert "the first successful result is returned" in first


# -- the builders use it -------------------------------------------------------------------


def test_router_and_fanout_list_the_mini_prompt_deterministically() -> None:
    def catalog() -> FakeCatalog:
        return FakeCatalog(
            [
                tool(
                    "li__profile",
                    {"profile_url": {"type": "string", "description": "Profile URL."}},
                    ["profile_url"],
                    description="Scrape a LinkedIn profile.",
                ),
                tool(
                    "fc__scrape",
                    {"url": {"type": "string"}, "format": {"type": "string", "enum": ["md"]}},
                    ["url"],
                    description="Scrape any page.",
                ),
            ]
        )

    router_def = parse_composite_def(
        {
            "name": "scrape",
            "description": "Scrape any URL.",
            "operations": [
                {"slug": "li", "tool": "li/profile", "parameter_mapping": {"url": "profile_url"}},
                {"slug": "generic", "tool": "fc/scrape"},
            ],
            "default_operation": "generic",
        }
    )
    first = build_router(router_def, catalog()).tool.description
    second = build_router(router_def, catalog()).tool.description
    assert first == second
    assert first is not None and first.startswith("Use this tool to scrape any URL.")
    assert "- li: Scrape a LinkedIn profile." in first
    assert "- url (string): Profile URL." in first
    assert '- format (string; one of: "md"): Only used by: generic.' in first

    fan_def = parse_composite_def({"name": "both", "tools": ["li/profile", "fc/scrape"]})
    fan_text = build_fanout(fan_def, catalog()).tool.description
    assert fan_text == build_fanout(fan_def, catalog()).tool.description
    assert fan_text is not None and fan_text.startswith("Use this tool to call 2 tools with the same inputs")

    long_def = parse_composite_def({"name": "both", "tools": ["li/profile"], "description": "Mine. " * 60})
    assert build_fanout(long_def, catalog()).tool.description == ("Mine. " * 60).strip()
