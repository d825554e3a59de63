"""Catalog snapshots: namespacing, conflicts, filters, aliases, description overrides, admission classes.

Backends here are in-memory fakes with fixed tool lists: the catalog logic needs no process.
"""

from __future__ import annotations

from typing import Any

import mcp_types as types
import pytest

from support.configs import config
from support.fakes import FakeBackend, tool
from toolweave.catalog import Catalog
from toolweave.composite.errors import BuildError

GITHUB_TOOLS = [
    tool("search", description="Search issues", properties={"q": {"type": "string"}}, read_only=True),
    tool("create_issue", description="Open an issue"),  # no annotations: destructive by MCP semantics
    tool("delete_repo", description="Delete a repository", destructive=True),
    tool("add_label", description="Label an issue", read_only=False, destructive=False),
    tool("get_file", description="Read a file", read_only=True),
]
DOCS_TOOLS = [tool("search", description="Search docs", read_only=True), tool("fetch", read_only=True)]


def build(
    *backends: tuple[dict[str, Any], list[types.Tool]], definitions: Any = (), **sections: Any
) -> Catalog:
    cfg = config(*(entry for entry, _ in backends), **sections)
    fakes = [FakeBackend(cfg.backend(entry["name"]), tools) for entry, tools in backends]
    return Catalog.build(cfg, fakes, list(definitions))


def listed(catalog: Catalog) -> list[str]:
    return [t.name for t in catalog.listed]


def gh(**extra: Any) -> tuple[dict[str, Any], list[types.Tool]]:
    return {"name": "gh", "command": "x", **extra}, GITHUB_TOOLS


def docs(**extra: Any) -> tuple[dict[str, Any], list[types.Tool]]:
    return {"name": "docs", "command": "x", **extra}, DOCS_TOOLS


# -- names -----------------------------------------------------------------------


def test_tools_are_namespaced_by_backend() -> None:
    catalog = build(gh(), docs())
    assert listed(catalog) == [
        "gh__search",
        "gh__create_issue",
        "gh__delete_repo",
        "gh__add_label",
        "gh__get_file",
        "docs__search",
        "docs__fetch",
    ]
    assert catalog.issues == []
    entry = catalog.get("docs__search")
    assert entry is not None and entry.backend_tool == "search" and entry.backend.name == "docs"
    assert entry.tool.name == "docs__search" and entry.tool.description == "Search docs"


LONG = "list_every_open_pull_request_waiting_for_review_in_org"  # gh__ + this: 59; vendor__ + this: 63


def test_an_exposed_name_over_max_name_length_is_shortened_deterministically_and_warned_about() -> None:
    entry = {"name": "enterprise-github-mirror", "command": "x"}
    long_tools = [tool(LONG), tool(LONG + "_too")]
    catalog = build((entry, long_tools))
    names = listed(catalog)
    assert all(len(name) <= 64 for name in names), names
    assert len(set(names)) == 2, "two long names sharing a prefix stay distinct"
    assert names == listed(build((entry, long_tools))), "the same names on every build"
    assert names[0].startswith("enterprise-github-mirror__list_every_open_pull_request")
    assert catalog.lookup(f"enterprise-github-mirror/{LONG}").name == names[0]  # references still reach it
    assert catalog.issues == [], "served, not a problem"
    warned = [str(w) for w in catalog.warnings]
    assert len(warned) == 2 and f"exposed as {names[0]!r}" in warned[0], warned
    assert "gateway.max_name_length (64)" in warned[0] and f'[backends.tools."{LONG}"]' in warned[0]


def test_max_name_length_is_a_setting_and_an_alias_silences_the_warning() -> None:
    entry = {"name": "gh", "command": "x", "tools": {LONG: {"name": "gh_review_queue"}}}
    catalog = build((entry, [tool(LONG), tool("search")]), gateway={"max_name_length": 20})
    assert listed(catalog) == ["gh_review_queue", "gh__search"] and catalog.warnings == []
    tight = build(({"name": "gh", "command": "x"}, [tool(LONG)]), gateway={"max_name_length": 20})
    assert [len(name) for name in listed(tight)] == [20] and len(tight.warnings) == 1


def test_custom_separator() -> None:
    catalog = build(gh(), gateway={"separator": "-"})
    assert "gh-search" in listed(catalog) and catalog.get("gh__search") is None


def test_references_resolve_with_slash_or_dot() -> None:
    catalog = build(gh(), docs())
    for reference in ("docs/search", "docs.search", "docs__search"):
        entry = catalog.lookup(reference)
        assert entry is not None and entry.backend.name == "docs" and entry.backend_tool == "search"
    assert catalog.lookup("nope/search") is None and catalog.lookup("docs/nope") is None
    resolved = catalog.resolve("gh/search")
    assert resolved is not None and resolved.name == "gh__search" and resolved.backend == "gh"


def test_without_namespace_tools_keep_their_names() -> None:
    catalog = build(gh(namespace=False), docs())
    assert (
        "search" in listed(catalog)
        and "docs__search" in listed(catalog)
        and "gh__search" not in listed(catalog)
    )


def test_name_conflict_names_both_sides_and_references_stay_exact() -> None:
    catalog = build(gh(namespace=False), docs(namespace=False))
    (issue,) = catalog.issues
    assert issue.subject == "search"
    assert "backend 'docs' tool 'search'" in issue.message and "backend 'gh' tool 'search'" in issue.message
    assert "alias" in issue.message  # says how to fix it
    assert listed(catalog).count("search") == 1
    assert catalog.get("search").backend.name == "gh"  # the first one keeps the name
    # `docs/search` reaches docs' tool, never gh's tool that won the exposed name
    by_ref = catalog.lookup("docs/search")
    assert by_ref is not None and by_ref.backend.name == "docs" and by_ref.hidden
    assert catalog.lookup("gh/search").backend.name == "gh"


# -- aliases and descriptions -------------------------------------------------------


def test_alias_renames_and_the_old_name_disappears() -> None:
    catalog = build(gh(tools={"search": {"name": "find_issues"}}))
    assert "find_issues" in listed(catalog) and "gh__search" not in listed(catalog)
    entry = catalog.get("find_issues")
    assert entry.backend_tool == "search" and entry.tool.name == "find_issues"
    assert catalog.lookup("gh/search") is entry


def test_alias_with_keep_original_lists_both() -> None:
    catalog = build(gh(tools={"search": {"name": "find_issues", "keep_original": True}}))
    names = listed(catalog)
    assert "find_issues" in names and "gh__search" in names
    assert catalog.get("find_issues").backend_tool == catalog.get("gh__search").backend_tool == "search"


def test_alias_that_clashes_is_a_conflict_naming_both() -> None:
    catalog = build(gh(tools={"search": {"name": "docs__search"}}), docs())
    (issue,) = catalog.issues
    assert issue.subject == "docs__search"
    assert "backend 'docs' tool 'search'" in issue.message and "backend 'gh' tool 'search'" in issue.message
    assert catalog.get("docs__search").backend.name == "gh"  # gh is declared first
    assert catalog.lookup("docs/search").backend.name == "docs"


def test_description_override() -> None:
    catalog = build(gh(tools={"search": {"description": "Find GitHub issues by keyword"}}))
    assert catalog.get("gh__search").tool.description == "Find GitHub issues by keyword"
    assert catalog.get("gh__get_file").tool.description == "Read a file"


def test_an_override_for_a_tool_the_backend_lacks_is_reported() -> None:
    catalog = build(gh(tools={"serach": {"description": "typo"}, "search": {"name": "find"}}))
    assert [str(issue) for issue in catalog.issues] == [
        "gh: tools.serach: the backend has no tool 'serach'; did you mean 'search'?"
    ]
    assert "find" in listed(catalog)


def test_alias_and_description_together() -> None:
    catalog = build(gh(tools={"search": {"name": "find", "description": "Find things"}}))
    assert catalog.get("find").tool.description == "Find things"


# -- filters -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("filters", "visible"),
    [
        ({"expose": ["search", "get_*"]}, ["gh__search", "gh__get_file"]),
        ({"hide": ["delete_*", "create_*"]}, ["gh__search", "gh__add_label", "gh__get_file"]),
        ({"hide": ["re:(create|delete)_.*"]}, ["gh__search", "gh__add_label", "gh__get_file"]),
        ({"expose": ["re:.*_(issue|repo|file)"], "hide": ["get_*"]}, ["gh__create_issue", "gh__delete_repo"]),
        ({"read_only_only": True}, ["gh__search", "gh__get_file"]),
        ({"hide_destructive": True}, ["gh__search", "gh__add_label", "gh__get_file"]),
        ({"expose": ["re:search"]}, ["gh__search"]),  # a regex must match the whole name
        ({"expose": ["re:sea"]}, []),
    ],
)
def test_filters(filters: dict[str, Any], visible: list[str]) -> None:
    catalog = build(gh(**filters))
    assert listed(catalog) == visible


def test_filters_match_backend_names_not_aliases() -> None:
    catalog = build(gh(hide=["search"], tools={"search": {"name": "find"}}))
    assert "find" not in listed(catalog)
    assert catalog.get("find").hidden


def test_hidden_tools_stay_callable_by_reference() -> None:
    catalog = build(gh(hide=["delete_*"]))
    entry = catalog.get("gh__delete_repo")
    assert entry is not None and entry.hidden
    assert "gh__delete_repo" not in listed(catalog)
    assert catalog.lookup("gh/delete_repo") is entry
    assert all(not e.hidden for e in catalog.visible())


# -- admission classes and per-tool settings ------------------------------------------------


def test_tool_classes_follow_annotations_and_promotion() -> None:
    catalog = build(gh(tools={"add_label": {"concurrent": True, "timeout": "2s", "max_concurrency": 3}}))
    classes = {e.name: e.tool_class for e in catalog.visible()}
    assert classes == {
        "gh__search": "read",
        "gh__create_issue": "serial",
        "gh__delete_repo": "serial",
        "gh__add_label": "concurrent",
        "gh__get_file": "read",
    }
    label = catalog.get("gh__add_label")
    assert (label.timeout, label.max_concurrency) == (2.0, 3)
    assert catalog.get("gh__search").timeout is None
    promoted = build(gh(concurrent=True, tools={"create_issue": {"concurrent": False}}))
    assert promoted.get("gh__delete_repo").tool_class == "concurrent"
    assert promoted.get("gh__create_issue").tool_class == "serial"
    assert promoted.get("gh__search").tool_class == "read"


def test_secret_fields_are_known_per_tool() -> None:
    secret = tool(
        "login",
        properties={
            "user": {"type": "string"},
            "password": {"type": "string", "format": "password"},
            "token": {"type": "string", "writeOnly": True},
        },
    )
    catalog = build(({"name": "auth", "command": "x"}, [secret]))
    assert catalog.get("auth__login").secrets == frozenset({"password", "token"})


# -- composites against the catalog --------------------------------------------------------


class StubComposite:
    kind = "fanout"

    def __init__(self, name: str, references: frozenset[str] = frozenset()) -> None:
        self.name = name
        self.tool = types.Tool(name=name, description="stub", input_schema={"type": "object"})
        self.references = references

    async def run(self, arguments: Any, ctx: Any) -> types.CallToolResult:
        return types.CallToolResult(content=[])


class Definition:
    kind = "fanout"

    def __init__(self, name: str, fail: str | None = None) -> None:
        self.name = name
        self.fail = fail


@pytest.fixture
def stub_builder(monkeypatch: pytest.MonkeyPatch) -> None:
    """Composite kinds are built by their own modules; here a stub stands in for them."""
    import toolweave.composite.kinds as composite

    def build_composite(definition: Definition, resolver: Any) -> StubComposite:
        if definition.fail == "build":
            raise BuildError([("tools[0]", "unknown tool 'gh/nope'")])
        if definition.fail == "crash":
            raise RuntimeError("kaboom")
        target = resolver.resolve("gh/search")
        return StubComposite(definition.name, frozenset({target.name}))

    monkeypatch.setattr(composite, "build_composite", build_composite)


@pytest.mark.usefixtures("stub_builder")
def test_composite_name_clash_names_both_sides() -> None:
    catalog = build(gh(), definitions=[Definition("gh__search"), Definition("search_all")])
    (issue,) = catalog.issues
    assert "composite tool 'gh__search'" in issue.message and "backend 'gh' tool 'search'" in issue.message
    assert catalog.get("gh__search").composite is None  # the backend tool keeps its name
    assert catalog.get("search_all").kind == "fanout"
    assert catalog.used_in == {"gh__search": ["search_all"]}


@pytest.mark.usefixtures("stub_builder")
def test_a_broken_composite_is_degraded_and_everything_else_is_served() -> None:
    catalog = build(
        gh(),
        definitions=[Definition("bad", fail="build"), Definition("worse", fail="crash"), Definition("fine")],
    )
    assert {name: [str(problem) for problem in found] for name, found in catalog.degraded.items()} == {
        "bad": ["tools[0]: unknown tool 'gh/nope'"],
        "worse": ["cannot build: kaboom"],
    }
    assert {str(issue) for issue in catalog.issues} == {
        "bad: tools[0]: unknown tool 'gh/nope'",
        "worse: cannot build: kaboom",
    }
    assert "fine" in listed(catalog) and "bad" not in listed(catalog) and "gh__search" in listed(catalog)


def test_search_index_only_in_search_mode() -> None:
    assert build(gh()).index is None
    catalog = build(gh(hide=["delete_*"]), gateway={"tool_exposure": "search"})
    assert catalog.index is not None
    assert [t.name for t in catalog.index.tools] == listed(catalog)  # hidden tools are not searchable
