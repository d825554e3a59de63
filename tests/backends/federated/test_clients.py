"""Federated clients as real processes: the CLI bridge around stdio MCP servers, and the Python API.

Each test serves a gateway (SQLite, API keys required) on a loopback port; clients
connect to it out of their own processes, and calls go through the REST API as an
agent's would.
"""

from __future__ import annotations

import asyncio
import signal
import time

import pytest

from support.configs import stdio_backend
from support.federation import (
    FAST_HEARTBEAT,
    bridge,
    gone,
    kill_group,
    python_client,
    registered,
    served,
    sleepy_server_command,
    stderr_of,
)
from support.processes import wait_until
from toolweave.backends.federated import FederatedBackend

AGENT_SCOPES = ("tools:read", "tools:call")


async def call(api, key: str, name: str, arguments: dict) -> dict:
    async with api.client(key) as http:
        response = await http.post(f"/api/v1/tools/{name}/call", json=arguments)
    assert response.status_code in (200, 404), response.text
    return response.json()


def text_of(result: dict) -> str:
    return "\n".join(item.get("text", "") for item in result.get("content", []))


async def test_the_cli_bridge_serves_a_stdio_server_and_its_tools_leave_with_it(sqlite_app) -> None:
    api = await sqlite_app({"federation": FAST_HEARTBEAT}, require_auth=True)
    client_key = await api.key("acme", "tools:federate")
    agent_key = await api.key("acme", *AGENT_SCOPES)
    changes: list[float] = []
    api.gateway.on_tools_changed(lambda: changes.append(time.monotonic()))
    async with served(api) as base:
        with bridge(base, client_key, "clock"):
            await registered(api.gateway, "clock__get_current_time")
            assert len(changes) == 1  # list_changed went out on registration
            result = await call(api, agent_key, "clock__get_current_time", {"timezone": "Europe/Paris"})
            assert not result.get("isError"), result
            assert result["structuredContent"]["timezone"] == "Europe/Paris"
            backend = api.gateway.federation.namespaces["clock"]
            assert backend.owner == "acme"
            assert backend.meta["get_current_time"].source == "mcp-server-time"
            assert backend.meta["get_current_time"].handler == "get_current_time"
        await gone(api.gateway, "clock__get_current_time")
        assert len(changes) == 2  # and again when the client left
        after = await call(api, agent_key, "clock__get_current_time", {"timezone": "UTC"})
        assert after["error"]["code"] == "unknown_tool"


async def test_kill_9_of_a_client_mid_call_fails_the_call_at_once_naming_the_client(sqlite_app) -> None:
    api = await sqlite_app({"federation": FAST_HEARTBEAT}, require_auth=True)
    client_key = await api.key("acme", "tools:federate")
    agent_key = await api.key("acme", *AGENT_SCOPES)
    async with served(api) as base:
        with bridge(base, client_key, "ts", *sleepy_server_command()) as process:
            await registered(api.gateway, "ts__sleep")
            backend = api.gateway.federation.namespaces["ts"]
            pending = asyncio.create_task(call(api, agent_key, "ts__sleep", {"seconds": 60}))
            await wait_until(
                lambda: backend.servers and backend.servers[0].in_flight == 1, 10, "call in flight"
            )
            killed = time.monotonic()
            kill_group(process, signal.SIGKILL)
            result = await asyncio.wait_for(pending, 10)
            waited = time.monotonic() - killed
        assert result["isError"], result
        assert "federated client ts#" in text_of(result) and "disconnected during the call" in text_of(result)
        assert waited < 3.0, f"the call failed {waited:.1f}s after the client died"
        await gone(api.gateway, "ts__sleep")


async def test_the_python_api_runs_tools_in_the_client_process_with_its_own_secrets(sqlite_app) -> None:
    api = await sqlite_app({"federation": FAST_HEARTBEAT}, require_auth=True)
    client_key = await api.key("acme", "tools:federate")
    agent_key = await api.key("acme", *AGENT_SCOPES)
    async with served(api) as base:
        with python_client(base, client_key, "inv", LOCAL_SECRET="only-in-the-client", WAREHOUSE="north"):
            await registered(api.gateway, "inv__secret_holder")
            secret = await call(api, agent_key, "inv__secret_holder", {})
            assert text_of(secret) == "only-in-the-client"
            stock = await call(api, agent_key, "inv__stock", {"sku": "abc"})
            assert stock["structuredContent"] == {"sku": "abc", "count": 21, "warehouse": "north"}
            bad = await call(api, agent_key, "inv__stock", {"sku": 5})
            assert bad["isError"]
            meta = api.gateway.federation.namespaces["inv"].meta["stock"]
            assert (meta.handler, meta.source, meta.toolkit) == ("stock", "python", "inventory")
            tool = api.gateway.catalog.get("inv__stock").tool
            assert tool.input_schema["properties"]["sku"]["description"] == "The item's stock-keeping unit."


async def test_two_clients_of_one_namespace_share_the_calls_and_fail_over(sqlite_app) -> None:
    api = await sqlite_app({"federation": FAST_HEARTBEAT}, require_auth=True)
    client_key = await api.key("acme", "tools:federate")
    agent_key = await api.key("acme", *AGENT_SCOPES)
    async with served(api) as base:
        with python_client(base, client_key, "inv") as first, python_client(base, client_key, "inv"):
            await registered(api.gateway, "inv__slow")
            backend = api.gateway.federation.namespaces["inv"]
            assert isinstance(backend, FederatedBackend)
            await wait_until(lambda: len(backend.servers) == 2, 20, "both clients registered")
            both = await asyncio.gather(
                *(call(api, agent_key, "inv__slow", {"seconds": 0.5}) for _ in range(2))
            )
            pids = {text_of(result).rsplit(" ", 1)[-1] for result in both}
            assert len(pids) == 2, both  # least in flight: one call each
            kill_group(first, signal.SIGKILL)
            await wait_until(lambda: len(backend.servers) == 1, 10, "the killed client left")
            assert api.gateway.catalog.get("inv__slow") is not None  # the namespace stays
            for _ in range(3):
                result = await call(api, agent_key, "inv__slow", {"seconds": 0})
                assert not result.get("isError"), result


@pytest.mark.usefixtures("in_process_testserver")  # the gateway's stdio backend: its tools, not its process
async def test_a_workflow_mixes_backend_and_federated_steps_and_waits_for_its_client(sqlite_app) -> None:
    workflow = {
        "name": "restock_note",
        "description": "Check stock on the warehouse's own system, then write a note.",
        "parameters": {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]},
        "steps": [
            {"id": "count", "tool": "inv/stock", "arguments": {"sku": "{{ params.sku }}"}},
            {
                "id": "note",
                "tool": "ts/echo",
                "dependsOn": ["count"],
                "arguments": {"text": "{{ params.sku }}: {{ steps.count.output.count }} in stock"},
            },
        ],
    }
    api = await sqlite_app(
        {
            "backends": [stdio_backend("ts")],
            "federation": {**FAST_HEARTBEAT, "namespaces": [{"name": "inv", "tenant": "acme"}]},
            "composite_tools": [workflow],
        },
        require_auth=True,
    )
    client_key = await api.key("acme", "tools:federate")
    agent_key = await api.key("acme", *AGENT_SCOPES)
    degraded = api.gateway.catalog.degraded["restock_note"]
    assert any("federated namespace 'inv' has no client connected" in p.message for p in degraded), degraded
    async with served(api) as base:
        with python_client(base, client_key, "inv"):
            await registered(api.gateway, "restock_note")
            result = await call(api, agent_key, "restock_note", {"sku": "abcd"})
            assert not result.get("isError"), result
            assert "abcd: 28 in stock" in text_of(result)
        await gone(api.gateway, "restock_note")
        assert "restock_note" in api.gateway.catalog.degraded


@pytest.mark.usefixtures("in_process_testserver")  # the gateway's stdio backend: its tools, not its process
async def test_the_bridge_stops_with_every_reason_when_the_gateway_refuses_it(sqlite_app) -> None:
    api = await sqlite_app({"backends": [stdio_backend("clock")]}, require_auth=True)
    client_key = await api.key("acme", "tools:federate")
    async with served(api) as base:
        with bridge(base, client_key, "clock") as process:  # the namespace of a configured backend
            code = await asyncio.to_thread(process.wait, 60)
            printed = stderr_of(process)
    assert code == 2, printed
    assert "refused (4422)" in printed
    assert "namespace: namespace 'clock' is the name of a configured backend" in printed
