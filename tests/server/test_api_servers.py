"""Virtual servers over REST (`/api/v1/servers`), "Used in" on tools and composites, and who may use
a server: tenants and key scopes admitted, everyone else refused with the Bearer challenge on
`/servers/{name}/mcp` and a 404 on the REST API (SQLite; the subject is not the database)."""

from __future__ import annotations

from typing import Any

import httpx
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from support.api import GREETER, AppFactory
from support.configs import python_backend
from support.results import names
from support.serving import serve_asgi

API = "/api/v1"
READ, CALL = "tools:read", "tools:call"


def config() -> dict[str, Any]:
    return {
        "backends": [python_backend(tools={"nap": {"tags": ["ops"]}})],
        "composite_tools": [GREETER],
        "servers": [
            {"name": "open", "tools": ["greeter", "py__multiply"], "tags": ["ops"]},
            {"name": "alices", "tools": ["py__greet"], "access": {"tenants": ["alice"]}},
            {
                "name": "scoped",
                "tools": ["py__where_am_i", "nothing_*"],
                "access": {"scopes": ["servers:scoped"]},
            },
        ],
    }


async def test_rest_lists_what_each_caller_may_use_with_used_in(sqlite_app: AppFactory) -> None:
    api = await sqlite_app(config(), require_auth=True)
    alice, bob = await api.key("alice", READ, CALL), await api.key("bob", READ, CALL, "servers:scoped")
    async with api.client(alice) as a, api.client(bob) as b:
        assert [s["name"] for s in (await a.get(f"{API}/servers")).json()["servers"]] == ["open", "alices"]
        assert [s["name"] for s in (await b.get(f"{API}/servers")).json()["servers"]] == ["open", "scoped"]
        missing = await b.get(f"{API}/servers/alices")
        assert missing.status_code == 404 and "yours: open, scoped" in missing.json()["error"]["message"]
        scoped = (await b.get(f"{API}/servers/scoped")).json()
        assert scoped["url"] == "/servers/scoped/mcp"
        assert [t["name"] for t in scoped["tools"]] == ["py__where_am_i"]
        assert scoped["problems"] == [{"path": "tools[1]", "message": "'nothing_*' matches no listed tool"}]
        opened = (await a.get(f"{API}/servers/open/tools")).json()["tools"]
        assert sorted(names_of(opened)) == ["greeter", "py__multiply", "py__nap"]
        exported = (await a.get(f"{API}/servers/open/export", params={"format": "openai"})).json()
        assert sorted(t["function"]["name"] for t in exported["tools"]) == [
            "greeter",
            "py__multiply",
            "py__nap",
        ]
        tools = {t["name"]: t for t in (await a.get(f"{API}/ai-tools")).json()["tools"]}
        assert tools["py__multiply"]["servers"] == ["open"] and tools["py__greet"]["servers"] == ["alices"]
        assert tools["greeter"]["servers"] == ["open"]
        detail = (await a.get(f"{API}/composite-tools/greeter")).json()
        assert detail["servers"] == ["open"]


def names_of(tools: list[dict[str, Any]]) -> list[str]:
    return [tool["name"] for tool in tools]


async def test_mcp_refuses_callers_the_access_does_not_admit(sqlite_app: AppFactory) -> None:
    api = await sqlite_app(config(), require_auth=True)
    alice, bob = await api.key("alice", READ, CALL), await api.key("bob", READ, CALL, "servers:scoped")
    app = api.app
    await api.runtime.close()  # served again below by uvicorn with the lifespan
    async with serve_asgi(app) as base:

        async def tools_of(key: str, server: str) -> list[str]:
            http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
            url = f"{base}/servers/{server}/mcp"
            async with Client(streamable_http_client(url, http_client=http)) as client:
                return names((await client.list_tools()).tools)

        assert await tools_of(alice, "alices") == ["py__greet"]
        assert await tools_of(bob, "scoped") == ["py__where_am_i"]
        assert "greeter" in await tools_of(bob, "open")
        request = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        async with httpx.AsyncClient() as raw:
            anonymous = await raw.post(f"{base}/servers/open/mcp", json=request)
            assert anonymous.status_code == 401 and anonymous.headers["www-authenticate"].startswith("Bearer")
            for key, server in ((bob, "alices"), (alice, "scoped")):
                refused = await raw.post(
                    f"{base}/servers/{server}/mcp", json=request, headers={"Authorization": f"Bearer {key}"}
                )
                assert refused.status_code == 403, refused.text
                challenge = refused.headers["www-authenticate"]
                assert 'error="insufficient_scope"' in challenge and f'scope="servers:{server}"' in challenge
                assert f"may not use virtual server {server!r}" in refused.json()["error"]["message"]


async def test_used_in_names_only_the_servers_the_caller_may_use(sqlite_app: AppFactory) -> None:
    """A config server whose `access` does not admit a tenant is none of its business: its name must
    not show in that tenant's "Used in" (tool list, composite detail, the UI's tool page)."""
    cfg = config()
    cfg["servers"].append({"name": "alices-greeter", "tools": ["greeter"], "access": {"tenants": ["alice"]}})
    api = await sqlite_app(cfg, require_auth=True)
    alice, bob = await api.key("alice", READ, CALL), await api.key("bob", READ, CALL)
    async with api.client(alice) as a, api.client(bob) as b:
        mine = {t["name"]: t for t in (await a.get(f"{API}/ai-tools")).json()["tools"]}
        theirs = {t["name"]: t for t in (await b.get(f"{API}/ai-tools")).json()["tools"]}
        assert mine["py__greet"]["servers"] == ["alices"] and theirs["py__greet"]["servers"] == []
        assert mine["greeter"]["servers"] == ["open", "alices-greeter"]
        assert theirs["greeter"]["servers"] == ["open"]
        assert (await b.get(f"{API}/composite-tools/greeter")).json()["servers"] == ["open"]
        listed = (await b.get(f"{API}/composite-tools")).json()["compositeTools"]
        assert [c["servers"] for c in listed if c["name"] == "greeter"] == [["open"]]
        assert (await a.get(f"{API}/composite-tools/greeter")).json()["servers"] == ["open", "alices-greeter"]
