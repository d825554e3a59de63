"""Prometheus metrics (calls, errors, latency by tool and backend, recorded once per call, inner calls
included), who may read them, and the structured JSON logs."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import httpx
import mcp_types as types
import pytest

from support.api import GREETER, AppFactory, without_instance
from support.configs import config, http_backend, python_backend
from toolweave.backends.mcp import MCPBackend
from toolweave.backends.python import PythonBackend
from toolweave.catalog.catalog import Entry
from toolweave.services.logs import configure_logging
from toolweave.services.metrics import Metrics

API = "/api/v1"


def sample(text: str, name: str, **labels: str) -> float:
    """The value of one series in the exposition text (0 when absent)."""
    wanted = ",".join(f'{key}="{value}"' for key, value in sorted(labels.items()))
    for line in without_instance(text).splitlines():
        if line.startswith(f"{name}{{{wanted}}} "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


async def test_calls_errors_and_latency_by_tool_and_backend(sqlite_app: AppFactory) -> None:
    api = await sqlite_app({"backends": [python_backend()]})
    async with api.client() as client:
        await client.post(f"{API}/composite-tools", json={"definition": GREETER})
        await client.post(f"{API}/tools/py__greet/call", json={"name": "a"})
        await client.post(f"{API}/tools/py__explode/call", json={})
        await client.post(
            f"{API}/composite-tools/invoke",
            json={"tool": "greeter", "params": {"operation": "greet", "name": "b"}},
        )
        text = (await client.get("/metrics")).text
    greet = {"tool": "py__greet", "backend": "py", "kind": "backend", "tenant": ""}  # the operator
    assert sample(text, "toolweave_tool_calls_total", **greet) == 2  # direct + the router's inner call
    assert sample(text, "toolweave_tool_errors_total", **greet) == 0
    explode = {"tool": "py__explode", "backend": "py", "kind": "backend", "tenant": ""}
    assert sample(text, "toolweave_tool_errors_total", **explode) == 1
    router = {"tool": "greeter", "backend": "(composite)", "kind": "router", "tenant": ""}
    assert sample(text, "toolweave_tool_calls_total", **router) == 1
    assert sample(text, "toolweave_tool_call_seconds_count", **router) == 1
    assert sample(text, "toolweave_backend_connected", backend="py") == 1
    assert "toolweave_tool_call_seconds_bucket" in text


async def test_metrics_need_a_key_off_loopback_when_auth_is_on(sqlite_app: AppFactory) -> None:
    api = await sqlite_app({"backends": [python_backend()]}, require_auth=True)
    key = await api.key("ops", "tools:read")
    remote = httpx.ASGITransport(app=api.app, client=("10.1.2.3", 40000))
    async with httpx.AsyncClient(transport=remote, base_url="http://127.0.0.1:8080") as client:
        assert (await client.get("/metrics")).status_code == 401
        allowed = await client.get("/metrics", headers={"Authorization": f"Bearer {key}"})
        assert allowed.status_code == 200 and "toolweave_tools" in allowed.text
    async with api.client() as local:
        assert (await local.get("/metrics")).status_code == 200


@pytest.fixture
def json_logs() -> Iterator[io.StringIO]:
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    stream = io.StringIO()
    configure_logging("debug", json_lines=True, stream=stream)
    try:
        yield stream
    finally:
        for handler in list(root.handlers):
            root.removeHandler(handler)
        for handler in saved[0]:
            root.addHandler(handler)
        root.setLevel(saved[1])


async def test_json_logs_are_one_object_per_line(sqlite_app: AppFactory, json_logs: io.StringIO) -> None:
    api = await sqlite_app({"backends": [python_backend()]})
    async with api.client() as client:
        await client.post(f"{API}/tools/py__greet/call", json={"name": "logged-argument-value"})
    logging.getLogger("toolweave.test").warning("hello %s", "world", extra={"tool": "x"})
    lines = [json.loads(line) for line in json_logs.getvalue().splitlines() if line.strip()]
    assert lines and all({"ts", "level", "logger", "message"} <= set(line) for line in lines)
    assert {
        "level": "warning",
        "logger": "toolweave.test",
        "message": "hello world",
        "tool": "x",
    }.items() <= lines[-1].items()
    calls = [line for line in lines if line["logger"] == "toolweave.calls"]
    assert calls and calls[0]["tool"] == "py__greet" and calls[0]["backend"] == "py"
    assert "logged-argument-value" not in json_logs.getvalue()  # argument values are never logged


def test_label_children_follow_the_entry_a_name_has_now() -> None:
    """`Metrics.observe` looks the label children up once per entry and tenant: an entry replaced
    under the same name (a backend reconfigured, a refresh) counts under its own labels, each tenant
    under its own, and a result status gets its series only when first seen."""
    settings = config(http_backend("a", "http://127.0.0.1:9/mcp"), python_backend("p")).backends
    tool = types.Tool(name="echo", input_schema={"type": "object"})
    before = Entry(name="x__echo", tool=tool, backend=MCPBackend(settings[0]), backend_tool="echo")
    after = Entry(name="x__echo", tool=tool, backend=PythonBackend(settings[1]), backend_tool="echo")
    ok = types.CallToolResult(content=[types.TextContent(type="text", text="hi")])
    failed = types.CallToolResult(content=[types.TextContent(type="text", text="no")], is_error=True)
    metrics = Metrics(instance="test")
    value = metrics.registry.get_sample_value
    for entry, result, tenant in ((before, ok, None), (before, ok, None), (after, failed, None)):
        metrics.observe(entry, result, 0.002, tenant)
    metrics.observe(before, ok, 0.002, "acme")
    labels = {"tool": "x__echo", "backend": "a", "kind": "backend", "tenant": ""}
    assert value("toolweave_tool_calls_total", labels) == 2
    assert value("toolweave_tool_errors_total", labels) == 0
    assert value("toolweave_tool_call_seconds_count", labels) == 2
    assert value("toolweave_tool_calls_total", {**labels, "tenant": "acme"}) == 1
    assert value("toolweave_tool_calls_total", {**labels, "backend": "p"}) == 1
    assert value("toolweave_tool_errors_total", {**labels, "backend": "p"}) == 1
    assert value("toolweave_tool_results_total", {"source": "backend", "status": "ok"}) == 3
    assert value("toolweave_tool_results_total", {"source": "backend", "status": "error"}) is None
    assert value("toolweave_tool_results_total", {"source": "python", "status": "error"}) == 1
    assert value("toolweave_tool_results_total", {"source": "python", "status": "ok"}) is None
