"""Finding 3 of hardening II: registration churn has a per-tenant cap and a bounded rebuild cost.

As found: one tenant held 60 namespaces of 256 federated tools (15,360), and 50 loops registering
and dropping namespaces pushed a bystander's p99 from 91 ms to 38 s: every registration and every
disconnect rebuilt the whole catalog, at once, at a cost growing with everyone's tools. Now a
tenant holds at most `max_namespaces_per_tenant` namespaces and `max_tools_per_tenant` tools, and
changes are coalesced into rebuilds spaced by their own cost.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from toolweave import Gateway
from toolweave.backends.federated.manifest import read_manifest
from toolweave.catalog.catalog import Catalog
from toolweave.config import parse_config


class _Server:
    relayed = False
    in_flight = 0

    def __init__(self, label: str) -> None:
        self.label = label


def manifest(namespace: str, tools: int) -> Any:
    raw = [{"name": f"t{i}", "inputSchema": {"type": "object"}} for i in range(tools)]
    found, problems = read_manifest(namespace, raw, 4096)
    assert found is not None, problems
    return found


def register(gateway: Gateway, namespace: str, tools: int, tenant: str) -> list[str]:
    """Register like a client would: every problem, or [] after attaching."""
    federation = gateway.federation
    found = manifest(namespace, tools)
    problems = federation.check(found, tenant)
    if problems:
        return [problem.message for problem in problems]
    federation.attach(_Server(namespace), found, tenant)
    return []


async def test_a_tenant_holds_at_most_its_share_of_namespaces_and_tools() -> None:
    config = parse_config({"federation": {"max_namespaces_per_tenant": 3, "max_tools_per_tenant": 500}})
    async with Gateway(config) as gateway:
        assert register(gateway, "a1", 200, "mallory") == []
        assert register(gateway, "a2", 200, "mallory") == []
        refused = register(gateway, "a3", 200, "mallory")
        assert refused and "max_tools_per_tenant" in refused[0], refused
        assert register(gateway, "a3", 50, "mallory") == []
        refused = register(gateway, "a4", 1, "mallory")
        assert refused and "max_namespaces_per_tenant" in refused[0], refused
        assert register(gateway, "b1", 200, "bob") == []  # another tenant's share is its own


def test_the_default_shares_are_well_below_sixteen_thousand_tools() -> None:
    settings = parse_config({}).federation
    assert settings.max_tools_per_tenant <= 1024 and settings.max_namespaces_per_tenant <= 8


async def test_churn_is_coalesced_into_few_rebuilds(monkeypatch: pytest.MonkeyPatch) -> None:
    async with Gateway(parse_config({})) as gateway:
        rebuilds = 0
        original = Catalog.build.__func__  # type: ignore[attr-defined]

        def counted(cls: type[Catalog], *args: Any, **kwargs: Any) -> Catalog:
            nonlocal rebuilds
            rebuilds += 1
            return original(cls, *args, **kwargs)

        monkeypatch.setattr(Catalog, "build", classmethod(counted))
        for round_ in range(20):  # register and drop, as fast as a client could
            server = _Server(f"n{round_}")
            found = manifest(f"n{round_}", 20)
            assert gateway.federation.check(found, "mallory") == []
            gateway.federation.attach(server, found, "mallory")  # one namespace at a time: within the share
            gateway.federation.detach(server)
        assert rebuilds <= 1
        await asyncio.sleep(0.2)
        assert 1 <= rebuilds <= 2, rebuilds
        assert gateway.catalog.get("n19__t0") is None
        register(gateway, "last", 3, "mallory")
        for _ in range(100):
            await asyncio.sleep(0.01)
            if gateway.catalog.get("last__t0") is not None:
                break
        assert gateway.catalog.get("last__t0") is not None  # a lone registration is served promptly
