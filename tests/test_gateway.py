"""The assembled gateway with real backends: concurrent startup, failures that stay local, crash and
restart mid-session, list changes, resources and prompts, run records.

Tests whose subject is the child process (start-up, crash, garbage on stdout, stop) start the test
server as one; the others run the same server in this process (`in_process_testserver`)."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from support.configs import http_backend, python_backend, stdio_backend, time_backend
from support.fixtures import OpenGateway, WriteConfig
from support.processes import free_port, wait_until
from support.results import names, text
from toolweave import Gateway
from toolweave.backends.mcp import MCPBackend


async def test_stdio_backends_start_concurrently(
    open_gateway: OpenGateway, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Structural, not timed: every backend's connection attempt began before any of them finished."""
    spans: dict[str, tuple[float, float]] = {}
    original = MCPBackend._open_client

    async def recording(self: MCPBackend) -> object:
        started = time.monotonic()
        try:
            return await original(self)
        finally:
            spans[self.name] = (started, time.monotonic())

    monkeypatch.setattr(MCPBackend, "_open_client", recording)
    gateway = await open_gateway({"backends": [stdio_backend(f"s{i}") for i in range(5)]})
    assert sorted(spans) == ["s0", "s1", "s2", "s3", "s4"]
    assert max(start for start, _ in spans.values()) < min(end for _, end in spans.values())
    assert all(b["status"] == "connected" for b in gateway.describe_backends())
    assert len([n for n in names(gateway.list_tools()) if n.endswith("__echo")]) == 5


async def test_a_backend_slower_than_the_startup_timeout_joins_later(open_gateway: OpenGateway) -> None:
    gateway = await open_gateway(
        {"backends": [python_backend(), stdio_backend()], "gateway": {"startup_timeout": "1ms"}}
    )
    changed = asyncio.Event()
    gateway.on_tools_changed(changed.set)
    if gateway.backends["ts"].status != "connected":  # the usual case: serving began without it
        assert "ts__echo" not in names(gateway.list_tools()) and "py__greet" in names(gateway.list_tools())
        early = await gateway.call("ts__echo", {"text": "x"})
        assert early.is_error and "backend 'ts' is not connected (starting)" in text(early)
        async with asyncio.timeout(10):
            await changed.wait()
    assert "ts__echo" in names(gateway.list_tools())
    assert text(await gateway.call("ts__echo", {"text": "late"})) == "late"


async def test_bad_backends_stay_local(open_gateway: OpenGateway, tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-binary")
    gateway = await open_gateway(
        {
            "backends": [
                stdio_backend(),
                time_backend(),
                python_backend(),
                {"name": "nocmd", "command": missing},
                http_backend("refused", f"http://127.0.0.1:{free_port()}/mcp"),
                python_backend("nomod", module="tw_no_such_module"),
                python_backend("broken", module="tw_pytools_broken"),
            ]
        }
    )
    status = {b["name"]: (b["status"], b["last_error"]) for b in gateway.describe_backends()}
    assert status["ts"] == status["time"] == status["py"] == ("connected", None)
    assert (
        status["nocmd"][0] in ("failed", "reconnecting")
        and status["nocmd"][1] == f"command not found: {missing}"
    )
    assert status["refused"][1].startswith("cannot connect:")
    assert "No module named 'tw_no_such_module'" in status["nomod"][1]
    assert "this module is broken on purpose" in status["broken"][1]
    listed = names(gateway.list_tools())
    assert {"ts__echo", "time__get_current_time", "py__greet"} <= set(listed)
    assert not any(n.startswith(("nocmd__", "refused__", "nomod__", "broken__")) for n in listed)
    assert text(await gateway.call("ts__echo", {"text": "hi"})) == "hi"
    assert (await gateway.call("time__get_current_time", {"timezone": "UTC"})).structured_content[
        "timezone"
    ] == "UTC"
    assert text(await gateway.call("py__greet", {"name": "Al"})) == "Hello, Al."
    down = await gateway.call("refused__echo", {"text": "x"})
    assert down.is_error and "backend 'refused' is not connected" in text(down)


async def test_crash_mid_session_restarts_the_backend_and_the_rest_keeps_serving(
    open_gateway: OpenGateway,
) -> None:
    gateway = await open_gateway({"backends": [stdio_backend(), python_backend()]})
    backend = gateway.backends["ts"]
    first_connection = backend.connected_at
    crashed = await gateway.call("ts__crash", {})
    assert crashed.is_error and "backend 'ts' is unavailable (connection lost" in text(crashed)
    # during the outage: the other backend serves, and ts's tools stay listed with a clear error
    assert text(await gateway.call("py__greet", {"name": "during"})) == "Hello, during."
    assert "ts__echo" in names(gateway.list_tools())
    await wait_until(lambda: backend.connected_at != first_connection, what="ts reconnected")
    assert backend.status == "connected"
    assert text(await gateway.call("ts__echo", {"text": "after"})) == "after"


async def test_garbage_and_tool_errors_do_not_disturb_other_calls(open_gateway: OpenGateway) -> None:
    gateway = await open_gateway({"backends": [stdio_backend()]})
    results = await asyncio.gather(
        gateway.call("ts__garbage", {}),
        gateway.call("ts__fail", {"message": "nope"}),
        gateway.call("ts__echo", {"text": "fine"}),
        gateway.call("ts__add", {"a": 1, "b": "two"}),
    )
    assert text(results[0]) == "answered after garbage" and not results[0].is_error
    assert results[1].is_error and "nope" in text(results[1])
    assert text(results[2]) == "fine"
    assert results[3].is_error and "argument 'b'" in text(results[3])
    assert gateway.backends["ts"].status == "connected"


@pytest.mark.usefixtures("in_process_testserver")  # not about the process: the test server in-process
async def test_list_changed_rebuilds_the_catalog_and_tells_listeners(open_gateway: OpenGateway) -> None:
    gateway = await open_gateway({"backends": [stdio_backend(), python_backend()]})
    changed = asyncio.Event()
    unsubscribe = gateway.on_tools_changed(changed.set)
    assert text(await gateway.call("ts__add_tool", {"name": "brand_new"})) == "added brand_new"
    async with asyncio.timeout(5):
        await changed.wait()
    assert "ts__brand_new" in names(gateway.list_tools())
    assert text(await gateway.call("ts__brand_new", {})) == "I am brand_new"
    unsubscribe()


@pytest.mark.usefixtures("in_process_testserver")  # not about the process: the test server in-process
async def test_tools_stay_in_their_namespace_after_a_change(open_gateway: OpenGateway) -> None:
    gateway = await open_gateway(
        {"backends": [stdio_backend(hide=["dyn_hidden"], tools={"dyn_renamed": {"name": "renamed_dyn"}})]}
    )
    for name in ("dyn_hidden", "dyn_renamed"):
        await gateway.call("ts__add_tool", {"name": name})
    await wait_until(lambda: gateway.catalog.get("renamed_dyn") is not None, what="rebuild")
    await wait_until(lambda: gateway.catalog.get("ts__dyn_hidden") is not None, what="rebuild")
    listed = names(gateway.list_tools())
    assert "renamed_dyn" in listed and "ts__dyn_renamed" not in listed and "ts__dyn_hidden" not in listed


@pytest.mark.usefixtures("in_process_testserver")  # not about the process: the test server in-process
async def test_name_conflicts_are_reported_and_the_rest_is_served(open_gateway: OpenGateway) -> None:
    gateway = await open_gateway(
        {"backends": [stdio_backend("one", namespace=False), stdio_backend("two", namespace=False)]}
    )
    issues = [str(issue) for issue in gateway.catalog.issues]
    assert any(
        "backend 'two' tool 'echo' and backend 'one' tool 'echo' are both exposed as 'echo'" in i
        for i in issues
    )
    assert text(await gateway.call("echo", {"text": "x"})) == "x"
    two = await gateway.default_executor.call_inner("two/search", {"query": "q"})
    assert text(two).startswith("testserver results")
    assert gateway.catalog.lookup("two/search").backend.name == "two"


@pytest.mark.usefixtures("in_process_testserver")  # not about the process: the test server in-process
async def test_resources_and_prompts_are_namespaced(open_gateway: OpenGateway) -> None:
    gateway = await open_gateway(
        {
            "backends": [
                stdio_backend(),
                stdio_backend("bare", namespace=False, env={"TESTSERVER_NAME": "bare"}),
            ]
        }
    )
    resources = gateway.resources()
    assert set(resources) == {"test://readme"}  # routed by URI: the first backend that has it
    resource, backend = resources["test://readme"]
    assert resource.name == "ts__readme" and backend.name == "ts"
    assert [t.name for t in gateway.resource_templates()] == ["ts__item", "item"]
    assert gateway.backend_for_template("test://items/9").name == "ts"
    assert gateway.backend_for_template("other://x") is None
    prompts = gateway.prompts()
    assert set(prompts) == {"ts__greet", "greet"}
    _prompt, owner, original = prompts["greet"]
    assert owner.name == "bare" and original == "greet"


@pytest.mark.usefixtures("in_process_testserver")  # not about the process: the test server in-process
async def test_run_records_redact_secret_arguments(open_gateway: OpenGateway) -> None:
    gateway = await open_gateway({"backends": [stdio_backend()], "gateway": {"record_direct_calls": True}})
    result = await gateway.call("ts__secret_echo", {"password": "hunter2"})
    assert text(result) == "length 7"
    (record,) = await gateway.runs.list_runs(tool="ts__secret_echo")
    assert record.arguments == {"password": "[redacted]"} and record.status == "completed"
    invalid = await gateway.call("ts__secret_echo", {"password": 1234567})
    assert "1234567" not in text(invalid) and "argument 'password' is invalid" in text(invalid)


async def test_from_config_file_as_a_context_manager(write_config: WriteConfig) -> None:
    path = write_config({"backends": [python_backend()]})
    async with Gateway.from_config(path) as gateway:
        assert text(await gateway.call("py__greet", {"name": "file"})) == "Hello, file."
        backend = gateway.backends["py"]
    assert backend.status == "stopped"


async def test_stop_stops_every_backend(open_gateway: OpenGateway) -> None:
    gateway = await open_gateway({"backends": [stdio_backend(), python_backend()]})
    await gateway.stop()
    assert {b["status"] for b in gateway.describe_backends()} == {"stopped"}
    result = await gateway.call("ts__echo", {"text": "x"})
    assert result.is_error and "unavailable (stopped" in text(result)
