"""Fan-out: strategies, order, timeouts, cancellation, templated arguments, results, schemas."""

from __future__ import annotations

import asyncio
from typing import Any

import mcp_types as types
import pytest

from support.configs import parse_composite_def
from support.fakes import FakeCalls, FakeCatalog, echo, failing, structured, tool
from support.results import meta, sections
from toolweave.composite.base import RunContext
from toolweave.composite.errors import BuildError
from toolweave.composite.fanout.build import build_fanout
from toolweave.composite.fanout.run import OUTPUT_SCHEMA, FanoutComposite
from toolweave.results import result_to_dict


def catalog() -> FakeCatalog:
    return FakeCatalog(
        [
            tool(
                "github__search",
                {
                    "query": {"type": "string", "description": "What to look for."},
                    "limit": {"type": "integer"},
                },
                ["query"],
                read_only=True,
                description="Search GitHub issues and code.",
            ),
            tool(
                "docs__search",
                {
                    "query": {"type": "string", "description": "Search terms for the docs."},
                    "limit": {"type": "number"},
                },
                ["query"],
                read_only=True,
            ),
            tool(
                "jira__search",
                {"query": {"type": "string"}, "project": {"type": "string"}},
                ["query", "project"],
                read_only=True,
            ),
            tool("github__create_issue", {"title": {"type": "string"}}, ["title"]),
        ]
    )


def fanout(definition: dict[str, Any], tools: FakeCatalog | None = None) -> FanoutComposite:
    base = {"name": "search_all", "description": "Search across all knowledge sources"}
    return build_fanout(parse_composite_def({**base, **definition}), tools or catalog())


SEARCHES = ["github/search", "docs/search", "jira/search"]
NAMES = ["github__search", "docs__search", "jira__search"]


# -- running ---------------------------------------------------------------------------


async def test_parallel_targets_overlap() -> None:
    backend = FakeCalls(default=echo, delays={name: 0.05 for name in NAMES})
    result = await fanout({"tools": SEARCHES}).run({"query": "q"}, backend.context())
    assert not result.is_error
    assert backend.max_active == 3  # all three were in flight together
    assert sorted(name for name, _ in backend.calls) == sorted(NAMES)
    assert all(arguments == {"query": "q"} for _, arguments in backend.calls)


async def test_sequential_runs_one_at_a_time_in_declared_order() -> None:
    backend = FakeCalls(default=echo, delays={name: 0.01 for name in NAMES})
    result = await fanout({"tools": SEARCHES, "strategy": "sequential"}).run(
        {"query": "q"}, backend.context()
    )
    assert backend.max_active == 1
    assert backend.started == NAMES
    assert [entry["tool"] for entry in meta(result)["targets"]] == NAMES


async def test_completion_order_is_the_default() -> None:
    backend = FakeCalls(
        default=echo, delays={"github__search": 0.06, "docs__search": 0.0, "jira__search": 0.03}
    )
    result = await fanout({"tools": SEARCHES}).run({"query": "q"}, backend.context())
    order = ["docs__search", "jira__search", "github__search"]
    assert [entry["tool"] for entry in result.structured_content["results"]] == order
    assert [entry["tool"] for entry in meta(result)["targets"]] == order
    assert sections(result)[0] == "## docs__search"


async def test_declared_order() -> None:
    backend = FakeCalls(
        default=echo, delays={"github__search": 0.06, "docs__search": 0.0, "jira__search": 0.03}
    )
    result = await fanout({"tools": SEARCHES, "order": "declared"}).run({"query": "q"}, backend.context())
    assert [entry["tool"] for entry in result.structured_content["results"]] == NAMES


async def test_result_shape_per_spec() -> None:
    backend = FakeCalls(
        default=echo,
        responders={
            "github__search": structured({"hits": 2}, "two hits"),
            "docs__search": failing("docs down"),
        },
    )
    result = await fanout({"tools": SEARCHES[:2], "order": "declared"}).run({"query": "q"}, backend.context())
    assert result.is_error  # one target failed ...
    assert sections(result) == [
        "## github__search",
        "two hits",
        "## docs__search (failed)",
        "docs down",
    ]  # ... results kept
    assert len(result.content) == 1, "one text item: clients that keep only the first see every target"
    # each target's text once: a structured result's text is not repeated in structuredContent
    assert result.structured_content == {
        "results": [
            {"tool": "github__search", "isError": False, "structuredContent": {"hits": 2}},
            {"tool": "docs__search", "isError": True, "structuredContent": None, "text": "docs down"},
        ]
    }
    found = meta(result)
    assert found["kind"] == "fanout"
    assert [(t["tool"], t["isError"], t["status"]) for t in found["targets"]] == [
        ("github__search", False, "completed"),
        ("docs__search", True, "failed"),
    ]
    assert all(isinstance(t["latency_ms"], float) and t["latency_ms"] >= 0 for t in found["targets"])
    wire = result_to_dict(result)
    assert wire["structuredContent"]["results"][1]["isError"] is True


async def test_non_text_items_follow_the_one_text_item_in_target_order() -> None:
    picture = types.ImageContent(type="image", data="aGk=", mime_type="image/png")

    def with_picture(_name: str, _arguments: dict[str, Any]) -> types.CallToolResult:
        return types.CallToolResult(content=[types.TextContent(type="text", text="a chart"), picture])

    backend = FakeCalls(default=echo, responders={"docs__search": with_picture})
    result = await fanout({"tools": SEARCHES[:2], "order": "declared"}).run({"query": "q"}, backend.context())
    assert [item.type for item in result.content] == ["text", "image"]
    assert sections(result)[2:] == ["## docs__search", "a chart"]
    assert result.structured_content["results"][1] == {
        "tool": "docs__search",
        "isError": False,
        "structuredContent": None,
        "text": "a chart",
    }


async def test_structured_content_matches_the_listed_output_schema() -> None:
    import jsonschema

    composite = fanout({"tools": SEARCHES})
    result = await composite.run(
        {"query": "q"}, FakeCalls(default=echo, responders={"docs__search": failing()}).context()
    )
    assert composite.tool.output_schema == OUTPUT_SCHEMA
    jsonschema.validate(result.structured_content, OUTPUT_SCHEMA)


async def test_timeout_turns_a_target_into_an_error_item() -> None:
    backend = FakeCalls(default=echo, delays={"github__search": 5.0})
    composite = fanout(
        {
            "targets": [{"tool": "github/search", "timeout": "50ms"}, {"tool": "docs/search"}],
            "order": "declared",
        }
    )
    result = await composite.run({"query": "q"}, backend.context())
    assert result.is_error
    assert sections(result) == [
        "## github__search (failed)",
        "timed out after 0.05s",
        "## docs__search",
        sections(result)[3],
    ]
    assert meta(result)["targets"][0]["status"] == "timed_out"
    assert backend.cancelled == ["github__search"]


async def test_definition_timeout_is_the_default_per_target() -> None:
    backend = FakeCalls(default=echo, delays={"github__search": 5.0, "docs__search": 5.0})
    composite = fanout(
        {"targets": [{"tool": "github/search"}, {"tool": "docs/search", "timeout": 0.02}], "timeout": "30ms"}
    )
    result = await composite.run({"query": "q"}, backend.context())
    messages = sorted(sections(result)[1::2])
    assert messages == ["timed out after 0.02s", "timed out after 0.03s"]


async def test_a_timeout_error_raised_by_the_call_itself_is_a_failure_not_a_timeout() -> None:
    async def call(_name: str, _arguments: dict[str, Any]) -> types.CallToolResult:
        raise TimeoutError("backend said so")

    composite = fanout({"targets": [{"tool": "github/search", "timeout": 10}]})
    result = await composite.run({"query": "q"}, RunContext(call=call))
    assert meta(result)["targets"][0]["status"] == "failed"
    assert "backend said so" in sections(result)[1]


async def test_a_raising_call_becomes_an_error_item() -> None:
    async def call(name: str, _arguments: dict[str, Any]) -> types.CallToolResult:
        if name == "docs__search":
            raise RuntimeError("socket closed")
        return types.CallToolResult(content=[])

    result = await fanout({"tools": SEARCHES[:2], "order": "declared"}).run(
        {"query": "q"}, RunContext(call=call)
    )
    assert result.is_error
    assert sections(result) == [
        "## github__search",
        "## docs__search (failed)",
        "calling docs__search failed: socket closed",
    ]


async def test_first_success_returns_the_winner_and_cancels_the_rest() -> None:
    backend = FakeCalls(
        default=echo,
        delays={"github__search": 0.01, "docs__search": 0.02, "jira__search": 5.0},
        responders={"github__search": failing("rate limited")},
    )
    result = await fanout({"tools": SEARCHES, "strategy": "first_success"}).run(
        {"query": "q"}, backend.context()
    )
    assert not result.is_error
    assert sections(result)[0] == "## docs__search"
    assert [entry["tool"] for entry in result.structured_content["results"]] == ["docs__search"]
    assert backend.cancelled == ["jira__search"]
    statuses = {entry["tool"]: entry["status"] for entry in meta(result)["targets"]}
    assert statuses == {"github__search": "failed", "docs__search": "completed", "jira__search": "cancelled"}


async def test_first_success_when_all_fail() -> None:
    backend = FakeCalls(default=echo, responders={name: failing(f"{name} down") for name in NAMES})
    result = await fanout({"tools": SEARCHES, "strategy": "first_success", "order": "declared"}).run(
        {"query": "q"}, backend.context()
    )
    assert result.is_error
    assert sections(result)[1::2] == [f"{name} down" for name in NAMES]


async def test_cancelling_the_call_cancels_every_target() -> None:
    backend = FakeCalls(default=echo, delays={name: 5.0 for name in NAMES})
    task = asyncio.create_task(fanout({"tools": SEARCHES}).run({"query": "q"}, backend.context()))
    await backend.wait_started(3)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert sorted(backend.cancelled) == sorted(NAMES)
    assert backend.active == 0
    leftover = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
    assert leftover == []


async def test_progress_is_reported_as_each_target_finishes() -> None:
    reports: list[tuple[float, float | None, str | None]] = []

    async def progress(done: float, total: float | None, message: str | None) -> None:
        reports.append((done, total, message))

    backend = FakeCalls(default=echo, delays={"github__search": 0.02}, responders={"docs__search": failing()})
    await fanout({"tools": SEARCHES[:2]}).run({"query": "q"}, backend.context(progress=progress))
    assert reports == [(1.0, 2.0, "docs__search failed"), (2.0, 2.0, "github__search completed")]


async def test_a_broken_progress_channel_does_not_fail_the_call() -> None:
    async def progress(_done: float, _total: float | None, _message: str | None) -> None:
        raise ConnectionError("client went away")

    result = await fanout({"tools": SEARCHES}).run(
        {"query": "q"}, FakeCalls(default=echo).context(progress=progress)
    )
    assert not result.is_error


async def test_arguments_are_copied_per_target() -> None:
    def mutate(name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        arguments["query"] = f"changed by {name}"
        return types.CallToolResult(content=[])

    backend = FakeCalls(default=echo, responders={"github__search": mutate}, delays={"docs__search": 0.01})
    call_arguments = {"query": "q"}
    await fanout({"tools": SEARCHES[:2]}).run(call_arguments, backend.context())
    assert dict(backend.calls)["docs__search"] == {"query": "q"}
    assert call_arguments == {"query": "q"}


# -- templated arguments -------------------------------------------------------------------


async def test_fixed_and_templated_arguments() -> None:
    backend = FakeCalls(default=echo)
    composite = fanout(
        {
            "targets": [
                {
                    "tool": "github/search",
                    "arguments": {"query": "repo:acme {{ query }}", "limit": "{{ limit }}"},
                },
                {"tool": "jira/search", "arguments": {"query": "{{ params.query }}", "project": "OPS"}},
                {"tool": "docs/search"},
            ],
            "order": "declared",
        }
    )
    await composite.run({"query": "login bug", "limit": 5}, backend.context())
    calls = dict(backend.calls)
    assert calls["github__search"] == {"query": "repo:acme login bug", "limit": 5}  # native int kept
    assert calls["jira__search"] == {"query": "login bug", "project": "OPS"}
    assert calls["docs__search"] == {"query": "login bug", "limit": 5}


async def test_rendered_text_is_coerced_to_the_target_type() -> None:
    backend = FakeCalls(default=echo)
    composite = fanout(
        {"targets": [{"tool": "github/search", "arguments": {"query": "q", "limit": "{{ n }}0"}}]}
    )
    await composite.run({"n": 3}, backend.context())
    assert backend.calls == [("github__search", {"query": "q", "limit": 30})]


async def test_a_template_that_cannot_render_fails_only_its_target() -> None:
    backend = FakeCalls(default=echo)
    composite = fanout(
        {
            "targets": [
                {"tool": "github/search", "arguments": {"query": "{{ missing }}"}},
                {"tool": "docs/search"},
            ],
            "order": "declared",
        }
    )
    result = await composite.run({"query": "q"}, backend.context())
    assert result.is_error
    assert [name for name, _ in backend.calls] == ["docs__search"]
    assert "cannot build the arguments for github__search" in sections(result)[1]
    assert "missing" in sections(result)[1]


def test_template_syntax_errors_are_build_errors_with_paths() -> None:
    with pytest.raises(BuildError) as caught:
        fanout(
            {
                "targets": [
                    {"tool": "github/search", "arguments": {"query": "{{ oops", "limit": 1}},
                    {"tool": "docs/search", "arguments": {"filters": ["ok", "{% if %}"]}},
                ]
            }
        )
    assert [path for path, _ in caught.value.issues] == [
        "targets[0].arguments.query",
        "targets[1].arguments.filters[1]",
    ]


# -- the listed schema ---------------------------------------------------------------------


def test_merged_schema_unites_properties_required_only_when_all_require() -> None:
    schema = fanout({"tools": SEARCHES}).tool.input_schema
    assert list(schema["properties"]) == ["query", "limit", "project"]
    assert schema["required"] == ["query"]  # project is required by jira only
    assert schema["properties"]["limit"]["type"] == "integer"  # integer fits number
    assert schema["properties"]["query"]["description"] == "Search terms for the docs."


def test_type_conflict_is_a_build_error_naming_both_targets() -> None:
    tools = FakeCatalog(
        [tool("a__search", {"limit": {"type": "integer"}}), tool("b__search", {"limit": {"type": "string"}})]
    )
    with pytest.raises(BuildError) as caught:
        fanout({"tools": ["a/search", "b/search"]}, tools)
    path, message = caught.value.issues[0]
    assert path == "tools[1]"
    assert "'limit'" in message and "a__search" in message and "b__search" in message
    assert "'integer'" in message and "'string'" in message


def test_enums_are_intersected_and_an_empty_intersection_is_an_error() -> None:
    fine = FakeCatalog(
        [
            tool("a__s", {"mode": {"type": "string", "enum": ["fast", "deep"]}}),
            tool("b__s", {"mode": {"type": "string", "enum": ["deep", "wide"]}}),
        ]
    )
    assert fanout({"tools": ["a/s", "b/s"]}, fine).tool.input_schema["properties"]["mode"]["enum"] == ["deep"]
    clash = FakeCatalog(
        [tool("a__s", {"mode": {"enum": ["fast"]}}), tool("b__s", {"mode": {"enum": ["wide"]}})]
    )
    with pytest.raises(BuildError) as caught:
        fanout({"tools": ["a/s", "b/s"]}, clash)
    assert "'mode'" in caught.value.issues[0][1]


def test_templated_targets_contribute_the_names_they_read() -> None:
    composite = fanout(
        {
            "targets": [
                {"tool": "github/search", "arguments": {"query": "{{ topic }}", "limit": 10}},
                {
                    "tool": "jira/search",
                    "arguments": {"query": "{{ params.topic }} {{ extra | default('') }}", "project": "OPS"},
                },
            ]
        }
    )
    schema = composite.tool.input_schema
    assert list(schema["properties"]) == ["topic", "extra"]
    assert schema["properties"]["topic"]["type"] == "string"  # from github's `query`
    assert schema["properties"]["topic"]["description"] == "What to look for."
    assert "through its arguments template" in schema["properties"]["extra"]["description"]
    assert schema["required"] == ["topic"]  # `extra` has a default, so it is optional


def test_fully_fixed_targets_take_no_inputs() -> None:
    composite = fanout({"targets": [{"tool": "github/search", "arguments": {"query": "is:open"}}]})
    assert composite.tool.input_schema == {"type": "object", "properties": {}}
    assert "This tool takes no inputs." in (composite.tool.description or "")


def test_explicit_input_schema_wins() -> None:
    explicit = {"type": "object", "properties": {"q": {"type": "string"}}}
    assert fanout({"tools": SEARCHES, "input_schema": explicit}).tool.input_schema == explicit


def test_invalid_explicit_input_schema() -> None:
    with pytest.raises(BuildError) as caught:
        fanout({"tools": SEARCHES, "input_schema": {"type": "object", "properties": {"q": {"type": 5}}}})
    assert caught.value.issues[0][0] == "input_schema"


# -- references and annotations -------------------------------------------------------------


def test_unknown_references_name_their_paths() -> None:
    with pytest.raises(BuildError) as caught:
        fanout({"tools": ["github/search", "github/nope", "docs/nope"]})
    assert caught.value.issues == [
        ("tools[1]", "unknown tool 'github/nope'"),
        ("tools[2]", "unknown tool 'docs/nope'"),
    ]
    with pytest.raises(BuildError) as caught:
        fanout({"targets": [{"tool": "github/search"}, {"tool": "github/nope"}]})
    assert caught.value.issues == [("targets[1].tool", "unknown tool 'github/nope'")]


def test_exposed_names_resolve_too() -> None:
    composite = fanout({"tools": ["github__search", "docs__search"]}, catalog())
    assert composite.references == frozenset({"github__search", "docs__search"})


def test_composite_targets_are_rejected() -> None:
    tools = catalog()
    tools.tools["other"] = tool("other", {})
    tools.composites["other"] = "router"
    with pytest.raises(BuildError) as caught:
        fanout({"tools": ["github/search", "other"]}, tools)
    assert caught.value.issues == [
        ("tools[1]", "'other' is a router: routers and fan-outs target backend tools only")
    ]


def test_annotations_are_derived_and_checked() -> None:
    assert fanout({"tools": SEARCHES}).tool.annotations.read_only_hint is True
    mixed = fanout({"tools": ["github/search", "github/create_issue"]})
    assert mixed.tool.annotations.read_only_hint is False
    assert mixed.tool.annotations.destructive_hint is True
    with pytest.raises(BuildError) as caught:
        fanout({"tools": ["github/search", "github/create_issue"], "annotations": {"readOnlyHint": True}})
    assert caught.value.issues[0][0] == "annotations.readOnlyHint"
    assert "github__create_issue" in caught.value.issues[0][1]


def test_listed_tool() -> None:
    composite = fanout({"tools": SEARCHES, "title": "Search everything"})
    assert composite.kind == "fanout"
    assert composite.tool.name == "search_all"
    assert composite.tool.title == "Search everything"
    description = composite.tool.description or ""
    assert description.startswith("Use this tool to search across all knowledge sources.")
    assert "- github__search: Search GitHub issues and code." in description


def test_names_read_under_guards_are_optional() -> None:
    composite = fanout(
        {
            "targets": [
                {
                    "tool": "github/search",
                    "arguments": {
                        "query": "{{ topic }}{% if lang is defined %} language:{{ lang }}{% endif %}",
                        "limit": "{{ limit if limit is defined else 10 }}",
                    },
                }
            ]
        }
    )
    schema = composite.tool.input_schema
    assert sorted(schema["properties"]) == ["lang", "limit", "topic"]
    assert schema["required"] == ["topic"]


def test_templates_reading_params_as_a_whole_add_nothing_they_cannot_name() -> None:
    composite = fanout(
        {"targets": [{"tool": "github/search", "arguments": {"query": "{{ params | tojson }}"}}]}
    )
    assert composite.tool.input_schema == {"type": "object", "properties": {}}


async def test_single_expression_keeps_lists_and_objects_native() -> None:
    tools = FakeCatalog([tool("a__tag", {"tags": {"type": "array"}, "opts": {"type": "object"}})])
    composite = fanout(
        {"targets": [{"tool": "a/tag", "arguments": {"tags": "{{ labels }}", "opts": "{{ params.o }}"}}]},
        tools,
    )
    backend = FakeCalls(default=echo)
    await composite.run({"labels": ["x", "y"], "o": {"deep": True}}, backend.context())
    assert backend.calls == [("a__tag", {"tags": ["x", "y"], "opts": {"deep": True}})]
    assert composite.tool.input_schema["required"] == ["labels", "o"]


def test_the_output_schema_gives_every_property_a_type() -> None:
    """Strict checkers (the MCP Inspector's) refuse an empty schema such as `structuredContent: {}`."""

    def untyped(schema: dict[str, Any], path: str) -> list[str]:
        # a type list (`["object", "null"]`) draws a warning from the Inspector's --strict mode: anyOf instead
        typed = isinstance(schema.get("type"), str) or all(
            isinstance(one.get("type"), str) for one in schema.get("anyOf", [{}])
        )
        found = [] if typed else [path]
        for name, child in schema.get("properties", {}).items():
            found += untyped(child, f"{path}.{name}")
        if isinstance(schema.get("items"), dict):
            found += untyped(schema["items"], f"{path}[]")
        return found

    assert untyped(OUTPUT_SCHEMA, "outputSchema") == []
    import jsonschema

    jsonschema.validate(
        {"results": [{"tool": "a", "isError": False, "structuredContent": None, "text": ""}]},
        OUTPUT_SCHEMA,
    )
