"""Single calls through the executor: unknown tools, hidden tools, policy, validation, search mode.

(Batches, pools, approval and policy rules in depth have their own modules.)
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import tw_pytools

from support.configs import python_backend
from support.fixtures import OpenGateway
from support.results import text
from toolweave import Gateway
from toolweave.executor import Session

PY = python_backend(hide=["drop_table"], tools={"nap": {"timeout": "100ms"}})


@pytest.fixture
async def gateway(open_gateway: OpenGateway) -> Gateway:
    return await open_gateway({"backends": [PY]})


# -- unknown tools ---------------------------------------------------------------------


async def test_unknown_tool_suggests_close_names(gateway: Gateway) -> None:
    result = await gateway.call("py__gret", {"name": "x"})
    assert result.is_error and text(result) == "unknown tool 'py__gret'. Did you mean: py__greet?"
    nothing = await gateway.call("launch_rockets", {})
    assert text(nothing) == "unknown tool 'launch_rockets'. List the tools to see what exists."
    assert (await gateway.call("greet", {"name": "x"})).is_error  # the bare backend name is not exposed


async def test_unknown_tool_of_a_backend_that_is_down_says_why(
    open_gateway: OpenGateway, tmp_path: Any
) -> None:
    missing = str(tmp_path / "not-installed")
    gateway = await open_gateway(
        {
            "backends": [
                PY,
                {"name": "ghost", "command": missing},
                {"name": "off", "command": "x", "enabled": False},
            ]
        }
    )
    result = await gateway.call("ghost__search", {})
    assert result.is_error
    assert text(result).startswith("unknown tool 'ghost__search': backend 'ghost' is not connected (")
    assert f"command not found: {missing}" in text(result)
    inner = await gateway.default_executor.call_inner("ghost/search", {})
    assert "backend 'ghost' is not connected" in text(inner)
    off = await gateway.call("off__search", {})
    assert (
        text(off)
        == "unknown tool 'off__search': backend 'off' is disabled in the config, so its tools are not available."
    )
    assert "off" not in gateway.backends
    assert not (await gateway.call("py__greet", {"name": "still served"})).is_error


# -- hidden tools -------------------------------------------------------------------------


async def test_hidden_tools_are_unknown_to_clients_but_callable_from_composites(gateway: Gateway) -> None:
    assert "py__drop_table" not in [t.name for t in gateway.list_tools()]
    hidden = await gateway.call("py__drop_table", {"table": "users"})
    assert hidden.is_error and text(hidden).startswith("unknown tool 'py__drop_table'")
    executor = gateway.default_executor
    for reference in ("py__drop_table", "py/drop_table", "py.drop_table"):
        result = await executor.call_inner(reference, {"table": "users"})
        assert not result.is_error and text(result) == "dropped users", reference
    unknown = await executor.call_inner("py/nope", {})
    assert unknown.is_error and text(unknown).startswith("unknown tool 'py/nope'")


# -- policy -------------------------------------------------------------------------------


async def test_policy_denial_covers_direct_and_inner_calls(open_gateway: OpenGateway) -> None:
    gateway = await open_gateway({"backends": [PY], "policy": {"deny": ["py__drop_*", "re:py__mul.*"]}})
    before = tw_pytools.CALLS["greet"]
    denied = await gateway.call("py__multiply", {"a": 1, "b": 2})
    assert denied.is_error and text(denied) == "tool 'py__multiply' is denied by the gateway policy"
    # a composite's inner call is checked too, even for a hidden tool reached by reference
    inner = await gateway.default_executor.call_inner("py/drop_table", {"table": "t"})
    assert inner.is_error and text(inner) == "tool 'py__drop_table' is denied by the gateway policy"
    assert not (await gateway.call("py__greet", {"name": "ok"})).is_error
    assert tw_pytools.CALLS["greet"] == before + 1


async def test_a_session_without_the_call_scope_calls_nothing(gateway: Gateway) -> None:
    reader = gateway.executor(Session(scopes=frozenset({"tools:read"})))
    result = await reader.call("py__greet", {"name": "x"})
    assert result.is_error and text(result) == "calling 'py__greet' needs the tools:call scope"


# -- arguments ---------------------------------------------------------------------------


async def test_arguments_of_the_wrong_type_are_refused_before_the_backend(gateway: Gateway) -> None:
    before = tw_pytools.CALLS["greet"]
    result = await gateway.call("py__greet", {"name": 7, "excited": "very", "volume": 11})
    assert result.is_error
    message = text(result)
    assert message.startswith("invalid arguments for 'py__greet': ")
    assert "argument 'name': 7 is not of type 'string'" in message
    assert "argument 'excited': 'very' is not of type 'boolean'" in message
    assert "unexpected argument(s)" in message and "'volume'" in message
    assert message.endswith("Nothing was called.")
    missing = await gateway.call("py__greet", {})
    assert "missing required argument 'name'" in text(missing)
    assert tw_pytools.CALLS["greet"] == before


@pytest.mark.parametrize("arguments", [[1, 2], "name=x", 42, True])
async def test_arguments_that_are_not_an_object(gateway: Gateway, arguments: Any) -> None:
    result = await gateway.call("py__greet", arguments)
    assert result.is_error
    assert text(result) == f"arguments for 'py__greet' must be a JSON object, got {type(arguments).__name__}"


async def test_missing_arguments_mean_an_empty_object(gateway: Gateway) -> None:
    assert text(await gateway.call("py__numbers")) == "[0,1,2]"
    assert text(await gateway.call("py__numbers", None)) == "[0,1,2]"


async def test_per_tool_timeout_override(gateway: Gateway) -> None:
    slow = await gateway.call("py__nap", {"seconds": 3})
    assert slow.is_error and text(slow) == "tool 'nap' on backend 'py' timed out after 0.1s"


async def test_an_exception_inside_the_gateway_is_a_result(
    gateway: Gateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("wires crossed")

    monkeypatch.setattr(gateway.backends["py"], "call_tool", broken)
    result = await gateway.call("py__greet", {"name": "x"})
    assert result.is_error
    assert text(result) == "calling 'py__greet' failed inside the gateway: RuntimeError: wires crossed"


async def test_direct_calls_can_be_recorded(open_gateway: OpenGateway) -> None:
    gateway = await open_gateway({"backends": [PY], "gateway": {"record_direct_calls": True}})
    await gateway.call("py__greet", {"name": "Ann"})
    (record,) = await gateway.runs.list_runs(tool="py__greet")
    assert record.kind == "direct" and record.status == "completed" and record.arguments == {"name": "Ann"}
    assert record.finished_at is not None and record.latency_ms >= 0
    await gateway.call("py__explode", {"message": "bad"})
    (failed,) = await gateway.runs.list_runs(tool="py__explode")
    assert failed.status == "failed" and failed.error == "explode failed: bad"


# -- search mode -------------------------------------------------------------------------

FIND_USAGE = "find_tools needs {query: string, limit?: integer 1-50, detail?: boolean}"


@pytest.fixture
async def search_gateway(open_gateway: OpenGateway) -> Gateway:
    return await open_gateway(
        {"backends": [PY], "gateway": {"tool_exposure": "search", "pinned": ["py__greet", "py__not_there"]}}
    )


async def test_search_mode_lists_find_tools_call_tool_and_pinned(search_gateway: Gateway) -> None:
    assert [t.name for t in search_gateway.list_tools()] == ["find_tools", "call_tool", "py__greet"]


async def test_find_tools_ranks_by_relevance(search_gateway: Gateway) -> None:
    result = await search_gateway.call("find_tools", {"query": "multiply two numbers", "limit": 2})
    assert not result.is_error and result.structured_content is None  # the payload is sent once, as text
    lines = text(result).splitlines()
    assert lines[0].startswith("py__multiply(a: number, b: number) - ") and len(lines) <= 3
    detailed = await search_gateway.call("find_tools", {"query": "multiply two numbers", "detail": True})
    found = json.loads(text(detailed))["tools"]
    assert found[0]["name"] == "py__multiply" and found[0]["inputSchema"]["required"] == ["a", "b"]
    hidden = await search_gateway.call("find_tools", {"query": "drop table"})
    assert "py__drop_table" not in text(hidden)
    none = await search_gateway.call("find_tools", {"query": "kubernetes"})
    assert text(none) == "No tool matches 'kubernetes'. Try other words for what you want to do."


async def test_call_tool_calls_what_find_tools_found(search_gateway: Gateway) -> None:
    result = await search_gateway.call("call_tool", {"name": "py__multiply", "arguments": {"a": 6, "b": 7}})
    assert result.structured_content == {"product": 42.0}
    direct = await search_gateway.call("py__multiply", {"a": 1, "b": 2})  # unlisted but still callable
    assert direct.structured_content == {"product": 2.0}
    invalid = await search_gateway.call("call_tool", {"name": "py__multiply", "arguments": {"a": "x"}})
    assert invalid.is_error and "invalid arguments for 'py__multiply'" in text(invalid)
    hidden = await search_gateway.call("call_tool", {"name": "py__drop_table", "arguments": {"table": "t"}})
    assert hidden.is_error and "unknown tool 'py__drop_table'" in text(hidden)


@pytest.mark.parametrize(
    ("name", "arguments", "message"),
    [
        ("find_tools", {}, f"{FIND_USAGE}: 'query' must be a non-empty string"),
        ("find_tools", {"query": "  "}, f"{FIND_USAGE}: 'query' must be a non-empty string"),
        (
            "find_tools",
            {"query": "x", "limit": 0},
            f"{FIND_USAGE}: 'limit' must be an integer from 1 to 50, not 0",
        ),
        (
            "find_tools",
            {"query": "x", "limit": True},
            f"{FIND_USAGE}: 'limit' must be an integer from 1 to 50, not True",
        ),
        (
            "find_tools",
            {"query": "x", "limit": 51},
            f"{FIND_USAGE}: 'limit' must be an integer from 1 to 50, not 51",
        ),
        (
            "find_tools",
            {"query": "x", "detail": "yes"},
            f"{FIND_USAGE}: 'detail' must be true or false, not 'yes'",
        ),
        ("find_tools", {"query": "x", "limt": 3}, f"{FIND_USAGE}: unknown argument(s) 'limt'"),
        ("find_tools", ["x"], "arguments for 'find_tools' must be a JSON object"),
        ("call_tool", {}, "call_tool needs {name: string, arguments?: object}; use find_tools to find names"),
        (
            "call_tool",
            {"name": 3},
            "call_tool needs {name: string, arguments?: object}; use find_tools to find names",
        ),
        ("call_tool", {"name": "call_tool"}, "call_tool cannot call itself or find_tools"),
        (
            "call_tool",
            {"name": "find_tools", "arguments": {"query": "x"}},
            "call_tool cannot call itself or find_tools",
        ),
        (
            "call_tool",
            {"name": "py__greet", "arguments": [1]},
            "arguments for 'py__greet' must be a JSON object, got list",
        ),
    ],
)
async def test_bad_search_mode_calls(
    search_gateway: Gateway, name: str, arguments: Any, message: str
) -> None:
    result = await search_gateway.call(name, arguments)
    assert result.is_error and text(result) == message


async def test_find_tools_is_an_ordinary_unknown_tool_outside_search_mode(gateway: Gateway) -> None:
    result = await gateway.call("find_tools", {"query": "x"})
    assert result.is_error and text(result).startswith("unknown tool 'find_tools'")
