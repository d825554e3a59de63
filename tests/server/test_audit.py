"""The audit log: every change of state through REST, the UI or the CLI leaves exactly one record, in
the change's own transaction; a refused change leaves none; tenants read only their own records.

The mutating routes are enumerated from the app itself, so a new route that is neither audited here
nor named as "not a change" fails `test_every_mutating_route_is_known`.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Any

import httpx
import pytest
from starlette.routing import Mount, Route

from support.api import GREETER, ApiApp, AppFactory
from support.configs import python_backend
from toolweave.runs import RunRecord, new_run_id
from toolweave.store import ALL_TENANTS, Database, SqlRunStore

REMOTE = {"name": "remote", "url": "http://127.0.0.1:9/mcp"}
FILE_FANOUT = {"name": "greet_all", "description": "Greet everyone.", "tools": ["py/greet"]}
CONFIG = {"backends": [python_backend(), REMOTE], "composite_tools": [FILE_FANOUT]}
MUTATING = {"POST", "PUT", "PATCH", "DELETE"}

REST_CHANGES: dict[tuple[str, str], str] = {
    ("POST", "/api/v1/composite-tools"): "composite.created",
    ("PATCH", "/api/v1/composite-tools/{id}"): "composite.updated",
    ("DELETE", "/api/v1/composite-tools/{id}"): "composite.deleted",
    ("POST", "/api/v1/composite-tools/{id}/operations"): "composite.updated",
    ("DELETE", "/api/v1/composite-tools/{id}/operations/{opId}"): "composite.updated",
    ("POST", "/api/v1/composite-tools/{id}/regenerate-description"): "composite.updated",
    ("POST", "/api/v1/keys"): "key.created",
    ("POST", "/api/v1/keys/{id}/revoke"): "key.revoked",
    ("PUT", "/api/v1/connections/{backend}"): "connection.stored",
    ("DELETE", "/api/v1/connections/{backend}"): "connection.deleted",
    ("POST", "/api/v1/runs/{id}/resume"): "run.resumed",
    ("POST", "/api/v1/backends/{name}/reconnect"): "backend.reconnected",
    ("POST", "/api/v1/servers"): "server.created",
    ("PATCH", "/api/v1/servers/{name}"): "server.updated",
    ("DELETE", "/api/v1/servers/{name}"): "server.deleted",
}
REST_NOT_CHANGES = {
    ("POST", "/api/v1/tools/{name}/call"): "a call: its run record and trace say what happened",
    ("POST", "/api/v1/tools/batch"): "calls",
    ("POST", "/api/v1/composite-tools/invoke"): "a call",
}
UI_CHANGES: dict[tuple[str, str], str] = {
    ("POST", "/admin/keys"): "key.created",
    ("POST", "/admin/keys/{key_id}/revoke"): "key.revoked",
    ("POST", "/admin/connections"): "connection.stored",
    ("POST", "/admin/connections/{backend}/delete"): "connection.deleted",
    ("POST", "/build/{kind}"): "composite.created",
    ("POST", "/tools/{name:path}/describe/save"): "composite.updated",
    ("POST", "/calls/{call_id}/cancel"): "call.cancelled",
    ("POST", "/runs/{run_id}/resume"): "run.resumed",
    ("POST", "/backends/{name}/reconnect"): "backend.reconnected",
    ("POST", "/backends/new"): "backend.created",
    ("POST", "/backends/{name}/edit"): "backend.updated",
    ("POST", "/servers/new"): "server.created",
    ("POST", "/servers/{name}/edit"): "server.updated",
    ("POST", "/backends/{name}/delete"): "backend.deleted",
}
UI_NOT_EXERCISED = {
    (
        "POST",
        "/backends/{name}/disconnect",
    ): "writes oauth.disconnected; needs an OAuth backend, not set up here",
}
"""Audited, but not called by `test_every_ui_change_writes_exactly_one_record`."""
UI_NOT_CHANGES = {
    ("POST", "/build/{kind}/check"): "checks a form, stores nothing",
    ("POST", "/backends/check"): "checks the backend form, stores nothing",
    ("POST", "/tools/{name:path}/describe"): "a preview, stores nothing",
    ("POST", "/tools/{name:path}/try"): "a call",
    ("POST", "/calls/{call_id}/answer"): "answers a question inside a call",
    ("POST", "/servers/{name}/try"): "a call",
    ("POST", "/backends/{name}/connect"): "starts an OAuth authorization (the grant comes at the callback)",
    ("POST", "/login"): "a browser session, not stored state",
    ("POST", "/logout"): "a browser session, not stored state",
}


def mutating_routes(app: Any) -> set[tuple[str, str]]:
    """(method, path) of every route that can change something, REST (under the root mount) and UI."""
    found: set[tuple[str, str]] = set()

    def walk(routes: list[Any], prefix: str) -> None:
        for route in routes:
            if isinstance(route, Mount):
                walk(list(route.routes), prefix + route.path)
            elif hasattr(route, "original_router"):  # FastAPI's record of an include_router
                walk(list(route.original_router.routes), prefix + route.include_context.prefix)
            elif isinstance(route, Route):
                for method in (route.methods or set()) & MUTATING:
                    found.add((method, prefix + route.path))

    walk(list(app.routes), "")
    return found


async def records(api: ApiApp) -> list[Any]:
    return await api.runtime.audit.list(ALL_TENANTS, limit=500)


@pytest.fixture
async def audited(sqlite_app: AppFactory) -> AsyncIterator[ApiApp]:
    yield await sqlite_app(CONFIG)


async def leave_interrupted(database: str, tenant: str | None) -> str:
    """A run of the file's fan-out, recorded by a gateway that then stopped: `interrupted`."""
    record = RunRecord(
        id=new_run_id(), tool="greet_all", kind="fanout", tenant=tenant, arguments={"name": "x"}
    )
    async with Database.from_url(database) as db:
        store = SqlRunStore(db)
        await store.start_run(record)
        await store.close()
    return record.id


def test_every_mutating_route_is_known(api_env: None) -> None:
    from toolweave.config import parse_config
    from toolweave.server.app import server_app

    cfg = parse_config({**CONFIG, "gateway": {"database": "sqlite:///:memory:"}})
    found = mutating_routes(server_app(cfg))
    known = {*REST_CHANGES, *REST_NOT_CHANGES, *UI_CHANGES, *UI_NOT_EXERCISED, *UI_NOT_CHANGES}
    assert ("POST", "/api/v1/keys") in found and ("POST", "/admin/keys") in found  # the walk reaches both
    assert found - known == set(), "a route that changes state needs an audit record (and a case here)"
    assert known - found == set(), "a case here for a route that no longer exists"


# -- REST ------------------------------------------------------------------------------------------


async def _one_each_rest(
    api: ApiApp, client: httpx.AsyncClient
) -> list[tuple[tuple[str, str], httpx.Response]]:
    """Call every audited REST route once, in an order where each finds what it needs."""
    done: list[tuple[tuple[str, str], httpx.Response]] = []

    async def step(route: tuple[str, str], answer: Awaitable[httpx.Response]) -> httpx.Response:
        response = await answer
        assert response.status_code < 300, (route, response.text)
        done.append((route, response))
        return response

    created = await step(
        ("POST", "/api/v1/composite-tools"),
        client.post("/api/v1/composite-tools", json={"definition": GREETER}),
    )
    tool_id = created.json()["id"]
    await step(
        ("PATCH", "/api/v1/composite-tools/{id}"),
        client.patch(
            f"/api/v1/composite-tools/{tool_id}",
            json={"definition": {"description": "Hi."}, "status": "disabled"},
        ),
    )
    operation = {"operation": {"slug": "again", "tool": "py/greet"}}
    await step(
        ("POST", "/api/v1/composite-tools/{id}/operations"),
        client.post(f"/api/v1/composite-tools/{tool_id}/operations", json=operation),
    )
    await step(
        ("DELETE", "/api/v1/composite-tools/{id}/operations/{opId}"),
        client.delete(f"/api/v1/composite-tools/{tool_id}/operations/again"),
    )
    await step(
        ("POST", "/api/v1/composite-tools/{id}/regenerate-description"),
        client.post(f"/api/v1/composite-tools/{tool_id}/regenerate-description", json={"save": True}),
    )
    await step(
        ("DELETE", "/api/v1/composite-tools/{id}"), client.delete(f"/api/v1/composite-tools/{tool_id}")
    )
    key = await step(
        ("POST", "/api/v1/keys"),
        client.post("/api/v1/keys", json={"tenant": "acme", "scopes": ["tools:read"], "name": "reader"}),
    )
    await step(
        ("POST", "/api/v1/keys/{id}/revoke"), client.post(f"/api/v1/keys/{key.json()['key']['id']}/revoke")
    )
    await step(
        ("PUT", "/api/v1/connections/{backend}"),
        client.put("/api/v1/connections/remote", json={"headers": {"X-Token": "rest-secret-value-1"}}),
    )
    await step(("DELETE", "/api/v1/connections/{backend}"), client.delete("/api/v1/connections/remote"))
    run_id = await leave_interrupted(api.url, None)
    await step(("POST", "/api/v1/runs/{id}/resume"), client.post(f"/api/v1/runs/{run_id}/resume"))
    await step(("POST", "/api/v1/backends/{name}/reconnect"), client.post("/api/v1/backends/py/reconnect"))
    desk = {"name": "desk", "tools": ["py__greet"]}
    await step(("POST", "/api/v1/servers"), client.post("/api/v1/servers", json={"definition": desk}))
    await step(
        ("PATCH", "/api/v1/servers/{name}"),
        client.patch("/api/v1/servers/desk", json={"definition": {"title": "Desk"}}),
    )
    await step(("DELETE", "/api/v1/servers/{name}"), client.delete("/api/v1/servers/desk"))
    return done


async def test_every_rest_change_writes_exactly_one_record(audited: ApiApp) -> None:
    async with audited.client() as client:
        client.headers["user-agent"] = "audit-test/1"
        before = len(await records(audited))
        done = await _one_each_rest(audited, client)
    assert {route for route, _ in done} == set(REST_CHANGES)
    written = list(reversed(await records(audited)))[before:]
    assert [r.action for r in written] == [REST_CHANGES[route] for route, _ in done]
    for record in written:
        assert (record.actor, record.via) == ("local", "rest")
        assert record.source == "127.0.0.1 (audit-test/1)"
    created, updated = written[0], written[1]
    assert (created.version_before, created.version_after) == (None, 1)
    assert (updated.version_before, updated.version_after) == (1, 2)
    assert updated.detail is not None and updated.detail["status"] == "disabled"
    assert written[5].action == "composite.deleted" and written[5].version_before == 5
    assert written[6].detail == {"prefix": written[6].detail["prefix"], "scopes": ["tools:read"]}
    assert written[8].detail == {"keys": ["X-Token"]}
    dumped = json.dumps([r.to_dict() for r in written])
    assert "rest-secret-value-1" not in dumped and "tw_" not in dumped.replace(
        written[6].detail["prefix"], ""
    )


async def test_a_refused_change_writes_no_record(audited: ApiApp) -> None:
    async with audited.client() as client:
        created = await client.post("/api/v1/composite-tools", json={"definition": GREETER})
        tool_id = created.json()["id"]
        before = len(await records(audited))
        refused = [
            await client.post("/api/v1/composite-tools", json={"definition": GREETER}),  # name taken
            await client.patch(
                f"/api/v1/composite-tools/{tool_id}",
                json={"definition": {"operations": [{"slug": "x", "tool": "py/nope"}]}},
            ),
            await client.patch(
                f"/api/v1/composite-tools/{tool_id}", json={"status": "draft", "expectedVersion": 7}
            ),
            await client.put("/api/v1/connections/remote", json={"headers": {"Host": "elsewhere"}}),
            await client.delete("/api/v1/connections/remote"),
            await client.post("/api/v1/keys", json={"tenant": "acme", "scopes": ["tools:everything"]}),
            await client.post("/api/v1/keys/nope/revoke"),
            await client.post("/api/v1/runs/nope/resume"),
        ]
        assert all(answer.status_code >= 400 for answer in refused), [a.text for a in refused]
    assert len(await records(audited)) == before


async def test_a_change_and_its_record_commit_together(
    audited: ApiApp, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A record that cannot be written undoes the change it records: nothing is changed unaudited."""
    import toolweave.store.audit as audit

    async def broken(*_args: Any, **_kwargs: Any) -> None:
        raise RuntimeError("the audit log is unwritable")

    monkeypatch.setattr("toolweave.store.keys.write_audit", broken)
    with pytest.raises(RuntimeError):
        await audited.runtime.keys.create("acme", ["tools:read"], actor=audit.Actor("acme", "x", "rest"))
    assert await audited.runtime.keys.list("acme") == []


async def test_tenants_read_only_their_own_records(sqlite_app: AppFactory) -> None:
    api = await sqlite_app(CONFIG, require_auth=True)
    acme, other = await api.key("acme"), await api.key("other")
    async with api.client(acme) as client:
        assert (
            await client.put("/api/v1/connections/remote", json={"headers": {"X-A": "1"}})
        ).status_code == 200
    async with api.client(other) as client:
        assert (
            await client.put("/api/v1/connections/remote", json={"headers": {"X-B": "2"}})
        ).status_code == 200
        mine = (await client.get("/api/v1/audit")).json()["records"]
        assert [(r["tenant"], r["action"], r["detail"]) for r in mine] == [
            ("other", "connection.stored", {"keys": ["X-B"]})
        ]
        assert mine[0]["actor"].startswith("key:tw_")
        assert (await client.get("/api/v1/audit", params={"tenant": "acme"})).status_code == 403
        exported = (await client.get("/api/v1/audit/export")).text.splitlines()
        assert [json.loads(line)["tenant"] for line in exported] == ["other"]
    reader = await api.key("acme", "tools:read", "tools:call")
    async with api.client(reader) as client:
        assert (await client.get("/api/v1/audit")).status_code == 403  # tools:admin reads the log


async def test_filters_and_paging(make_app: AppFactory) -> None:
    audited = await make_app(CONFIG)
    async with audited.client() as client:
        for tenant in ("a", "b", "c"):
            assert (
                await client.post("/api/v1/keys", json={"tenant": tenant, "scopes": ["tools:read"]})
            ).status_code == 201
        assert (
            await client.put("/api/v1/connections/remote", json={"headers": {"X-T": "1"}})
        ).status_code == 200
        page = (await client.get("/api/v1/audit", params={"action": "key.*", "limit": 2})).json()
        assert [r["tenant"] for r in page["records"]] == ["c", "b"] and page["next"] is not None
        rest = (await client.get("/api/v1/audit", params={"action": "key.*", "before": page["next"]})).json()
        assert [r["tenant"] for r in rest["records"]] == ["a"] and rest["next"] is None
        only_b = (await client.get("/api/v1/audit", params={"tenant": "b"})).json()["records"]
        assert [r["action"] for r in only_b] == ["key.created"]
        wide = (await client.get("/api/v1/audit", params={"tenant": "-"})).json()["records"]
        assert [r["action"] for r in wide] == ["connection.stored"]
        later = (await client.get("/api/v1/audit", params={"since": "2999-01-01T00:00:00Z"})).json()
        assert later["records"] == []
        naive = await client.get("/api/v1/audit", params={"since": "2020-01-01T00:00:00"})
        assert naive.status_code == 422 and "timezone" in naive.text
        assert (await client.get("/api/v1/audit", params={"limit": 501})).status_code == 422


async def test_retention_deletes_old_records(audited: ApiApp) -> None:
    from datetime import UTC, datetime, timedelta

    await audited.runtime.keys.create("acme", ["tools:read"], actor=_actor())
    assert await audited.runtime.audit.prune(datetime.now(UTC) - timedelta(days=1)) == 0
    assert await audited.runtime.audit.prune(datetime.now(UTC) + timedelta(seconds=1)) == 1
    assert await records(audited) == []


def _actor() -> Any:
    from toolweave.actor import Actor

    return Actor(tenant=None, who="test", via="cli")


# -- the UI ----------------------------------------------------------------------------------------


CSRF = re.compile(r'name="csrf" value="([^"]+)"')


async def _csrf(client: httpx.AsyncClient) -> str:
    page = await client.get("/admin")
    found = CSRF.search(page.text)
    assert found, page.text[:500]
    return found.group(1)


async def _one_each_ui(api: ApiApp, client: httpx.AsyncClient) -> list[tuple[str, str]]:
    token = await _csrf(client)
    done: list[tuple[str, str]] = []

    async def post(route: tuple[str, str], path: str, form: dict[str, Any], **headers: str) -> httpx.Response:
        response = await client.post(path, data={"csrf": token, **form}, headers=headers)
        assert response.status_code < 400, (route, response.status_code, response.text[:2000])
        done.append(route)
        return response

    await post(
        ("POST", "/admin/keys"), "/admin/keys", {"tenant": "acme", "scopes": "tools:read", "name": "ui"}
    )
    key_id = (await api.runtime.keys.list("acme"))[0].id
    await post(("POST", "/admin/keys/{key_id}/revoke"), f"/admin/keys/{key_id}/revoke", {})
    await post(
        ("POST", "/admin/connections"),
        "/admin/connections",
        {"backend": "remote", "headers": "X-Token: ui-secret-2"},
    )
    await post(("POST", "/admin/connections/{backend}/delete"), "/admin/connections/remote/delete", {})
    fanout = {
        "name": "ui_fanout",
        "description": "Both.",
        "targets": "1",
        "t-0-tool": "py/greet",
        "action": "save",
    }
    await post(("POST", "/build/{kind}"), "/build/fanout", fanout)
    await post(
        ("POST", "/tools/{name:path}/describe/save"),
        "/tools/ui_fanout/describe/save",
        {"description": "Greets, from the UI.", "source": "edited"},
    )
    started = await client.post(
        "/tools/py__nap/try", data={"csrf": token, "seconds": "30"}, headers={"hx-request": "true"}
    )
    call_id = re.search(r"/calls/([A-Za-z0-9_-]+)", started.text)
    assert call_id, started.text[:2000]
    await post(
        ("POST", "/calls/{call_id}/cancel"), f"/calls/{call_id.group(1)}/cancel", {}, **{"hx-request": "true"}
    )
    run_id = await leave_interrupted(api.url, None)
    await post(("POST", "/runs/{run_id}/resume"), f"/runs/{run_id}/resume", {})
    await post(("POST", "/backends/{name}/reconnect"), "/backends/py/reconnect", {})
    added = {
        "name": "later",
        "transport": "http",
        "url": "http://127.0.0.1:9/mcp",
        "headers": "X-Key: ui-secret-2",
    }
    await post(("POST", "/backends/new"), "/backends/new", added)
    await post(("POST", "/backends/{name}/edit"), "/backends/later/edit", {**added, "headers": "X-Key"})
    desk = {"name": "uidesk", "tools": "py__greet", "action": "save"}
    await post(("POST", "/servers/new"), "/servers/new", desk)
    await post(("POST", "/servers/{name}/edit"), "/servers/uidesk/edit", {**desk, "title": "UI desk"})
    await post(("POST", "/backends/{name}/delete"), "/backends/later/delete", {})
    return done


async def test_every_ui_change_writes_exactly_one_record(audited: ApiApp) -> None:
    async with audited.client() as client:
        before = len(await records(audited))
        done = await _one_each_ui(audited, client)
    assert set(done) == set(UI_CHANGES)
    written = list(reversed(await records(audited)))[before:]
    assert [r.action for r in written] == [UI_CHANGES[route] for route in done]
    assert {(r.actor, r.via) for r in written} == {("local", "ui")}
    assert "ui-secret-2" not in json.dumps([r.to_dict() for r in written])
    async with audited.client() as client:
        page = await client.get("/audit", params={"action": "key.*"})
        assert page.status_code == 200
        assert (
            "key.revoked" in page.text and "key.created" in page.text and "connection.stored" not in page.text
        )


# -- the CLI ---------------------------------------------------------------------------------------


async def test_cli_changes_are_recorded_and_listed(tmp_path: Path, api_env: None) -> None:
    """`toolweave keys create` on the database directly, then `toolweave audit --jsonl` reads it back."""
    import asyncio

    from typer.testing import CliRunner

    from toolweave.cli import app

    database = f"sqlite:///{tmp_path / 'cli.db'}"
    runner = CliRunner()

    def run(*args: str) -> Any:
        return runner.invoke(app, list(args), catch_exceptions=False)

    created = await asyncio.to_thread(run, "keys", "create", "--tenant", "acme", "--database", database)
    assert created.exit_code == 0, created.output
    listed = await asyncio.to_thread(run, "audit", "--jsonl", "--database", database)
    assert listed.exit_code == 0, listed.output
    lines = [json.loads(line) for line in listed.stdout.splitlines() if line.startswith("{")]
    assert [(r["action"], r["via"], r["tenant"]) for r in lines] == [("key.created", "cli", "acme")]
    assert lines[0]["actor"].startswith("cli:")


async def test_cli_logout_of_an_oauth_backend_is_recorded(tmp_path: Path, api_env: None) -> None:
    """`toolweave logout` forgets the local grant and records `oauth.disconnected`, as the UI's
    Disconnect does; a logout with nothing to forget records nothing."""
    import asyncio

    from typer.testing import CliRunner

    from toolweave.cli import app
    from toolweave.store import ALL_TENANTS, AuditRepository, Database, OAuthTokenRepository

    database = f"sqlite:///{tmp_path / 'cli.db'}"
    config = tmp_path / "toolweave.toml"
    config.write_text(
        f'[gateway]\ndatabase = "{database}"\n\n[[backends]]\nname = "remote"\n'
        'url = "http://127.0.0.1:9/mcp"\n\n[backends.oauth]\n'
    )
    db = Database.from_url(database)
    await db.start()
    try:
        await OAuthTokenRepository(db).put(None, "local", "remote", {"tokens": {"access_token": "a"}})
        runner = CliRunner()

        def run(*args: str) -> Any:
            return runner.invoke(app, [*args, "-c", str(config)], catch_exceptions=False)

        for expected in ("Logged out of remote", "Not logged in to remote"):
            done = await asyncio.to_thread(run, "logout", "remote")
            assert done.exit_code == 0 and expected in done.output, done.output
        records = await AuditRepository(db).list(ALL_TENANTS, limit=10)
    finally:
        await db.close()
    assert [(r.action, r.via, r.object_id) for r in records] == [("oauth.disconnected", "cli", "remote")]
    assert records[0].actor.startswith("cli:")
