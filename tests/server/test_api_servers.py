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


ADMIN = "tools:admin"
MODES = ["legacy", "auto"]
"""2025-11-25 (a session) and 2026-07-28 (sessionless)."""


async def test_a_server_defined_through_rest_is_served_versioned_and_audited(sqlite_app: AppFactory) -> None:
    from toolweave.store import ALL_TENANTS

    api = await sqlite_app(config(), require_auth=True)
    alice = await api.key("alice", READ, CALL, ADMIN)
    bob = await api.key("bob", READ, CALL, ADMIN)
    desk = {
        "name": "alice-desk",
        "title": "Alice's desk",
        "instructions": "Greet people.",
        "tools": ["py__greet", "greeter"],
    }
    async with api.client(alice) as a, api.client(bob) as b:
        made = await a.post(f"{API}/servers", json={"definition": desk, "note": "first"})
        assert made.status_code == 201, made.text
        body = made.json()
        assert made.headers["location"] == f"{API}/servers/alice-desk"
        assert (body["source"], body["readOnly"], body["version"], body["tenant"]) == (
            "api",
            False,
            1,
            "alice",
        )
        assert sorted(t["name"] for t in body["tools"]) == ["greeter", "py__greet"]
        assert "alice-desk" in [s["name"] for s in (await a.get(f"{API}/servers")).json()["servers"]]
        assert "alice-desk" not in [s["name"] for s in (await b.get(f"{API}/servers")).json()["servers"]]
        assert (await b.get(f"{API}/servers/alice-desk")).status_code == 404
        assert (
            await b.patch(f"{API}/servers/alice-desk", json={"definition": {"title": "x"}})
        ).status_code == 404
        assert (await b.delete(f"{API}/servers/alice-desk")).status_code == 404
        tools = {t["name"]: t for t in (await a.get(f"{API}/ai-tools")).json()["tools"]}
        assert "alice-desk" in tools["py__greet"]["servers"]
        tools = {t["name"]: t for t in (await b.get(f"{API}/ai-tools")).json()["tools"]}
        assert "alice-desk" not in tools["py__greet"]["servers"]

        edited = await a.patch(
            f"{API}/servers/alice-desk",
            json={"definition": {"tools": ["py__greet", "py__multiply"]}, "expectedVersion": 1},
        )
        assert edited.status_code == 200, edited.text
        assert edited.json()["version"] == 2
        assert sorted(t["name"] for t in edited.json()["tools"]) == ["py__greet", "py__multiply"]
        stale = await a.patch(
            f"{API}/servers/alice-desk", json={"definition": {"title": "old"}, "expectedVersion": 1}
        )
        assert stale.status_code == 409 and "at version 2, not 1" in stale.json()["error"]["message"]
        versions = (await a.get(f"{API}/servers/alice-desk/versions")).json()["versions"]
        assert [(v["version"], v["note"], v["definition"]["tools"]) for v in versions] == [
            (1, "first", ["py__greet", "greeter"]),
            (2, None, ["py__greet", "py__multiply"]),
        ]
        read_only = await a.patch(f"{API}/servers/open", json={"definition": {"title": "x"}})
        assert read_only.status_code == 409 and read_only.json()["error"]["code"] == "read_only"
        assert (await a.delete(f"{API}/servers/open")).status_code == 409

    app = api.app
    await api.runtime.close()  # served again below by uvicorn with the lifespan
    async with serve_asgi(app) as base:

        async def session_of(key: str, mode: str) -> Client:
            http = create_mcp_http_client(headers={"Authorization": f"Bearer {key}"})
            return Client(
                streamable_http_client(f"{base}/servers/alice-desk/mcp", http_client=http), mode=mode
            )

        for mode in MODES:
            async with await session_of(alice, mode) as client:
                assert client.server_info is not None and client.server_info.title == "Alice's desk"
                assert client.instructions == "Greet people."
                assert sorted(names((await client.list_tools()).tools)) == ["py__greet", "py__multiply"]
                assert not (await client.call_tool("py__multiply", {"a": 2, "b": 3})).is_error
        async with httpx.AsyncClient() as raw:
            refused = await raw.post(
                f"{base}/servers/alice-desk/mcp",
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
                headers={"Authorization": f"Bearer {bob}"},
            )
            assert refused.status_code == 404  # another tenant's server: not even there
        async with httpx.AsyncClient(headers={"Authorization": f"Bearer {alice}"}) as a:
            assert (await a.delete(f"{base}{API}/servers/alice-desk")).status_code == 204
            gone = await a.post(
                f"{base}/servers/alice-desk/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
            )
            assert gone.status_code == 404
            again = await a.post(f"{base}{API}/servers", json={"definition": desk})  # the name is free again
            assert again.status_code == 201 and again.json()["version"] == 1
        runtime = app.state.runtime
        records = [r for r in await runtime.audit.list(ALL_TENANTS) if r.object_type == "server"]
        assert [(r.action, r.tenant, r.version_before, r.version_after) for r in reversed(records)] == [
            ("server.created", "alice", None, 1),
            ("server.updated", "alice", 1, 2),
            ("server.deleted", "alice", 2, None),
            ("server.created", "alice", None, 1),
        ]


async def test_a_refused_server_names_every_problem_and_stores_nothing(sqlite_app: AppFactory) -> None:
    api = await sqlite_app(config(), require_auth=True)
    alice = await api.key("alice", READ, CALL, ADMIN)
    async with api.client(alice) as a:
        bad = {
            "name": "Bad Name",
            "tools": ["re:(unclosed"],
            "tool_exposure": "sometimes",
            "colour": "red",
        }
        refused = await a.post(f"{API}/servers", json={"definition": bad})
        assert refused.status_code == 422, refused.text
        paths = {p["path"] for p in refused.json()["error"]["problems"]}
        assert {
            "definition.name",
            "definition.tools[0]",
            "definition.tool_exposure",
            "definition.colour",
        } <= paths
        wrong = {
            "name": "typos",
            "tools": ["py__gret", "greeter"],
            "backends": ["pyy"],
            "pinned": ["nowhere"],
            "access": {"tenants": ["bob"]},
        }
        refused = await a.post(f"{API}/servers", json={"definition": wrong})
        assert refused.status_code == 422, refused.text
        found = {p["path"]: p["message"] for p in refused.json()["error"]["problems"]}
        assert set(found) == {
            "definition.tools[0]",
            "definition.backends[0]",
            "definition.pinned[0]",
            "definition.access.tenants",
        }, found
        assert "py__greet" in found["definition.tools[0]"] and "'py'" in found["definition.backends[0]"]
        clash = await a.post(f"{API}/servers", json={"definition": {"name": "open", "tools": ["greeter"]}})
        assert clash.status_code == 409 and "config file" in clash.json()["error"]["message"]
        assert [s["name"] for s in (await a.get(f"{API}/servers")).json()["servers"]] == ["open", "alices"]
        made = await a.post(f"{API}/servers", json={"definition": {"name": "mine", "tools": ["greeter"]}})
        assert made.status_code == 201
        broken = await a.patch(f"{API}/servers/mine", json={"definition": {"tools": ["nothing_here"]}})
        assert broken.status_code == 422
        kept = (await a.get(f"{API}/servers/mine")).json()
        assert kept["version"] == 1 and [t["name"] for t in kept["tools"]] == ["greeter"]
    records = await api.runtime.audit.list("alice")
    assert [r.action for r in records if r.object_type == "server"] == ["server.created"]


async def test_the_ui_builder_defines_and_edits_a_server(sqlite_app: AppFactory) -> None:
    """New server: a catalog search's Add puts a tool in the form, a refused save shows the problem
    beside its field and stores nothing, a save serves it; its page links to Edit, which saves a new
    version and keeps what the form does not show. A tenant cannot edit the file's or another's."""
    import re

    api = await sqlite_app(config(), require_auth=True)
    alice = await api.key("alice", READ, CALL, ADMIN)
    bob = await api.key("bob", READ, CALL, ADMIN)
    async with api.client(alice) as rest, api.client() as a, api.client() as b:
        await log_in(a, alice)
        await log_in(b, bob)
        page = await a.get("/servers/new")
        assert page.status_code == 200 and 'id="server-form"' in page.text
        csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
        assert csrf is not None
        form = {"csrf": csrf.group(1), "name": "desk", "title": "Desk", "tools": "greeter", "q": "multiply"}
        searched = await a.post("/servers/new", data={**form, "action": "search"})
        assert 'value="py__multiply"' in searched.text  # the result's Add button
        picked = await a.post("/servers/new", data={**form, "pick": "py__multiply"})
        assert "greeter\npy__multiply</textarea>" in picked.text
        refused = await a.post(
            "/servers/new", data={**form, "tools": "greeter\nnothing_here", "action": "save"}
        )
        assert refused.status_code == 422
        slot = re.search(r'id="err-tools"[^>]*>([^<]*)<', refused.text)
        assert slot is not None and "tools[1]: &#39;nothing_here&#39; matches no listed tool" in slot.group(
            1
        ), refused.text[refused.text.find('id="err-') :][:2500]
        assert (await rest.get(f"{API}/servers/desk")).status_code == 404
        saved = await a.post(
            "/servers/new", data={**form, "tools": "greeter\npy__multiply", "action": "save"}
        )
        assert saved.status_code == 303 and saved.headers["location"] == "/servers/desk"
        await rest.patch(f"{API}/servers/desk", json={"definition": {"hide": ["greeter"]}})  # not on the form
        shown = await a.get("/servers/desk")
        assert 'id="edit-server"' in shown.text
        edit = await a.get("/servers/desk/edit")
        assert edit.status_code == 200 and ">Desk<" not in edit.text and 'value="Desk"' in edit.text
        changed = {
            **form,
            "title": "Front desk",
            "tools": "greeter\npy__multiply\npy__greet",
            "action": "save",
        }
        assert (await a.post("/servers/desk/edit", data=changed)).status_code == 303
        body = (await rest.get(f"{API}/servers/desk")).json()
        assert (body["version"], body["title"], body["definition"]["hide"]) == (3, "Front desk", ["greeter"])
        assert sorted(t["name"] for t in body["tools"]) == ["py__greet", "py__multiply"]
        assert (await a.get("/servers/open/edit")).status_code == 404  # the config file's
        assert (await b.get("/servers/desk/edit")).status_code == 404
    records = await api.runtime.audit.list("alice")
    assert [(r.action, r.via) for r in records if r.object_type == "server"][::-1] == [
        ("server.created", "ui"),
        ("server.updated", "rest"),
        ("server.updated", "ui"),
    ]


async def log_in(client: httpx.AsyncClient, key: str) -> None:
    import re

    form = await client.get("/login")
    csrf = re.search(r'name="csrf" value="([^"]+)"', form.text)
    assert csrf is not None
    posted = await client.post("/login", data={"key": key, "csrf": csrf.group(1), "next": "/"})
    assert posted.status_code == 303, posted.text
