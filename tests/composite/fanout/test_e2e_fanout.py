"""Fan-out end to end (seed 000, SPEC §3): real stdio MCP backends behind one gateway, through `Gateway`
and through the MCP front over streamable HTTP.

Three testserver processes (`alpha`, `beta`, `gamma`) serve every test of the
module. `alpha/echo` is hidden, `beta/search` is aliased to `beta_find`, the
policy denies `gamma__echo`, and direct calls are recorded, so each inner call
leaves a run record proving whether (and how) a backend was called.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest
import pytest_asyncio
from mcp import Client

from support.configs import stdio_testserver, write_toml
from support.results import inner_records, meta, sections
from toolweave import Gateway

pytestmark = pytest.mark.asyncio(loop_scope="module")

CONFIG = """
[gateway]
record_direct_calls = true

[policy]
deny = ["gamma__echo"]

{alpha}
hide = ["echo"]

{beta}
[backends.tools.search]
name = "beta_find"

{gamma}

[[composite_tools]]
name = "search_all"
description = "Search across all knowledge sources"
tools = ["alpha/search", "beta/search", "gamma/search"]
strategy = "parallel"

[[composite_tools]]
name = "sleep_all"
tools = ["alpha/sleep", "beta/sleep", "gamma/sleep"]

[[composite_tools]]
name = "slow_first_completion"
targets = [
  {{ tool = "alpha/sleep", arguments = {{ seconds = 0.5, label = "slow" }} }},
  {{ tool = "beta/sleep", arguments = {{ seconds = 0, label = "fast" }} }},
]

[[composite_tools]]
name = "slow_first_declared"
order = "declared"
targets = [
  {{ tool = "alpha/sleep", arguments = {{ seconds = 0.5, label = "slow" }} }},
  {{ tool = "beta/sleep", arguments = {{ seconds = 0, label = "fast" }} }},
]

[[composite_tools]]
name = "first_wins"
strategy = "first_success"
targets = [
  # gamma sleeps a second so that beta, failing at once, has answered first even on a loaded machine
  {{ tool = "alpha/sleep", arguments = {{ seconds = 30, label = "first-wins-slow" }} }},
  {{ tool = "beta/fail", arguments = {{ message = "beta is broken" }} }},
  {{ tool = "gamma/sleep", arguments = {{ seconds = 1.0, label = "first-wins-fast" }} }},
]

[[composite_tools]]
name = "first_all_fail"
strategy = "first_success"
targets = [
  {{ tool = "alpha/fail", arguments = {{ message = "alpha is broken" }} }},
  {{ tool = "beta/fail", arguments = {{ message = "beta is broken" }} }},
]

[[composite_tools]]
name = "timed"
timeout = "10s"
targets = [
  {{ tool = "alpha/sleep", arguments = {{ seconds = 30, label = "stuck" }}, timeout = "200ms" }},
  {{ tool = "beta/sleep", arguments = {{ seconds = 0, label = "quick" }} }},
]

[[composite_tools]]
name = "echo_all"
tools = ["alpha/echo", "beta/echo", "gamma/echo"]
order = "declared"

[[composite_tools]]
name = "find_by_alias"
tools = ["beta_find", "gamma__search"]
order = "declared"

[[composite_tools]]
name = "bump_all"
tools = ["alpha/increment", "beta/increment"]

[[composite_tools]]
name = "add_templated"
order = "declared"
targets = [
  {{ tool = "alpha/add", arguments = {{ a = "{{{{ x }}}}", b = 1 }} }},
  {{ tool = "beta/add", arguments = {{ a = "{{{{ x }}}}", b = 1.5 }} }},
]

[[composite_tools]]
name = "scrape_everywhere"
tools = ["alpha/scrape", "beta/fetch_post"]
"""


@pytest_asyncio.fixture(loop_scope="module", scope="module")
async def gateway(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Gateway]:
    directory = tmp_path_factory.mktemp("fanout-e2e")
    text = CONFIG.format(
        alpha=stdio_testserver("alpha"), beta=stdio_testserver("beta"), gamma=stdio_testserver("gamma")
    )
    async with Gateway.from_config(write_toml(directory, text)) as gw:
        assert gw.catalog.degraded == {}, gw.catalog.issues
        yield gw


def schema_of(gateway: Gateway, name: str) -> dict[str, Any]:
    return next(tool for tool in gateway.list_tools() if tool.name == name).input_schema


# -- seed 000's behaviour ------------------------------------------------------------------------


async def test_search_all_concatenates_every_target_with_a_heading(gateway: Gateway) -> None:
    result = await gateway.call("search_all", {"query": "deploy", "limit": 2})
    assert not result.is_error
    items = sections(result)
    # completion order (the default): every target once, each section headed by its tool
    headings = items[0::2]
    assert sorted(headings) == ["## alpha__search", "## beta_find", "## gamma__search"]
    for heading, body in zip(items[0::2], items[1::2], strict=True):
        server = {"## alpha__search": "alpha", "## beta_find": "beta", "## gamma__search": "gamma"}[heading]
        assert body == f"{server} results for 'deploy' (limit 2)"
    results = result.structured_content["results"]
    assert [r["tool"] for r in results] == [h.removeprefix("## ") for h in headings]
    # the servers' str results come structured ({"result": ...}): their text is not repeated beside it
    assert [r["structuredContent"] for r in results] == [{"result": body} for body in sections(result)[1::2]]
    assert all(r["isError"] is False and "text" not in r for r in results)
    info = meta(result)
    assert info["kind"] == "fanout" and info["run_id"] and info["latency_ms"] >= 0
    assert [t["tool"] for t in info["targets"]] == [r["tool"] for r in results]
    assert all(t["status"] == "completed" and t["isError"] is False for t in info["targets"])
    assert all(t["latency_ms"] >= 0 for t in info["targets"])


async def test_a_failing_target_makes_the_call_an_error_and_keeps_the_successes(gateway: Gateway) -> None:
    result = await gateway.call("echo_all", {"text": "hello"})
    assert result.is_error
    items = sections(result)
    # declared order; gamma__echo is denied by the policy, so it is that target's failure
    assert items[:4] == ["## alpha__echo", "hello", "## beta__echo", "hello"]
    assert items[4] == "## gamma__echo (failed)"
    assert "tool 'gamma__echo' is denied by the gateway policy" in items[5]
    statuses = [(t["tool"], t["status"]) for t in meta(result)["targets"]]
    assert statuses == [("alpha__echo", "completed"), ("beta__echo", "completed"), ("gamma__echo", "failed")]
    results = result.structured_content["results"]
    assert [r["isError"] for r in results] == [False, False, True]


async def test_policy_denial_applies_to_the_inner_call_not_only_the_composite_name(gateway: Gateway) -> None:
    assert (await gateway.call("gamma__echo", {"text": "x"})).is_error  # denied directly too
    before = len(await inner_records(gateway, "gamma__echo"))
    await gateway.call("echo_all", {"text": "again"})
    assert len(await inner_records(gateway, "gamma__echo")) == before  # never reached the backend


async def test_a_hidden_tool_is_still_callable_as_a_target(gateway: Gateway) -> None:
    listed = {tool.name for tool in gateway.list_tools()}
    assert "alpha__echo" not in listed and "beta__echo" in listed
    hidden = await gateway.call("alpha__echo", {"text": "x"})
    assert hidden.is_error and "unknown tool 'alpha__echo'" in sections(hidden)[0]
    result = await gateway.call("echo_all", {"text": "through the composite"})
    first = result.structured_content["results"][0]
    assert first["tool"] == "alpha__echo" and first["isError"] is False
    assert first["structuredContent"] == {"result": "through the composite"}


async def test_aliases_are_respected(gateway: Gateway) -> None:
    listed = {tool.name for tool in gateway.list_tools()}
    assert "beta_find" in listed and "beta__search" not in listed
    # `beta/search` (search_all) and the alias itself (find_by_alias) both reach beta under its alias
    result = await gateway.call("find_by_alias", {"query": "q"})
    assert sections(result) == [
        "## beta_find",
        "beta results for 'q' (limit 3)",
        "## gamma__search",
        "gamma results for 'q' (limit 3)",
    ]
    assert len(await inner_records(gateway, "beta_find")) >= 1
    assert await inner_records(gateway, "beta__search") == []


# -- strategies, order, timeouts ---------------------------------------------------------------


async def test_parallel_targets_overlap_in_time(gateway: Gateway) -> None:
    result = await gateway.call("sleep_all", {"seconds": 0.3, "label": "overlap"})
    assert not result.is_error
    spans = [r["structuredContent"] for r in result.structured_content["results"]]
    assert len(spans) == 3 and {span["label"] for span in spans} == {"overlap"}
    # structural: every target had started (in its own process) before any of them ended
    assert max(span["start"] for span in spans) < min(span["end"] for span in spans)


async def test_completion_order_is_the_default_and_declared_order_is_kept_on_request(
    gateway: Gateway,
) -> None:
    completion = await gateway.call("slow_first_completion", {})
    labels = [r["structuredContent"]["label"] for r in completion.structured_content["results"]]
    ends = {
        r["structuredContent"]["label"]: r["structuredContent"]["end"]
        for r in completion.structured_content["results"]
    }
    assert labels == sorted(labels, key=ends.__getitem__)  # the order in which they finished
    assert labels == ["fast", "slow"]
    assert sections(completion)[0] == "## beta__sleep"
    declared = await gateway.call("slow_first_declared", {})
    assert [r["structuredContent"]["label"] for r in declared.structured_content["results"]] == [
        "slow",
        "fast",
    ]
    assert [t["tool"] for t in meta(declared)["targets"]] == ["alpha__sleep", "beta__sleep"]
    assert sections(declared)[0] == "## alpha__sleep"


async def test_first_success_returns_the_winner_and_cancels_the_rest(gateway: Gateway) -> None:
    result = await gateway.call("first_wins", {})
    assert not result.is_error
    assert sections(result)[0] == "## gamma__sleep"
    results = result.structured_content["results"]
    assert [(r["tool"], r["structuredContent"]["label"]) for r in results] == [
        ("gamma__sleep", "first-wins-fast")
    ]
    statuses = {t["tool"]: t["status"] for t in meta(result)["targets"]}
    assert statuses == {"beta__fail": "failed", "gamma__sleep": "completed", "alpha__sleep": "cancelled"}
    # the slow target's inner call was really cancelled, not left running
    slow = [
        r
        for r in await inner_records(gateway, "alpha__sleep")
        if r.arguments.get("label") == "first-wins-slow"
    ]
    assert [r.status for r in slow] == ["cancelled"]


async def test_first_success_when_every_target_fails_lists_every_failure(gateway: Gateway) -> None:
    result = await gateway.call("first_all_fail", {})
    assert result.is_error
    joined = "\n".join(sections(result))
    assert "## alpha__fail (failed)" in joined and "## beta__fail (failed)" in joined
    assert "alpha is broken" in joined and "beta is broken" in joined
    assert {t["status"] for t in meta(result)["targets"]} == {"failed"}


async def test_per_target_timeout(gateway: Gateway) -> None:
    result = await gateway.call("timed", {})
    assert result.is_error
    by_tool = {t["tool"]: t for t in meta(result)["targets"]}
    assert by_tool["alpha__sleep"]["status"] == "timed_out" and by_tool["alpha__sleep"]["isError"] is True
    assert by_tool["beta__sleep"]["status"] == "completed"
    entries = {r["tool"]: r for r in result.structured_content["results"]}
    assert entries["alpha__sleep"]["text"] == "timed out after 0.2s"
    assert entries["beta__sleep"]["structuredContent"]["label"] == "quick"


async def test_cancelling_the_call_cancels_its_targets(gateway: Gateway) -> None:
    task = asyncio.create_task(gateway.call("sleep_all", {"seconds": 30, "label": "to-cancel"}))

    async def running() -> list[Any]:
        found = []
        for name in ("alpha__sleep", "beta__sleep", "gamma__sleep"):
            found += [
                r
                for r in await inner_records(gateway, name, "running")
                if r.arguments["label"] == "to-cancel"
            ]
        return found

    async with asyncio.timeout(10):
        while len(await running()) < 3:  # noqa: ASYNC110 - polls run records, which have no event
            await asyncio.sleep(0.01)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert await running() == []
    for name in ("alpha__sleep", "beta__sleep", "gamma__sleep"):
        statuses = [
            r.status for r in await inner_records(gateway, name) if r.arguments["label"] == "to-cancel"
        ]
        assert statuses == ["cancelled"], name
    latest = await inner_records(gateway, "sleep_all")
    assert latest[0].status == "cancelled"


# -- arguments -------------------------------------------------------------------------------


async def counters(gateway: Gateway) -> tuple[int, int]:
    alpha = await gateway.call("alpha__counter", {})
    beta = await gateway.call("beta__counter", {})
    return alpha.structured_content["value"], beta.structured_content["value"]


async def test_invalid_arguments_fail_before_any_backend_is_called(gateway: Gateway) -> None:
    before = await counters(gateway)
    calls_before = len(await inner_records(gateway, "alpha__increment"))
    result = await gateway.call("bump_all", {"by": "lots"})
    assert result.is_error
    assert (
        "invalid arguments for 'bump_all'" in sections(result)[0]
        and "Nothing was called" in sections(result)[0]
    )
    assert await counters(gateway) == before
    assert len(await inner_records(gateway, "alpha__increment")) == calls_before
    ok = await gateway.call("bump_all", {"by": 2})
    assert not ok.is_error
    assert await counters(gateway) == (before[0] + 2, before[1] + 2)


async def test_inner_calls_are_validated_like_client_calls(gateway: Gateway) -> None:
    assert schema_of(gateway, "add_templated")["required"] == ["x"]
    result = await gateway.call("add_templated", {"x": 41})
    assert result.is_error
    alpha, beta = result.structured_content["results"]
    assert alpha["structuredContent"] == {"sum": 42}
    assert beta["isError"]
    assert beta["text"].startswith("invalid arguments for 'beta__add': argument 'b': 1.5 is not of type")
    assert await inner_records(gateway, "beta__add") == []  # rejected by the gateway, not by the backend


async def test_merged_schema_intersects_enums_and_keeps_target_descriptions(gateway: Gateway) -> None:
    schema = schema_of(gateway, "scrape_everywhere")
    props = schema["properties"]
    assert props["format"]["enum"] == ["markdown"]  # the only value both targets accept
    assert (
        props["format"]["description"]
        == "How to render the post: markdown to read it, json for its raw fields"
    )
    assert set(props) == {"url", "format", "reddit_url"}
    assert "required" not in schema  # each property is read by only one of the two targets
    tool = next(t for t in gateway.list_tools() if t.name == "scrape_everywhere")
    assert tool.annotations.read_only_hint is True and tool.annotations.open_world_hint is False
    assert "# Optional inputs" in tool.description and "alpha__scrape" in tool.description


# -- through the MCP front -------------------------------------------------------------------


MODES = [pytest.param("auto", id="2026-07-28"), pytest.param("legacy", id="2025-11-25")]


@pytest.mark.parametrize("mode", MODES)
async def test_over_mcp_http_with_progress_per_finished_target(mcp_url: str, mode: str) -> None:
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    async with Client(mcp_url, mode=mode) as client:
        listed = {tool.name for tool in (await client.list_tools()).tools}
        assert {"search_all", "sleep_all", "beta_find"} <= listed and "alpha__echo" not in listed
        result = await client.call_tool(
            "sleep_all", {"seconds": 0.05, "label": "p"}, progress_callback=on_progress
        )
        assert not result.is_error
        assert [r["tool"] for r in result.structured_content["results"]] == [
            t["tool"] for t in meta(result)["targets"]
        ]
        assert meta(result)["kind"] == "fanout"
        for _ in range(100):  # notifications and the response travel separately: let stragglers land
            if len(seen) == 3:
                break
            await asyncio.sleep(0.01)
        assert [(p, t) for p, t, _m in seen] == [(1.0, 3.0), (2.0, 3.0), (3.0, 3.0)]
        finished = [m for _p, _t, m in seen]
        assert sorted(finished) == [
            "alpha__sleep completed",
            "beta__sleep completed",
            "gamma__sleep completed",
        ]

        failed = await client.call_tool("echo_all", {"text": "hi"})
        assert failed.is_error
        assert len(failed.content) == 1, "one text item: clients that keep only the first see every target"
        assert sections(failed)[::2] == [
            "## alpha__echo",
            "## beta__echo",
            "## gamma__echo (failed)",
        ]


@pytest.mark.parametrize("mode", MODES)
async def test_over_mcp_http_a_cancelled_call_cancels_its_targets(
    mcp_url: str, gateway: Gateway, mode: str
) -> None:
    label = f"http-cancel-{mode}"

    async def running() -> list[Any]:
        found = []
        for name in ("alpha__sleep", "beta__sleep", "gamma__sleep"):
            found += [
                r for r in await inner_records(gateway, name, "running") if r.arguments["label"] == label
            ]
        return found

    async with Client(mcp_url, mode=mode) as client:
        call = asyncio.create_task(client.call_tool("sleep_all", {"seconds": 30, "label": label}))
        async with asyncio.timeout(10):
            while len(await running()) < 3:  # noqa: ASYNC110 - polls run records, which have no event
                await asyncio.sleep(0.01)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        async with asyncio.timeout(10):
            while await running():  # noqa: ASYNC110 - the cancellation travels to the gateway
                await asyncio.sleep(0.01)
    for name in ("alpha__sleep", "beta__sleep", "gamma__sleep"):
        statuses = [r.status for r in await inner_records(gateway, name) if r.arguments["label"] == label]
        assert statuses == ["cancelled"], name


async def test_over_mcp_http_invalid_arguments(mcp_url: str, gateway: Gateway) -> None:
    before = await counters(gateway)
    async with Client(mcp_url) as client:
        result = await client.call_tool("bump_all", {"by": "lots"})
    assert result.is_error and "Nothing was called" in result.content[0].text
    assert await counters(gateway) == before
