"""Auth and tenants: keys on the API and on /mcp, scopes, the verification cache, and two tenants
that cannot see each other's definitions, runs or connections (SQLite and PostgreSQL)."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from support.api import GREETER, AppFactory
from support.configs import python_backend
from support.results import names
from support.serving import serve_asgi

API = "/api/v1"
READ, CALL, ADMIN = "tools:read", "tools:call", "tools:admin"


async def test_two_tenants_cannot_see_each_other(make_app: AppFactory) -> None:
    api = await make_app(
        {"backends": [python_backend(), {"name": "remote", "url": "http://127.0.0.1:9/mcp"}]},
        require_auth=True,
    )
    alice, bob = await api.key("alice"), await api.key("bob")
    async with api.client(alice) as a, api.client(bob) as b:
        created = await a.post(f"{API}/composite-tools", json={"definition": GREETER})
        assert created.status_code == 201 and created.json()["tenant"] == "alice"
        tool_id = created.json()["id"]
        ran = await a.post(
            f"{API}/composite-tools/invoke",
            json={"tool": "greeter", "params": {"operation": "greet", "name": "A"}},
        )
        assert ran.json()["success"], ran.text
        run_id = ran.json()["meta"]["runId"]
        put = await a.put(f"{API}/connections/remote", json={"headers": {"X-Token": "alice-secret-value"}})
        assert put.status_code == 200 and put.json()["keys"] == ["X-Token"]

        # bob sees none of it
        assert (await b.get(f"{API}/composite-tools")).json()["compositeTools"] == []
        for path in (
            f"/composite-tools/{tool_id}",
            "/composite-tools/greeter",
            f"/runs/{run_id}",
            "/connections/remote",
            f"/composite-tools/{tool_id}/versions",
        ):
            assert (await b.get(f"{API}{path}")).status_code == 404, path
        assert (await b.get(f"{API}/runs")).json()["runs"] == []
        assert (await b.get(f"{API}/connections")).json()["connections"] == []
        assert "greeter" not in [t["name"] for t in (await b.get(f"{API}/ai-tools")).json()["tools"]]
        greet = next(t for t in (await b.get(f"{API}/ai-tools")).json()["tools"] if t["name"] == "py__greet")
        assert greet["usedIn"] == []  # alice's composite is not bob's business
        invoked = await b.post(f"{API}/composite-tools/invoke", json={"tool": "greeter", "params": {}})
        assert invoked.status_code == 404
        assert (await b.post(f"{API}/tools/greeter/call", json={})).status_code == 404
        for method, path in (
            ("patch", f"/composite-tools/{tool_id}"),
            ("delete", f"/composite-tools/{tool_id}"),
            ("delete", "/connections/remote"),
        ):
            kwargs: dict[str, Any] = {"json": {"status": "disabled"}} if method == "patch" else {}
            assert (await getattr(b, method)(f"{API}{path}", **kwargs)).status_code == 404, path
        # a "did you mean" never names another tenant's tool
        typo = {"description": "d", "steps": [{"id": "s", "tool": "greetr"}]}
        refused = await b.post(f"{API}/composite-tools", json={"definition": {"name": "bob_wf", **typo}})
        assert refused.status_code == 422 and "greetr" in refused.text and "greeter" not in refused.text
        helped = await a.post(f"{API}/composite-tools", json={"definition": {"name": "alice_wf", **typo}})
        assert helped.status_code == 422 and "did you mean 'greeter' or" in helped.text, helped.text
        assert "greeter" not in (await b.post(f"{API}/tools/greetr/call", json={})).text
        # nor anything about another tenant's runs or keys
        assert (await b.get(f"{API}/runs", params={"tenant": "alice"})).status_code == 403
        assert {k["tenant"] for k in (await b.get(f"{API}/keys")).json()["keys"]} == {"bob"}
        assert (await b.get(f"{API}/keys", params={"tenant": "alice"})).status_code == 403
        alice_key = (await a.get(f"{API}/keys")).json()["keys"][0]["id"]
        assert (await b.post(f"{API}/keys/{alice_key}/revoke")).status_code == 404
        assert (await b.post(f"{API}/keys", json={"tenant": "alice"})).status_code == 403
        # one catalog serves every tenant, so names are unique across tenants
        clash = await b.post(f"{API}/composite-tools", json={"definition": GREETER})
        assert clash.status_code == 409 and "alice" not in clash.text

        # alice still has everything
        assert [t["name"] for t in (await a.get(f"{API}/composite-tools")).json()["compositeTools"]] == [
            "greeter"
        ]
        assert [r["id"] for r in (await a.get(f"{API}/runs")).json()["runs"]] == [run_id]
    assert "greeter" in names(api.gateway.list_tools("alice")) and "greeter" not in names(
        api.gateway.list_tools("bob")
    )


async def test_scopes_gate_reading_calling_and_managing(sqlite_app: AppFactory) -> None:
    api = await sqlite_app({"backends": [python_backend()]}, require_auth=True)
    reader, caller = await api.key("t", READ), await api.key("t", READ, CALL)
    async with api.client(reader) as r, api.client(caller) as c, api.client() as anonymous:
        assert (await r.get(f"{API}/ai-tools")).status_code == 200
        refused = await r.post(f"{API}/tools/py__greet/call", json={"name": "x"})
        assert refused.status_code == 403 and "tools:call" in refused.json()["error"]["message"]
        assert (await c.post(f"{API}/tools/py__greet/call", json={"name": "x"})).status_code == 200
        create = await c.post(f"{API}/composite-tools", json={"definition": GREETER})
        assert create.status_code == 403 and "tools:admin" in create.json()["error"]["message"]
        assert (await c.put(f"{API}/connections/py", json={"headers": {"a": "b"}})).status_code == 403
        missing = await anonymous.get(f"{API}/ai-tools")
        assert missing.status_code == 401 and missing.headers["www-authenticate"].startswith("Bearer")
        assert missing.json()["error"]["code"] == "unauthorized"
        bad = await anonymous.get(f"{API}/ai-tools", headers={"Authorization": "Bearer tw_not-a-real-key"})
        assert bad.status_code == 401
        assert (await anonymous.get("/openapi.json")).status_code == 200
        assert (await anonymous.get("/metrics")).status_code == 200  # loopback client


async def test_revoked_keys_stop_working_and_verification_is_cached(sqlite_app: AppFactory) -> None:
    api = await sqlite_app({"backends": [python_backend()]}, require_auth=True)
    key = await api.key("t", READ)
    keys = api.runtime.keys
    calls = 0
    original = keys.verify

    async def counting(plaintext: str) -> Any:
        nonlocal calls
        calls += 1
        return await original(plaintext)

    keys.verify = counting  # type: ignore[method-assign]
    async with api.client(key) as client:
        for _ in range(20):
            assert (await client.get(f"{API}/backends")).status_code == 200
        assert calls == 1, "the hot path must not query the database per request"
        info = (await keys.list("t"))[0]
        await keys.revoke(info.id)
        api.runtime.key_cache.forget_key(info.id)
        assert (await client.get(f"{API}/backends")).status_code == 401


async def test_mcp_needs_a_key_and_sees_only_its_tenant(sqlite_app: AppFactory) -> None:
    api = await sqlite_app({"backends": [python_backend()]}, require_auth=True)
    alice, bob, reader = await api.key("alice"), await api.key("bob"), await api.key("bob", READ)
    async with api.client(alice) as a:
        assert (await a.post(f"{API}/composite-tools", json={"definition": GREETER})).status_code == 201
    app = api.app
    await api.runtime.close()  # served again below by uvicorn with the lifespan
    async with serve_asgi(app) as base:
        async with httpx.AsyncClient() as raw:
            response = await raw.post(f"{base}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
            assert response.status_code == 401

        async def tools_of(key: str) -> list[str]:
            http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
            async with Client(streamable_http_client(f"{base}/mcp", http_client=http)) as client:
                return names((await client.list_tools()).tools)

        assert "greeter" in await tools_of(alice)
        assert "greeter" not in await tools_of(bob) and "py__greet" in await tools_of(bob)
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {alice}"})
        async with Client(streamable_http_client(f"{base}/mcp", http_client=http)) as client:
            result = await client.call_tool("greeter", {"operation": "multiply", "a": 2, "b": 4})
            assert result.structured_content == {"product": 8.0}
        http = create_mcp_http_client(headers={"Authorization": f"Bearer {reader}"})
        async with Client(streamable_http_client(f"{base}/mcp", http_client=http)) as client:
            with pytest.raises(Exception, match="tools:call"):
                await client.call_tool("py__greet", {"name": "x"})


async def test_list_changed_reaches_mcp_clients_when_the_api_creates_a_tool(sqlite_app: AppFactory) -> None:
    api = await sqlite_app({"backends": [python_backend()]})
    app = api.app
    await api.runtime.close()
    async with (
        serve_asgi(app) as base,
        Client(f"{base}/mcp", mode="auto") as client,
        client.listen(tools_list_changed=True) as events,
    ):
        async with httpx.AsyncClient() as http:
            created = await http.post(f"{base}{API}/composite-tools", json={"definition": GREETER})
            assert created.status_code == 201
        async with asyncio.timeout(10):
            await anext(aiter(events))
        assert "greeter" in names((await client.list_tools()).tools)
