"""The Python API (SPEC §4) and "failures are results", over a real stdio MCP backend."""

from __future__ import annotations

import json
from pathlib import Path

from support.executor import MakeGateway, backend
from support.results import text
from toolweave import Gateway


async def test_python_api_end_to_end(make_gateway: MakeGateway) -> None:
    gw = await make_gateway(backend())
    names = [tool.name for tool in gw.list_tools()]
    assert {"t__echo", "t__sleep", "t__slow_write"} <= set(names)
    result = await gw.call("t__add", {"a": 20, "b": 22})
    assert not result.is_error and result.structured_content == {"sum": 42}
    results = await gw.execute_batch(
        [{"id": "a", "name": "t__echo", "arguments": {"text": "one"}}, {"id": "b", "name": "t__counter"}]
    )
    assert text(results[0]) == "one" and results[1].structured_content == {"value": 0}
    exported = gw.export("openai")
    assert "t__echo" in json.dumps(exported, default=str)


async def test_from_config_as_an_async_context_manager(tmp_path: Path) -> None:
    path = tmp_path / "toolweave.toml"
    path.write_text(backend())
    async with Gateway.from_config(path) as gw:
        assert not (await gw.call("t__echo", {"text": "hi"})).is_error


async def test_every_failure_is_a_result(make_gateway: MakeGateway) -> None:
    gw = await make_gateway(backend(extra='tools.sleep.timeout = "0.2s"'))
    backend_error = await gw.call("t__fail", {"message": "disk full"})
    assert backend_error.is_error and "disk full" in text(backend_error)
    timeout = await gw.call("t__sleep", {"seconds": 30})
    assert timeout.is_error and "timed out" in text(timeout)
    invalid = await gw.call("t__add", {"a": 1})
    assert invalid.is_error and "invalid arguments for 't__add'" in text(invalid)
    not_an_object = await gw.call("t__echo", ["hi"])  # type: ignore[arg-type]
    assert not_an_object.is_error and "must be a JSON object" in text(not_an_object)
    unknown = await gw.call("nope")
    assert unknown.is_error and "unknown tool 'nope'" in text(unknown)
    # and the session goes on
    assert text(await gw.call("t__echo", {"text": "alive"})) == "alive"


async def test_search_mode_calls_are_classified_by_their_target(make_gateway: MakeGateway) -> None:
    gw = await make_gateway('[gateway]\ntool_exposure = "search"\n' + backend())
    ex = gw.default_executor
    assert ex.classify("find_tools", {"query": "echo"}) == "read"
    assert ex.classify("call_tool", {"name": "t__increment"}) == "serial"
    assert ex.classify("call_tool", {"name": "t__counter"}) == "read"
    assert ex.classify("call_tool", {"name": "call_tool"}) == "short"
    # so [read, write, read] through call_tool still keeps its barriers
    results = await gw.execute_batch(
        [
            {"id": "1", "name": "call_tool", "arguments": {"name": "t__counter"}},
            {"id": "2", "name": "call_tool", "arguments": {"name": "t__increment", "arguments": {"by": 3}}},
            {"id": "3", "name": "call_tool", "arguments": {"name": "t__counter"}},
        ]
    )
    assert [r.structured_content for r in results] == [{"value": 0}, {"value": 3}, {"value": 3}]
