"""Search mode's index: BM25 over names, titles, descriptions and parameter names."""

from __future__ import annotations

from support.fakes import tool
from toolweave.catalog.search import ToolIndex, tokenize

TOOLS = [
    tool(
        "time__get_current_time",
        description="Get current time in a specific timezone",
        properties={"timezone": {"type": "string"}},
    ),
    tool(
        "time__convert_time",
        description="Convert time between timezones",
        properties={"source_timezone": {}, "time": {}, "target_timezone": {}},
    ),
    tool("gh__search_issues", description="Search GitHub issues by keyword", properties={"query": {}}),
    tool("gh__listPullRequests", description="List open pull requests of a repository"),
    tool("docs__search", description="Full-text search over the documentation", properties={"query": {}}),
    tool("weather__forecast", description="Weather forecast for a city", properties={"city": {}}),
]


def ranked(query: str, limit: int = 10) -> list[str]:
    return [t.name for t in ToolIndex(TOOLS).search(query, limit)]


def test_tokenize_splits_snake_and_camel_case() -> None:
    assert tokenize("gh__listPullRequests") == ["gh", "list", "pull", "requests"]
    assert tokenize("get_current_time v2") == ["get", "current", "time", "v2"]
    assert tokenize("HTTPServer") == ["httpserver"]


def test_best_match_first() -> None:
    assert ranked("convert a time between timezones")[0] == "time__convert_time"
    assert ranked("weather in a city")[0] == "weather__forecast"
    assert ranked("pull requests")[0] == "gh__listPullRequests"
    assert ranked("current time")[0] == "time__get_current_time"


def test_names_weigh_more_than_descriptions() -> None:
    # both mention "search"; docs__search has it in its (short) name
    assert ranked("search")[:2] == ["docs__search", "gh__search_issues"]


def test_parameter_names_are_searchable() -> None:
    assert ranked("city") == ["weather__forecast"]


def test_no_match_and_limit() -> None:
    assert ranked("kubernetes deployment") == []
    assert len(ranked("time", limit=1)) == 1
    assert ranked("", limit=2) == ["time__get_current_time", "time__convert_time"]  # empty query: first tools


def test_rare_terms_rank_above_common_ones() -> None:
    # alone, "search" prefers docs__search; "keyword" (in one tool only) tips it to gh__search_issues
    assert ranked("search keyword")[0] == "gh__search_issues"


def test_empty_index() -> None:
    assert ToolIndex([]).search("anything") == []
