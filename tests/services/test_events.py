"""The `tool_result` trace: one event per call, whatever the tool's origin, in run records, logs,
metrics and the live `GET /api/v1/events` stream (tenant-scoped).

A served gateway (SQLite, keys required) with an in-process Python backend, and a federated
client process (`tests/servers/federated_tools.py`) for the federated tools.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest

from support.api import without_instance
from support.configs import python_backend
from support.federation import FAST_HEARTBEAT, python_client, registered, served
from support.processes import wait_until

WORKFLOW = {
    "name": "priced_stock",
    "description": "Stock from the warehouse's own system, then a local computation.",
    "parameters": {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]},
    "steps": [
        {"id": "count", "tool": "inv/stock", "arguments": {"sku": "{{ params.sku }}"}},
        {
            "id": "price",
            "tool": "py/multiply",
            "dependsOn": ["count"],
            "arguments": {"a": "{{ steps.count.output.count }}", "b": 2},
        },
    ],
}


@contextlib.asynccontextmanager
async def event_stream(base: str, key: str) -> AsyncIterator[asyncio.Queue[dict[str, Any]]]:
    """`GET /api/v1/events` read in the background; yields a queue of the parsed events."""
    events: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    opened = asyncio.Event()

    async def read() -> None:
        async with (
            httpx.AsyncClient(
                base_url=base, headers={"Authorization": f"Bearer {key}"}, timeout=None
            ) as http,
            http.stream("GET", "/api/v1/events") as response,
        ):
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            opened.set()
            kind = None
            async for line in response.aiter_lines():
                if line.startswith("event: "):
                    kind = line.removeprefix("event: ")
                elif line.startswith("data: ") and kind == "tool_result":
                    events.put_nowait(orjson.loads(line.removeprefix("data: ")))

    task = asyncio.create_task(read())
    try:
        await asyncio.wait_for(opened.wait(), 10)
        yield events
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await task


async def next_event(events: asyncio.Queue[dict[str, Any]], tool: str) -> dict[str, Any]:
    async with asyncio.timeout(10):
        while True:
            event = await events.get()
            if event["tool"] == tool:
                return event


async def calls_followed(base: str, acme: str, globex: str) -> tuple[Any, Any, dict[str, Any], str]:
    """Both tenants' streams open while acme and globex make calls; (acme's, globex's, acme's run, metrics)."""
    async with event_stream(base, acme) as mine, event_stream(base, globex) as theirs:
        async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {acme}"}) as http:
            await http.post("/api/v1/tools/inv__stock/call", json={"sku": "abc"})
            await http.post("/api/v1/tools/py__explode/call", json={"message": "kaboom"})
            ran = (await http.post("/api/v1/tools/priced_stock/call", json={"sku": "ab"})).json()
            await asyncio.sleep(0.3)  # the run record is written behind
            run = (await http.get(f"/api/v1/runs/{ran['_meta']['toolweave']['run_id']}")).json()
            metrics = (await http.get("/metrics")).text
        async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {globex}"}) as http:
            await http.post("/api/v1/tools/py__greet/call", json={"name": "g"})
        # acme: its 3 calls and the workflow's 2 inner calls; globex: its one call
        await wait_until(lambda: mine.qsize() >= 5 and theirs.qsize() >= 1, 10, "events streamed")
        return mine, theirs, run, metrics


async def test_every_call_is_one_tool_result_event_streamed_to_its_tenant_only(
    sqlite_app, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="toolweave.trace")
    api = await sqlite_app(
        {
            "backends": [python_backend("py")],
            "federation": {**FAST_HEARTBEAT, "namespaces": [{"name": "inv"}]},
            "composite_tools": [WORKFLOW],
        },
        require_auth=True,
    )
    client_key = await api.key("acme", "tools:federate")
    acme = await api.key("acme", "tools:read", "tools:call")
    globex = await api.key("globex", "tools:read", "tools:call")
    async with served(api) as base:
        with python_client(base, client_key, "inv"):
            await registered(api.gateway, "priced_stock")
            mine, theirs, run, metrics = await calls_followed(base, acme, globex)
    federated = await next_event(mine, "inv__stock")
    assert federated["status"] == "ok" and federated["duration_ms"] > 0
    assert (federated["source"], federated["handler"], federated["toolkit"]) == (
        "federated",
        "stock",
        "inventory",
    )
    assert federated["tenant"] == "acme" and federated["error"] is None
    failed = await next_event(mine, "py__explode")
    assert (failed["status"], failed["source"], failed["handler"], failed["toolkit"]) == (
        "error",
        "python",
        "tw_pytools.explode",
        "py",
    )
    assert "kaboom" in failed["error"]
    composite = await next_event(mine, "priced_stock")
    assert (composite["source"], composite["handler"]) == ("composite", "workflow")
    other = await next_event(theirs, "py__greet")
    assert other["tenant"] == "globex"
    assert theirs.empty()  # nothing of acme's reached globex's stream
    assert all(event["tenant"] == "acme" for event in [federated, failed, composite])

    steps = [(e["tool"], e["source"], e["status"], e["run_id"]) for e in run["events"]]
    assert steps == [
        ("inv__stock", "federated", "ok", run["id"]),
        ("py__multiply", "python", "ok", run["id"]),
    ]
    metrics = without_instance(metrics)
    assert 'toolweave_tool_results_total{source="federated",status="ok"}' in metrics
    assert 'toolweave_tool_results_total{source="python",status="error"} 1.0' in metrics
    logged = [r.event for r in caplog.records if r.name == "toolweave.trace"]  # type: ignore[attr-defined]
    assert {(e["tool"], e["status"]) for e in logged} >= {("inv__stock", "ok"), ("py__explode", "error")}
