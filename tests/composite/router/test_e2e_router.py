"""Router end to end (seed 002): every §2.3 acceptance criterion against real stdio MCP backends,
through `Gateway` and through the MCP front over streamable HTTP.

Three testserver processes (`alpha`, `beta`, `gamma`) play seed 002 §10's
scraper integrations; each scraper reports which server ran it. Direct calls
are recorded, so run records show exactly which backend tools were called.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from mcp import Client

from support.cli import toolweave_here_async
from support.configs import stdio_testserver, write_toml
from support.results import inner_records, meta, texts
from toolweave import Gateway

pytestmark = pytest.mark.asyncio(loop_scope="module")

OPERATIONS = """
[[composite_tools.operations]]
slug = "linkedin-scraper"
tool = "alpha/scrape_profile"
parameter_mapping = {{ url = "profile_url" }}

[[composite_tools.operations]]
slug = "reddit-scraper"
tool = "beta/fetch_post"
parameter_mapping = {{ url = "reddit_url" }}

[[composite_tools.operations]]
slug = "yelp-scraper"
tool = "gamma/fetch_business"
parameter_mapping = {{ url = "yelp_url" }}
{yelp_extra}

[[composite_tools.operations]]
slug = "firecrawl-generic"
tool = "gamma/scrape"
"""

CONFIG = (
    """
[gateway]
record_direct_calls = true

{alpha}
{beta}
{gamma}

# Seed 002 §10: one "Scrape" tool with 4 operations, picked by the URL.
[[composite_tools]]
name = "scrape"
description = "Scrape content from any URL."
routing = "rule_based"
default_operation = "firecrawl-generic"
success_template = "## Scraped {{{{ url }}}} using {{{{ operation }}}}"
"""
    + OPERATIONS.replace("{yelp_extra}", 'arguments = {{ api_key = "fixed-key-123" }}')
    + """
[[composite_tools.rules]]
condition = {{ type = "contains", field = "url", value = "linkedin.com", caseSensitive = false }}
operation = "linkedin-scraper"
priority = 1

[[composite_tools.rules]]
condition = {{ type = "any", conditions = [
  {{ type = "contains", field = "url", value = "yelp.com" }},
  {{ type = "ends_with", field = "url", value = ".yelp" }},
] }}
operation = "yelp-scraper"
priority = 3

[[composite_tools.rules]]
condition = {{ type = "matches", field = "url", value = '^https?://(www\\.)?reddit\\.com/' }}
operation = "reddit-scraper"
priority = 2

# The same operations, chosen by the agent.
[[composite_tools]]
name = "scrape_agent"
description = "Scrape content with the scraper you choose."
routing = "agent_driven"
"""
    + OPERATIONS.replace("{yelp_extra}", "")
    + """
# Rules only: no default operation.
[[composite_tools]]
name = "linkedin_only"
routing = "rule_based"
error_template = "## Failed to scrape {{{{ url | default('?') }}}} using {{{{ operation | default('no scraper', true) }}}}: {{{{ error_message }}}}"

[[composite_tools.operations]]
slug = "linkedin-scraper"
tool = "alpha/scrape_profile"
parameter_mapping = {{ url = "profile_url" }}

[[composite_tools.rules]]
condition = {{ type = "contains", field = "url", value = "linkedin.com" }}
operation = "linkedin-scraper"

# A pattern that is catastrophic for backtracking engines.
[[composite_tools]]
name = "classify"
default_operation = "other"

[[composite_tools.operations]]
slug = "a-tail"
tool = "alpha/echo"

[[composite_tools.operations]]
slug = "other"
tool = "beta/echo"

[[composite_tools.rules]]
condition = {{ type = "matches", field = "text", value = "(a+)+$" }}
operation = "a-tail"

# Mutating operations, chosen by a numeric rule.
[[composite_tools]]
name = "bump"
default_operation = "small"

[[composite_tools.operations]]
slug = "small"
tool = "alpha/increment"
parameter_mapping = {{ amount = "by" }}

[[composite_tools.operations]]
slug = "big"
tool = "beta/increment"
parameter_mapping = {{ amount = "by" }}

[[composite_tools.rules]]
condition = {{ type = "gt", field = "amount", value = 10 }}
operation = "big"

# Operations with different parameters: a missing one is named at call time.
[[composite_tools]]
name = "calc"
routing = "agent_driven"

[[composite_tools.operations]]
slug = "add"
tool = "alpha/add"
parameter_mapping = {{ x = "a", y = "b" }}

[[composite_tools.operations]]
slug = "echo"
tool = "beta/echo"
"""
)

SLUGS = ["linkedin-scraper", "reddit-scraper", "yelp-scraper", "firecrawl-generic"]


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def gateway(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Gateway]:
    directory = tmp_path_factory.mktemp("router-e2e")
    text = CONFIG.format(
        alpha=stdio_testserver("alpha"), beta=stdio_testserver("beta"), gamma=stdio_testserver("gamma")
    )
    async with Gateway.from_config(write_toml(directory, text)) as gw:
        assert gw.catalog.degraded == {}, gw.catalog.issues
        yield gw


def listed(gateway: Gateway, name: str) -> Any:
    return next(tool for tool in gateway.list_tools() if tool.name == name)


async def recorded_calls(gateway: Gateway) -> int:
    return len([r for r in await gateway.runs.list_runs(limit=1000) if r.kind == "direct"])


# -- §2.3 criterion 1: a LinkedIn URL selects and runs the LinkedIn operation ------------------------


async def test_a_linkedin_url_runs_the_linkedin_operation(gateway: Gateway) -> None:
    result = await gateway.call("scrape", {"url": "https://www.LinkedIn.com/in/johndoe"})
    assert not result.is_error
    assert result.structured_content == {
        "scraper": "linkedin",
        "server": "alpha",
        "url": "https://www.LinkedIn.com/in/johndoe",
        "include_metadata": True,
    }
    info = meta(result)
    assert info["kind"] == "router" and info["operation"] == "linkedin-scraper"
    assert info["tool"] == "alpha__scrape_profile"
    assert info["reason"] == "url contains 'linkedin.com'"
    assert info["run_id"] and info["latency_ms"] >= 0
    # success_template renders into a leading text item; the backend's content follows untouched
    assert texts(result)[0] == "## Scraped https://www.LinkedIn.com/in/johndoe using linkedin-scraper"
    run = await gateway.runs.get_run(info["run_id"])
    assert (run.kind, run.operation, run.reason) == (
        "router",
        "linkedin-scraper",
        "url contains 'linkedin.com'",
    )


@pytest.mark.parametrize(
    ("url", "slug", "scraper", "server", "reason"),
    [
        (
            "https://www.reddit.com/r/python/comments/1",
            "reddit-scraper",
            "reddit",
            "beta",
            "url matches '^https?://(www\\.)?reddit\\.com/'",
        ),
        ("https://www.yelp.com/biz/cafe", "yelp-scraper", "yelp", "gamma", "url contains 'yelp.com'"),
        ("https://example.com/page", "firecrawl-generic", "generic", "gamma", "default operation"),
    ],
)
async def test_each_url_reaches_its_operation(
    gateway: Gateway, url: str, slug: str, scraper: str, server: str, reason: str
) -> None:
    result = await gateway.call("scrape", {"url": url})
    assert not result.is_error, texts(result)
    assert (result.structured_content["scraper"], result.structured_content["server"]) == (scraper, server)
    assert result.structured_content["url"] == url
    assert (meta(result)["operation"], meta(result)["reason"]) == (slug, reason)


async def test_fixed_arguments_reach_the_operation_and_unlisted_arguments_are_dropped(
    gateway: Gateway,
) -> None:
    yelp = await gateway.call("scrape", {"url": "https://yelp.com/biz/x"})
    assert yelp.structured_content["key_length"] == len("fixed-key-123")
    await gateway.call("scrape", {"url": "https://linkedin.com/in/a", "format": "html"})
    sent = (await inner_records(gateway, "alpha__scrape_profile"))[0].arguments
    assert sent == {"profile_url": "https://linkedin.com/in/a"}  # scrape_profile lists no `format`
    generic = await gateway.call("scrape", {"url": "https://example.com", "format": "html"})
    assert generic.structured_content["format"] == "html"  # the generic scraper lists it


# -- §2.3 criterion 2: agent-driven routers export an `operation` enum ------------------------------


@pytest.mark.parametrize("fmt", ["mcp", "universal", "langchain", "openai", "anthropic"])
async def test_agent_driven_export_lists_every_operation(gateway: Gateway, fmt: str) -> None:
    [exported] = gateway.export(fmt, ["scrape_agent"])
    found = _find_schema(exported)
    assert found["properties"]["operation"]["enum"] == SLUGS
    assert "operation" in found["required"]


async def test_agent_driven_calls_run_the_chosen_operation(gateway: Gateway) -> None:
    result = await gateway.call(
        "scrape_agent", {"operation": "reddit-scraper", "url": "https://example.com/x"}
    )
    assert result.structured_content["scraper"] == "reddit" and result.structured_content["server"] == "beta"
    assert (meta(result)["operation"], meta(result)["reason"]) == ("reddit-scraper", "agent selected")
    before = await recorded_calls(gateway)
    unknown = await gateway.call("scrape_agent", {"operation": "nope", "url": "https://example.com"})
    assert unknown.is_error and "'nope' is not one of" in texts(unknown)[0]
    missing = await gateway.call("scrape_agent", {"url": "https://example.com"})
    assert missing.is_error and "missing required argument 'operation'" in texts(missing)[0]
    assert await recorded_calls(gateway) == before


# -- §2.3 criterion 3: an action shows the composite tools that use it -------------------------------


async def test_used_in_composite_tools(gateway: Gateway) -> None:
    used_in = gateway.catalog.used_in
    assert sorted(used_in["alpha__scrape_profile"]) == ["linkedin_only", "scrape", "scrape_agent"]
    assert sorted(used_in["gamma__scrape"]) == ["scrape", "scrape_agent"]
    assert used_in["alpha__increment"] == ["bump"]


# -- §2.3 criterion 4: exported as a single tool with proper routing ---------------------------------


@pytest.mark.parametrize("fmt", ["mcp", "langchain", "universal"])
async def test_rule_based_router_exports_as_one_tool(gateway: Gateway, fmt: str) -> None:
    exported = gateway.export(fmt, ["scrape"])
    assert len(exported) == 1
    schema = _find_schema(exported[0])
    assert "operation" not in schema["properties"]  # routing is internal
    assert schema["required"] == ["url"]
    assert "api_key" not in schema["properties"]  # fixed arguments are hidden
    description = exported[0].get("description") or exported[0]["function"]["description"]
    assert description.startswith("Use this tool to scrape content from any URL.")
    assert "# Required inputs (always include these):\n- url (string)" in description


async def test_unified_schema_merges_the_operations(gateway: Gateway) -> None:
    tool = listed(gateway, "scrape")
    props = tool.input_schema["properties"]
    assert list(props) == ["url", "include_metadata", "format"]
    assert props["format"]["enum"] == ["markdown", "json", "html", "text"]  # united, first seen first
    assert (
        props["format"]["description"]
        == "How to render the post: markdown to read it, json for its raw fields"
    )
    assert props["include_metadata"]["type"] == "boolean"
    assert tool.annotations.read_only_hint is True and tool.annotations.open_world_hint is False
    agent = listed(gateway, "scrape_agent").input_schema
    assert next(iter(agent["properties"])) == "operation" and "api_key" in agent["properties"]
    assert agent["properties"]["api_key"]["writeOnly"] is True


# -- §2.3 criterion 5: no matching rule → the default, or an error when there is none ----------------


async def test_no_matching_rule_uses_the_default(gateway: Gateway) -> None:
    result = await gateway.call("scrape", {"url": "https://news.example.org/a"})
    assert meta(result)["operation"] == "firecrawl-generic" and meta(result)["reason"] == "default operation"
    assert result.structured_content["scraper"] == "generic"


async def test_no_matching_rule_and_no_default_is_an_error_and_calls_nothing(gateway: Gateway) -> None:
    before = await recorded_calls(gateway)
    result = await gateway.call("linkedin_only", {"url": "https://example.com/x"})
    assert result.is_error
    first, second = texts(result)
    # error_template applies to routing errors too
    assert first.startswith("## Failed to scrape https://example.com/x using no scraper: No routing rule")
    assert second.startswith("No routing rule of 'linkedin_only' matched these arguments")
    assert "nothing was called" in second and "1. url contains 'linkedin.com' → linkedin-scraper" in second
    assert meta(result)["operation"] is None and meta(result)["reason"] == "no rule matched"
    assert await recorded_calls(gateway) == before
    ok = await gateway.call("linkedin_only", {"url": "https://linkedin.com/in/x"})
    assert not ok.is_error and texts(ok)[0].startswith('{\n  "scraper": "linkedin"')


# -- conditions ---------------------------------------------------------------------------------


async def test_a_catastrophic_regex_finishes(gateway: Gateway) -> None:
    evil = "a" * 50_000 + "!"
    result = await gateway.call("classify", {"text": evil})
    assert not result.is_error
    assert (meta(result)["operation"], meta(result)["reason"]) == ("other", "default operation")
    assert texts(result) == [evil]
    matched = await gateway.call("classify", {"text": "a" * 50_000})
    assert meta(matched)["operation"] == "a-tail" and meta(matched)["reason"] == "text matches '(a+)+$'"


async def test_numeric_rules_route_mutating_operations(gateway: Gateway) -> None:
    async def counter(name: str) -> int:
        return (await gateway.call(f"{name}__counter", {})).structured_content["value"]

    alpha, beta = await counter("alpha"), await counter("beta")
    big = await gateway.call("bump", {"amount": 50})
    assert (meta(big)["operation"], meta(big)["reason"]) == ("big", "amount > 10")
    small = await gateway.call("bump", {"amount": 3})
    assert meta(small)["operation"] == "small"
    assert (await counter("alpha"), await counter("beta")) == (alpha + 3, beta + 50)


# -- arguments are checked before anything is called -------------------------------------------------


async def test_invalid_arguments_fail_before_any_backend_is_called(gateway: Gateway) -> None:
    async def counters() -> tuple[int, int]:
        values = [await gateway.call(f"{n}__counter", {}) for n in ("alpha", "beta")]
        return values[0].structured_content["value"], values[1].structured_content["value"]

    before, calls = await counters(), await recorded_calls(gateway)
    result = await gateway.call("bump", {"amount": "lots"})
    assert result.is_error
    assert texts(result)[0] == (
        "invalid arguments for 'bump': argument 'amount': 'lots' is not of type 'integer'. Nothing was called."
    )
    assert await counters() == before
    assert await recorded_calls(gateway) == calls + 2  # only the two counter reads


async def test_a_parameter_the_chosen_operation_needs_is_named_in_unified_terms(gateway: Gateway) -> None:
    schema = listed(gateway, "calc").input_schema
    assert schema["required"] == ["operation"]  # x, y and text are each needed by one operation only
    before = await recorded_calls(gateway)
    result = await gateway.call("calc", {"operation": "add", "x": 1})
    assert result.is_error
    assert texts(result)[0] == (
        "Invalid arguments for operation 'add':\n- missing required parameter 'y' (sent to alpha__add as 'b')"
    )
    assert meta(result)["operation"] == "add"
    assert await recorded_calls(gateway) == before
    ok = await gateway.call("calc", {"operation": "add", "x": 1, "y": 2})
    assert ok.structured_content == {"sum": 3}


async def test_secret_values_are_never_quoted_in_errors(gateway: Gateway) -> None:
    result = await gateway.call(
        "scrape_agent", {"operation": "yelp-scraper", "url": "https://yelp.com/biz/y", "api_key": "s3cr"}
    )
    assert texts(result) == [
        "invalid arguments for 'scrape_agent': argument 'api_key' is invalid (minLength 8 failed). Nothing was called."
    ]
    assert "s3cr" not in str(result.model_dump())


# -- through the MCP front ------------------------------------------------------------------------


async def test_over_mcp_http(mcp_url: str) -> None:
    async with Client(mcp_url) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert tools["scrape_agent"].input_schema["properties"]["operation"]["enum"] == SLUGS
        assert "operation" not in tools["scrape"].input_schema["properties"]
        result = await client.call_tool("scrape", {"url": "https://linkedin.com/in/johndoe"})
        assert not result.is_error
        assert result.structured_content["server"] == "alpha"
        assert (
            meta(result)["operation"] == "linkedin-scraper"
            and meta(result)["tool"] == "alpha__scrape_profile"
        )
        refused = await client.call_tool("linkedin_only", {"url": "https://example.com"})
        assert refused.is_error and meta(refused)["reason"] == "no rule matched"


def _find_schema(exported: dict[str, Any]) -> dict[str, Any]:
    """The input schema inside one exported tool, whatever the format calls it."""
    for key in ("inputSchema", "parameters", "input_schema", "args_schema"):
        if key in exported:
            return exported[key]
    return _find_schema(exported["function"])


# -- `toolweave validate`: every problem at once, with its path ----------------------------------

BAD_CONFIG = """
{alpha}
{beta}

[[composite_tools]]
name = "search_all"
tools = ["alpha/search", "alpha/no_such_tool"]

[[composite_tools]]
name = "nothing"
tools = []

[[composite_tools]]
name = "scrape"
default_operation = "generic"

[[composite_tools.operations]]
slug = "generic"
tool = "alpha/scrape"

[[composite_tools.operations]]
slug = "generic"
tool = "beta/scrape_everything"

[[composite_tools.rules]]
condition = {{ type = "matches", field = "url", value = '(a)\\1' }}
operation = "ghost"

[[composite_tools]]
name = "find_everything"
tools = ["alpha/search", "beta/lookup"]

[[composite_tools]]
name = "search_all"
tools = ["beta/search"]

[[composite_tools]]
name = "beta__add"
tools = ["alpha/add"]

[[composite_tools]]
name = "picky"
routing = "agent_driven"
default_operation = "one"

[[composite_tools.operations]]
slug = "one"
tool = "alpha/scrape_profile"
parameter_mapping = {{ url = "link" }}

[[composite_tools.rules]]
condition = {{ type = "contains", field = "url", value = "x" }}
operation = "one"

[[composite_tools]]
name = "unknown_field"
default_operation = "one"

[[composite_tools.operations]]
slug = "one"
tool = "alpha/scrape"

[[composite_tools.rules]]
condition = {{ type = "equals", field = "domain", value = "reddit.com" }}
operation = "one"
"""

EXPECTED_PROBLEMS = [
    # unknown target tools
    "composite_tools[0].tools[1]: unknown tool 'alpha/no_such_tool'",
    "composite_tools[2].operations[1].tool: unknown tool 'beta/scrape_everything'",
    # empty tool lists
    "composite_tools[1]: a fan-out needs at least one target in 'tools' (or 'targets')",
    # duplicate slugs
    "composite_tools[2].operations[1].slug: duplicate slug 'generic' (also operations[0])",
    # rules pointing at unknown operations
    "composite_tools[2].rules[0].operation: unknown operation 'ghost' (operations: generic)",
    # impossible regexes
    "composite_tools[2].rules[0].condition.value: invalid RE2 pattern: invalid escape sequence: \\1",
    # schema type conflicts
    "composite_tools[3].tools[1]: property 'query' is 'string' for alpha__search but 'integer' for beta__lookup",
    # conflicting names: two composites, and a composite against a backend tool
    "composite_tools[4].name: duplicate composite tool name 'search_all' (also composite_tools[0])",
    "composite_tools[5]: name conflict: composite tool 'beta__add' and backend 'beta' tool 'add' "
    "are both exposed as 'beta__add'",
    # agent_driven routers take no rules or default; mappings and rule fields must exist
    "composite_tools[6].rules: rules are not used by agent_driven routing",
    "composite_tools[6].default_operation: agent_driven routing always takes the agent's choice",
    "composite_tools[6].operations[0].parameter_mapping.url: alpha__scrape_profile has no parameter 'link'",
    "composite_tools[7].rules[0].condition.field: 'domain' is not a parameter of the unified input schema",
]


@pytest.mark.usefixtures("in_process_testserver")  # what validate says, not its process or the servers'
async def test_validate_reports_every_problem_at_once_with_its_path(tmp_path: Path) -> None:
    path = write_toml(
        tmp_path, BAD_CONFIG.format(alpha=stdio_testserver("alpha"), beta=stdio_testserver("beta"))
    )
    done = await toolweave_here_async("validate", "-c", str(path), env={"COLUMNS": "500", "NO_COLOR": "1"})
    output = done.stderr
    assert done.returncode == 1, (done.stdout, output)
    # validate first says what it waits for ("connecting 2 backend(s) (at most 10 s)…"), then the report
    report = [line for line in output.splitlines() if not line.startswith("connecting ")]
    lines = [line.strip().removeprefix("• ") for line in report[1:]]
    assert report[0] == f"{len(lines)} problem(s) in {path}:"
    for expected in EXPECTED_PROBLEMS:
        assert any(line.startswith(expected) for line in lines), f"missing: {expected}\n{output}"
    assert len(lines) == len(EXPECTED_PROBLEMS), output  # each problem once
