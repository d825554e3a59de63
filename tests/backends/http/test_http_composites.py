"""HTTP API tools are ordinary tools: composites route and fan out over them; policy, validation,
admission and run records apply."""

from __future__ import annotations

from typing import Any

from support.configs import config, openapi_backend
from support.fixtures import OpenGateway
from support.results import text
from toolweave.runs import MemoryRunStore

ROUTER = {
    "name": "pets",
    "description": "One pet by id, or the list.",
    "routing": "rule_based",
    "operations": [
        {"slug": "one", "tool": "api/getPet", "parameter_mapping": {"pet": "id"}},
        {"slug": "all", "tool": "api/listPets"},
    ],
    "rules": [
        {"condition": {"type": "equals", "field": "mode", "value": "one"}, "operation": "one", "priority": 1}
    ],
    "default_operation": "all",
    "input_schema": {
        "type": "object",
        "properties": {"mode": {"type": "string"}, "pet": {"type": "integer"}},
    },
}
FANOUT = {
    "name": "everything",
    "description": "Ping and read",
    "tools": ["api/publicPing", "api/getText"],
    "strategy": "parallel",
}
WORKFLOW = {
    "name": "pet_then_echo",
    "description": "Read a pet, then echo its name as a path segment.",
    "parameters": {"type": "object", "properties": {"id": {"type": "integer"}}, "required": ["id"]},
    "steps": [
        {"id": "pet", "tool": "api/getPet", "arguments": {"id": "{{ params.id }}"}},
        {
            "id": "echo",
            "tool": "api/pathEncoded",
            "dependsOn": ["pet"],
            "arguments": {"name": "{{ steps.pet.output.name }} #{{ steps.pet.output.id }}"},
        },
    ],
}


def gateway_config(api_url: str, **sections: Any) -> Any:
    return config(openapi_backend("api", api_url, include=["tag:edge", "tag:echo"]), **sections)


async def test_a_router_a_fanout_and_a_workflow_over_http_tools(
    open_gateway: OpenGateway, api_url: str
) -> None:
    gw = await open_gateway(gateway_config(api_url, composite_tools=[ROUTER, FANOUT, WORKFLOW]))
    assert not gw.catalog.degraded, gw.catalog.degraded
    one = await gw.call("pets", {"mode": "one", "pet": 4})
    assert not one.is_error and one.structured_content == {"id": 4, "name": "Rex", "tag": None}
    assert one.meta["toolweave"]["operation"] == "one"
    listed = await gw.call("pets", {"mode": "all"})
    assert listed.meta["toolweave"]["operation"] == "all"
    assert listed.structured_content == {"result": [{"id": 1, "name": "Rex"}, {"id": 2, "name": "Tom"}]}
    both = await gw.call("everything", {})
    assert not both.is_error and {t["tool"] for t in both.meta["toolweave"]["targets"]} == {
        "api__publicPing",
        "api__getText",
    }
    flow = await gw.call("pet_then_echo", {"id": 6})
    assert not flow.is_error, text(flow)
    assert [s["status"] for s in flow.meta["toolweave"]["steps"]] == ["completed", "completed"]
    assert "/echo/item/Rex%20%236" in text(flow)


async def test_policy_validation_admission_and_run_records_apply(
    open_gateway: OpenGateway, api_url: str
) -> None:
    runs = MemoryRunStore()
    gw = await open_gateway(
        gateway_config(api_url, policy={"deny": ["api__delete*"]}, gateway={"record_direct_calls": True}),
        runs=runs,
    )
    denied = await gw.call("api__deletePet", {"id": 1})
    assert denied.is_error and "denied" in text(denied).lower()
    invalid = await gw.call("api__getPet", {"id": "seven"})
    assert invalid.is_error and "Nothing was called" in text(invalid)
    created = await gw.call("api__createPet", {"name": "Rex", "secret": "hunter2-password"})
    assert not created.is_error
    assert gw.catalog.get("api__getPet").tool_class == "read"  # GET: the concurrent read pool
    assert gw.catalog.get("api__createPet").tool_class == "serial"  # POST: mutating, serial per session
    records = await runs.list_runs(limit=10)
    create = next(r for r in records if r.tool == "api__createPet")
    assert create.arguments == {"name": "Rex", "secret": "[redacted]"}  # format: password in the document
    assert create.status == "completed"


async def test_the_usual_backend_options_apply(open_gateway: OpenGateway, api_url: str) -> None:
    backend = openapi_backend(
        "api",
        api_url,
        include=["tag:edge", "tag:echo"],
        hide=["delete*"],
        tools={"getPet": {"name": "pet", "description": "One pet."}},
        namespace=True,
    )
    gw = await open_gateway(config(backend))
    names = {tool.name for tool in gw.list_tools()}
    assert "pet" in names and "api__getPet" not in names and "api__deletePet" not in names
    assert gw.catalog.get("pet").tool.description == "One pet."
    assert (await gw.call("pet", {"id": 2})).structured_content["id"] == 2
    read_only = await open_gateway(
        config(openapi_backend("ro", api_url, include=["tag:echo"], read_only_only=True))
    )
    listed = {tool.name for tool in read_only.list_tools()}
    assert "ro__pathSimple" in listed and "ro__createPet" not in listed
