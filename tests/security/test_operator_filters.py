"""Operator filters hold against tenants: a composite defined through the API cannot call a tool
the operator hid (`hide`, `expose`, `read_only_only`, `hide_destructive`) and so publish it, while
the operator's own composites (the config file's) still can; `policy.api_composites_call_hidden`
turns the rule off."""

from __future__ import annotations

from typing import Any

import pytest

from support.api import AppFactory
from support.configs import python_backend

API = "/api/v1"
FILTERS = [
    pytest.param({"hide": ["drop_table"]}, id="hide"),
    pytest.param({"expose": ["greet", "mul"]}, id="expose"),
    pytest.param({"hide_destructive": True}, id="hide_destructive"),
    pytest.param({"read_only_only": True}, id="read_only_only"),
]


def publisher(name: str = "publish_drop") -> dict[str, Any]:
    """A workflow that republishes the hidden `py/drop_table` under a name of its own."""
    return {
        "name": name,
        "description": "Drops a table.",
        "parameters": {"type": "object", "properties": {"table": {"type": "string"}}},
        "steps": [{"id": "drop", "tool": "py/drop_table", "arguments": {"table": "{{ params.table }}"}}],
    }


@pytest.mark.parametrize("filters", FILTERS)
async def test_a_tenant_cannot_publish_a_tool_the_operator_hid(
    sqlite_app: AppFactory, filters: dict[str, Any]
) -> None:
    api = await sqlite_app({"backends": [python_backend(**filters)]}, require_auth=True)
    key = await api.key("mallory")
    async with api.client(key) as client:
        created = await client.post(f"{API}/composite-tools", json={"definition": publisher()})
        assert created.status_code == 422, created.text
        messages = [p["message"] for p in created.json()["error"]["problems"]]
        assert any("hidden by the operator" in m and "py/drop_table" in m for m in messages), messages
        assert (await client.post(f"{API}/tools/publish_drop/call", json={"table": "t"})).status_code == 404
        listed = [t["name"] for t in (await client.get(f"{API}/ai-tools")).json()["tools"]]
        assert "publish_drop" not in listed and "py__drop_table" not in listed


async def test_the_operators_file_composites_still_call_hidden_tools(sqlite_app: AppFactory) -> None:
    api = await sqlite_app(
        {"backends": [python_backend(hide=["drop_table"])], "composite_tools": [publisher("ops_drop")]}
    )
    async with api.client() as client:
        called = await client.post(f"{API}/tools/ops_drop/call", json={"table": "t"})
        assert called.status_code == 200 and "dropped t" in called.text, called.text


async def test_without_auth_an_api_composite_is_held_to_the_filters_too(sqlite_app: AppFactory) -> None:
    """The API is the API whoever calls it: the file is where the operator opts a tool back in."""
    api = await sqlite_app({"backends": [python_backend(hide=["drop_table"])]})
    async with api.client() as client:
        created = await client.post(f"{API}/composite-tools", json={"definition": publisher()})
        assert created.status_code == 422


async def test_a_config_switch_lets_api_composites_call_hidden_tools(sqlite_app: AppFactory) -> None:
    api = await sqlite_app(
        {"backends": [python_backend(hide=["drop_table"])], "policy": {"api_composites_call_hidden": True}},
        require_auth=True,
    )
    key = await api.key("trusted")
    async with api.client(key) as client:
        created = await client.post(f"{API}/composite-tools", json={"definition": publisher()})
        assert created.status_code == 201, created.text
        called = await client.post(f"{API}/tools/publish_drop/call", json={"table": "t"})
        assert "dropped t" in called.text
