"""Tenants' connections for HTTP API backends: each tenant's credential is chosen at call time, through the
REST API and inside a router; a tenant without one gets a clear error; no credential is ever shown."""

from __future__ import annotations

import logging
from collections.abc import Iterator

import pytest

from support.api import AppFactory
from support.configs import openapi_backend
from support.processes import api_testserver
from toolweave.services.logs import JsonFormatter

API = "/api/v1"
TENANT_KEY = "tenant-key-987654"  # the test API accepts it as a bearer token and as an API key
ROTATED = "rotated-but-wrong-1234"
ROUTER = {
    "name": "secure_or_public",
    "description": "Call the secured endpoint, or the public one.",
    "operations": [
        {"slug": "secure", "tool": "api/secureBearer"},
        {"slug": "public", "tool": "api/publicPing"},
    ],
    "rules": [{"condition": {"type": "equals", "field": "where", "value": "secure"}, "operation": "secure"}],
    "default_operation": "public",
}


@pytest.fixture(scope="module")
def api_url() -> Iterator[str]:
    with api_testserver() as url:
        yield url


async def test_each_tenant_calls_with_its_own_credentials(
    make_app: AppFactory, api_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    backends = [
        openapi_backend("api", api_url, include=["tag:auth", "publicPing"], auth={"type": "bearer"}),
    ]
    api = await make_app({"backends": backends, "gateway": {"record_direct_calls": True}}, require_auth=True)
    alice, bob = await api.key("alice"), await api.key("bob")
    seen: list[str] = []
    async with api.client(alice) as a, api.client(bob) as b:
        stored = await a.put(
            f"{API}/connections/api", json={"headers": {"token": TENANT_KEY, "X-Team": "blue"}}
        )
        assert stored.status_code == 200 and stored.json()["keys"] == ["X-Team", "token"]
        seen.append(stored.text)

        mine = await a.post(f"{API}/tools/api__secureBearer/call", json={})
        assert mine.status_code == 200 and mine.json()["structuredContent"] == {
            "ok": True,
            "kind": "bearer",
        }, mine.text
        public = await a.post(f"{API}/tools/api__publicPing/call", json={})
        echoed = public.json()["structuredContent"]["headers"]
        assert echoed["x-team"] == "blue"  # a connection key that is no credential field is a header
        assert "authorization" not in echoed  # a public operation gets no credential

        theirs = await b.post(f"{API}/tools/api__secureBearer/call", json={})
        body = theirs.json()
        assert body["isError"] is True
        assert "needs token" in body["content"][0]["text"] and "connections/api" in body["content"][0]["text"]

        assert (await a.post(f"{API}/composite-tools", json={"definition": ROUTER})).status_code == 201
        routed = await a.post(
            f"{API}/composite-tools/invoke", json={"tool": "secure_or_public", "params": {"where": "secure"}}
        )
        assert routed.json()["success"] is True and routed.json()["meta"]["operation"] == "secure", (
            routed.text
        )
        seen.append(routed.text)

        rotated = await a.put(f"{API}/connections/api", json={"headers": {"token": ROTATED}})
        assert rotated.status_code == 200
        refused = await a.post(f"{API}/tools/api__secureBearer/call", json={})
        refused_text = refused.json()["content"][0]["text"]
        assert "HTTP 401" in refused_text  # the new credential is used at once
        seen.append(refused.text)

        for path in ("/connections", "/connections/api", "/backends", "/runs"):
            response = await a.get(f"{API}{path}")
            assert response.status_code == 200, path
            seen.append(response.text)
        for fmt in ("mcp", "openai", "anthropic"):
            seen.append((await a.get(f"{API}/composite-tools/secure_or_public/tools/{fmt}")).text)

    runs = await api.runtime.runs.list_runs(limit=100)
    assert any(r.tool == "api__secureBearer" for r in runs)
    seen += [repr(r.to_dict()) for r in runs]
    seen.append(repr(api.gateway.export("mcp")))
    formatter = JsonFormatter()
    seen += [formatter.format(record) for record in caplog.records]
    for index, text in enumerate(seen):
        for secret in (TENANT_KEY, ROTATED):
            assert secret not in text, f"a credential leaked into text #{index}: {text[:200]}"


async def test_connections_to_http_api_backends_are_accepted_by_the_api(
    make_app: AppFactory, api_url: str
) -> None:
    api = await make_app(
        {"backends": [openapi_backend("api", api_url, include=["publicPing"])]}, require_auth=True
    )
    key = await api.key("carol")
    async with api.client(key) as c:
        put = await c.put(f"{API}/connections/api", json={"headers": {"X-Api-Key": "v-1234567"}})
        assert put.status_code == 200
        got = await c.post(f"{API}/tools/api__publicPing/call", json={})
        assert got.json()["structuredContent"]["headers"]["x-api-key"] == "v-1234567"
