"""/metrics per tenant: a tenant's key sees only its own series (its composites, its traffic); the
operator (a loopback scrape without a key, or auth off) sees every tenant's, labelled by tenant."""

from __future__ import annotations

import httpx

from support.api import GREETER, AppFactory, without_instance
from support.configs import python_backend

API = "/api/v1"


def series(text: str, name: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith(name + "{")]


async def test_a_tenant_sees_only_its_own_series(sqlite_app: AppFactory) -> None:
    api = await sqlite_app({"backends": [python_backend()]}, require_auth=True)
    alice, bob = await api.key("alice"), await api.key("bob")
    async with api.client(alice) as a, api.client(bob) as b:
        assert (await a.post(f"{API}/composite-tools", json={"definition": GREETER})).status_code == 201
        invoked = await a.post(
            f"{API}/composite-tools/invoke", json={"tool": "greeter", "params": {"operation": "greet"}}
        )
        assert invoked.status_code == 200
        for _ in range(3):
            await a.post(f"{API}/tools/py__greet/call", json={"name": "a"})
        await b.post(f"{API}/tools/py__greet/call", json={"name": "b"})

    remote = httpx.ASGITransport(app=api.app, client=("10.1.2.3", 40000))
    async with httpx.AsyncClient(transport=remote, base_url="http://127.0.0.1:8080") as client:
        bobs = without_instance(
            (await client.get("/metrics", headers={"Authorization": f"Bearer {bob}"})).text
        )
        alices = without_instance(
            (await client.get("/metrics", headers={"Authorization": f"Bearer {alice}"})).text
        )
    assert "greeter" not in bobs and 'tenant="alice"' not in bobs
    assert series(bobs, "toolweave_tool_calls_total") == [
        'toolweave_tool_calls_total{backend="py",kind="backend",tenant="bob",tool="py__greet"} 1.0'
    ]
    assert "toolweave_tools " in bobs and "toolweave_backend_connected" in bobs
    assert 'tool="greeter"' in alices and 'tenant="bob"' not in alices
    bob_tools = float(
        next(line for line in bobs.splitlines() if line.startswith("toolweave_tools ")).split()[1]
    )
    alice_tools = float(
        next(line for line in alices.splitlines() if line.startswith("toolweave_tools ")).split()[1]
    )
    assert alice_tools == bob_tools + 1  # alice's composite is counted for alice only

    async with api.client() as operator:  # a loopback scrape without a key: the operator, every tenant
        everything = (await operator.get("/metrics")).text
    assert 'tenant="alice"' in everything and 'tenant="bob"' in everything and "greeter" in everything
