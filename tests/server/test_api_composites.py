"""Composite tools through the REST API alone: create, edit, export, invoke, restart — on SQLite and
PostgreSQL — plus validation-before-storage, name clashes, statuses, degradation and operations."""

from __future__ import annotations

from typing import Any

import pytest

from support.api import GREETER, SCRAPER, AppFactory, problems
from support.configs import python_backend, stdio_backend

pytestmark = pytest.mark.usefixtures("in_process_testserver")
"""The REST API is the subject: the test server behind it runs in-process (support/inprocess.py)."""

API = "/api/v1"
LINKEDIN = "https://www.linkedin.com/in/johndoe"


def scraper_config(**extra: Any) -> dict[str, Any]:
    return {"backends": [stdio_backend()], **extra}


async def test_create_edit_export_invoke_and_find_it_all_after_a_restart(make_app: AppFactory) -> None:
    api = await make_app(scraper_config())
    async with api.client() as client:
        created = await client.post(f"{API}/composite-tools", json={"definition": SCRAPER, "note": "first"})
        assert created.status_code == 201, created.text
        tool = created.json()
        assert (
            tool["status"] == "active" and tool["served"] and tool["version"] == 1 and tool["source"] == "api"
        )
        assert created.headers["location"].endswith(tool["id"])
        assert tool["tool"]["name"] == "smart_scraper" and "# Required inputs" in tool["tool"]["description"]

        invoked = await client.post(
            f"{API}/composite-tools/invoke", json={"tool": "smart_scraper", "params": {"url": LINKEDIN}}
        )
        body = invoked.json()
        assert invoked.status_code == 200 and body["success"] is True, body
        assert body["data"]["scraper"] == "linkedin"
        meta = body["meta"]
        assert meta["compositeTool"] == "smart_scraper" and meta["selectedOperation"] == "ts/scrape_profile"
        assert meta["routingReason"] == "url contains 'linkedin.com'" and meta["integration"] == "ts"
        assert (
            meta["operation"] == "linkedin"
            and meta["requestId"].startswith("req_")
            and meta["latencyMs"] >= 0
        )

        # edit: a reddit-style rule for the generic scraper, by merge patch (lists replace)
        rules = [
            *SCRAPER["rules"],
            {
                "condition": {"type": "contains", "field": "url", "value": "example.org"},
                "operation": "generic",
                "priority": 2,
            },
        ]
        edited = await client.patch(
            f"{API}/composite-tools/smart_scraper",
            json={"definition": {"rules": rules, "description": "Scrape any page."}, "expectedVersion": 1},
        )
        assert edited.status_code == 200, edited.text
        assert (
            edited.json()["version"] == 2 and edited.json()["definition"]["description"] == "Scrape any page."
        )

        exported = await client.get(f"{API}/composite-tools/{tool['id']}/tools/openai")
        assert exported.status_code == 200
        function = exported.json()["function"]
        assert function["name"] == "smart_scraper" and function["description"].startswith(
            "Use this tool to scrape any page."
        )
        assert function["parameters"]["properties"]["url"]["type"] == "string"

        generic = await client.post(
            f"{API}/composite-tools/invoke",
            json={"tool": tool["id"], "params": {"url": "https://example.org/a"}},
        )
        assert generic.json()["meta"]["routingReason"] == "url contains 'example.org'"
        run_id = generic.json()["meta"]["runId"]

    await make_app.close(api)  # the gateway restarts on the same database
    again = await make_app(scraper_config())
    async with again.client() as client:
        found = (await client.get(f"{API}/composite-tools/smart_scraper")).json()
        assert found["version"] == 2 and found["served"] and found["status"] == "active"
        versions = (await client.get(f"{API}/composite-tools/smart_scraper/versions")).json()["versions"]
        assert [(v["version"], v["note"]) for v in versions] == [(1, "first"), (2, None)]
        run = (await client.get(f"{API}/runs/{run_id}")).json()
        assert (
            run["tool"] == "smart_scraper" and run["operation"] == "generic" and run["status"] == "completed"
        )
        listed = (await client.get(f"{API}/runs", params={"tool": "smart_scraper"})).json()["runs"]
        assert len(listed) == 2
        invoked = await client.post(
            f"{API}/composite-tools/invoke", json={"tool": "smart_scraper", "params": {"url": LINKEDIN}}
        )
        assert invoked.json()["meta"]["operation"] == "linkedin"
        names = [
            t["name"]
            for t in (await client.get(f"{API}/ai-tools", params={"type": "composite"})).json()["tools"]
        ]
        assert names == ["smart_scraper"]


async def test_a_rejected_update_changes_nothing_and_the_previous_version_keeps_serving(
    sqlite_app: AppFactory,
) -> None:
    api = await sqlite_app({"backends": [python_backend()]})
    async with api.client() as client:
        created = (await client.post(f"{API}/composite-tools", json={"definition": GREETER})).json()
        broken = {
            "operations": [
                {"slug": "greet", "tool": "py/nope"},
                {"slug": "multiply", "tool": "py/multiply", "x": 1},
            ],
            "routing": "sideways",
        }
        rejected = await client.patch(f"{API}/composite-tools/greeter", json={"definition": broken})
        assert rejected.status_code == 422
        paths = [path for path, _message in problems(rejected)]
        assert (
            "definition.routing" in paths and "definition.operations[1].x" in paths
        )  # every problem, with paths
        unknown_tool = await client.patch(
            f"{API}/composite-tools/greeter",
            json={"definition": {"operations": [{"slug": "greet", "tool": "py/nope"}]}},
        )
        assert unknown_tool.status_code == 422
        assert any("py/nope" in message for _path, message in problems(unknown_tool)), unknown_tool.text
        current = (await client.get(f"{API}/composite-tools/{created['id']}")).json()
        assert current["version"] == 1 and current["definition"] == GREETER and current["served"]
        result = await client.post(
            f"{API}/composite-tools/invoke",
            json={"tool": "greeter", "params": {"operation": "greet", "name": "Ada"}},
        )
        assert result.json()["message"] == "Hello, Ada."
        stale = await client.patch(
            f"{API}/composite-tools/greeter", json={"definition": {"description": "x"}, "expectedVersion": 7}
        )
        assert stale.status_code == 409 and "version 1, not 7" in stale.json()["error"]["message"]


async def test_name_clashes_name_both_sides(sqlite_app: AppFactory) -> None:
    file_composite = {"name": "from_file", "tools": ["py/greet"]}
    api = await sqlite_app(
        {"backends": [python_backend(hide=["drop_table"])], "composite_tools": [file_composite]}
    )
    async with api.client() as client:
        for name, fragment in [
            ("py__greet", "backend 'py' tool 'greet'"),
            ("py__drop_table", "hidden from clients"),
            ("from_file", "defined in the config file"),
        ]:
            clash = await client.post(
                f"{API}/composite-tools", json={"definition": {**GREETER, "name": name}}
            )
            assert clash.status_code == 409, clash.text
            message = clash.json()["error"]["message"]
            assert f"composite tool {name!r} (this request)" in message and fragment in message
        assert (await client.post(f"{API}/composite-tools", json={"definition": GREETER})).status_code == 201
        again = await client.post(f"{API}/composite-tools", json={"definition": GREETER})
        assert again.status_code == 409


async def test_file_composites_are_listed_and_read_only(sqlite_app: AppFactory) -> None:
    api = await sqlite_app(
        {"backends": [python_backend()], "composite_tools": [{"name": "from_file", "tools": ["py/greet"]}]}
    )
    async with api.client() as client:
        listed = (await client.get(f"{API}/composite-tools")).json()["compositeTools"]
        assert [(t["name"], t["source"], t["readOnly"], t["served"]) for t in listed] == [
            ("from_file", "file", True, True)
        ]
        for method in ("patch", "delete"):
            kwargs = {"json": {"status": "disabled"}} if method == "patch" else {}
            refused = await getattr(client, method)(f"{API}/composite-tools/from_file", **kwargs)
            assert refused.status_code == 409 and refused.json()["error"]["code"] == "read_only"
            assert "read-only through the API" in refused.json()["error"]["message"]
        exported = await client.get(f"{API}/composite-tools/from_file/tools/anthropic")
        assert exported.json()["name"] == "from_file"
        assert (await client.get(f"{API}/composite-tools/from_file/versions")).json() == {"versions": []}
        # a preview of the description saves nothing, so a file-defined tool may have one; saving may not
        preview = await client.post(
            f"{API}/composite-tools/from_file/regenerate-description", json={"save": False}
        )
        assert preview.status_code == 200, preview.text
        assert preview.json()["saved"] is False and "py__greet" in preview.json()["description"]
        saving = await client.post(
            f"{API}/composite-tools/from_file/regenerate-description", json={"save": True}
        )
        assert saving.status_code == 409 and saving.json()["error"]["code"] == "read_only"


async def test_draft_and_disabled_are_stored_but_not_served(sqlite_app: AppFactory) -> None:
    api = await sqlite_app({"backends": [python_backend()]})
    seen: list[int] = []
    api.gateway.on_tools_changed(lambda: seen.append(1))
    async with api.client() as client:
        draft = (
            await client.post(f"{API}/composite-tools", json={"definition": GREETER, "status": "draft"})
        ).json()
        assert (
            draft["status"] == "draft"
            and not draft["served"]
            and "greeter" not in api.gateway.catalog.entries
        )
        exported = await client.get(f"{API}/composite-tools/greeter/tools/mcp")
        assert (
            exported.status_code == 200 and exported.json()["name"] == "greeter"
        )  # a draft exports as it would serve
        invoke = await client.post(f"{API}/composite-tools/invoke", json={"tool": "greeter", "params": {}})
        assert invoke.status_code == 409 and invoke.json()["error"]["code"] == "not_served"
        active = (await client.patch(f"{API}/composite-tools/greeter", json={"status": "active"})).json()
        assert active["served"] and "greeter" in [t.name for t in api.gateway.list_tools()]
        assert seen, "list_changed must reach MCP clients"
        disabled = (await client.patch(f"{API}/composite-tools/greeter", json={"status": "disabled"})).json()
        assert disabled["status"] == "disabled" and "greeter" not in [
            t.name for t in api.gateway.list_tools()
        ]
        deleted = await client.delete(f"{API}/composite-tools/greeter")
        assert deleted.status_code == 204
        assert (await client.get(f"{API}/composite-tools/greeter")).status_code == 404


async def test_degraded_when_a_referenced_tool_disappears_and_active_when_it_returns(
    sqlite_app: AppFactory,
) -> None:
    api = await sqlite_app({"backends": [python_backend()]})
    async with api.client() as client:
        await client.post(f"{API}/composite-tools", json={"definition": GREETER})
        backend = api.gateway.backends["py"]
        tools = list(backend.tools)
        backend.tools = [t for t in tools if t.name != "multiply"]
        api.gateway.rebuild()
        await api.runtime.definitions.settled()
        degraded = (await client.get(f"{API}/composite-tools/greeter")).json()
        assert degraded["status"] == "degraded" and not degraded["served"]
        assert any("py/multiply" in error for error in degraded["validationErrors"]), degraded
        assert "greeter" not in [t.name for t in api.gateway.list_tools()]
        listed = (await client.get(f"{API}/ai-tools", params={"type": "composite"})).json()["tools"]
        assert [(t["name"], t["status"]) for t in listed] == [("greeter", "degraded")]
        backend.tools = tools
        api.gateway.rebuild()
        await api.runtime.definitions.settled()
        healed = (await client.get(f"{API}/composite-tools/greeter")).json()
        assert healed["status"] == "active" and healed["served"] and healed["validationErrors"] == []


async def test_a_stored_definition_that_no_longer_builds_is_degraded_at_startup(
    sqlite_app: AppFactory,
) -> None:
    api = await sqlite_app({"backends": [python_backend()]})
    async with api.client() as client:
        await client.post(f"{API}/composite-tools", json={"definition": GREETER})
    await sqlite_app.close(api)  # restarted with the backend renamed: its tools are gone
    gone = await sqlite_app({"backends": [python_backend(name="other")]})
    async with gone.client() as client:
        found = (await client.get(f"{API}/composite-tools/greeter")).json()
        assert found["status"] == "degraded" and found["validationErrors"] and not found["served"]


async def test_operations_are_added_and_removed_as_new_versions(sqlite_app: AppFactory) -> None:
    api = await sqlite_app({"backends": [stdio_backend()]})
    async with api.client() as client:
        await client.post(f"{API}/composite-tools", json={"definition": SCRAPER})
        reddit = {"slug": "reddit", "tool": "ts/fetch_post", "parameter_mapping": {"url": "reddit_url"}}
        rule = {
            "condition": {"type": "contains", "field": "url", "value": "reddit.com"},
            "operation": "reddit",
        }
        added = await client.post(
            f"{API}/composite-tools/smart_scraper/operations", json={"operation": reddit, "rules": [rule]}
        )
        assert added.status_code == 201, added.text
        assert [op["slug"] for op in added.json()["definition"]["operations"]] == [
            "linkedin",
            "generic",
            "reddit",
        ]
        invoked = await client.post(
            f"{API}/composite-tools/invoke",
            json={"tool": "smart_scraper", "params": {"url": "https://reddit.com/r/x/1"}},
        )
        assert invoked.json()["data"]["scraper"] == "reddit"
        duplicate = await client.post(
            f"{API}/composite-tools/smart_scraper/operations", json={"operation": reddit}
        )
        assert duplicate.status_code == 409
        removed = await client.delete(f"{API}/composite-tools/smart_scraper/operations/reddit")
        assert removed.status_code == 200 and removed.json()["version"] == 3
        assert all(r["operation"] != "reddit" for r in removed.json()["definition"]["rules"])
        missing = await client.delete(f"{API}/composite-tools/smart_scraper/operations/reddit")
        assert missing.status_code == 404
        last = await client.delete(f"{API}/composite-tools/smart_scraper/operations/generic")
        assert last.status_code == 200  # linkedin remains, with its rule
        empty = await client.delete(f"{API}/composite-tools/smart_scraper/operations/linkedin")
        assert empty.status_code == 422  # a router without operations is invalid; nothing changes
        assert (await client.get(f"{API}/composite-tools/smart_scraper")).json()["version"] == 4


async def test_bad_input_is_a_4xx_with_every_problem(sqlite_app: AppFactory) -> None:
    api = await sqlite_app({"backends": [python_backend()]})
    async with api.client() as client:
        cases = [
            ("post", "/composite-tools", {"definition": {"name": "x"}}, 422),
            ("post", "/composite-tools", {"definition": GREETER, "status": "degraded"}, 422),
            ("post", "/composite-tools", {"definition": GREETER, "unknown": 1}, 422),
            ("post", "/composite-tools", None, 422),
            ("patch", "/composite-tools/nope", {"status": "active"}, 404),
            ("get", "/composite-tools/nope/tools/yaml", None, 422),
            ("post", "/composite-tools/invoke", {"tool": "nope"}, 404),
            ("post", "/composite-tools/invoke", {"tool": "py__greet"}, 404),
            ("post", "/tools/nope/call", {}, 404),
            ("get", "/runs/nope", None, 404),
            ("get", "/runs", {"limit": 0}, 422),
        ]
        for method, path, body, status in cases:
            if method == "get":
                response = await client.get(f"{API}{path}", params=body)
            else:
                response = await client.request(method.upper(), f"{API}{path}", json=body)
            assert response.status_code == status, (method, path, response.text)
            error = response.json()["error"]
            assert error["code"] and error["message"]
        invalid_json = await client.post(
            f"{API}/composite-tools", content=b"{not json", headers={"content-type": "application/json"}
        )
        assert invalid_json.status_code == 422
        many = await client.post(
            f"{API}/composite-tools", json={"definition": {"name": "bad name!", "kind": "dag"}}
        )
        assert len(problems(many)) >= 1 and all(path.startswith("definition") for path, _ in problems(many))


async def test_direct_calls_and_batches(sqlite_app: AppFactory) -> None:
    api = await sqlite_app({"backends": [python_backend()]})
    async with api.client() as client:
        called = await client.post(f"{API}/tools/py__greet/call", json={"name": "REST"})
        assert called.status_code == 200 and called.json()["content"][0]["text"] == "Hello, REST."
        failed = await client.post(f"{API}/tools/py__explode/call", json={})
        assert failed.status_code == 200 and failed.json()["isError"] is True
        batch = await client.post(
            f"{API}/tools/batch",
            json={
                "calls": [
                    {"id": "a", "name": "py__multiply", "arguments": {"a": 6, "b": 7}},
                    {"name": "nope"},
                    {"id": "c", "name": "py__greet", "arguments": {"name": "B"}},
                ]
            },
        )
        results = batch.json()["results"]
        assert [(r["id"], r["result"]["isError"]) for r in results] == [
            ("a", False),
            ("1", True),
            ("c", False),
        ]
        assert results[0]["result"]["structuredContent"] == {"product": 42.0}
        backends = (await client.get(f"{API}/backends")).json()["backends"]
        assert [(b["name"], b["status"], b["tools"] > 0) for b in backends] == [("py", "connected", True)]
        simple = (await client.get(f"{API}/ai-tools", params={"type": "simple"})).json()["tools"]
        assert {t["type"] for t in simple} == {"simple"} and "py__greet" in [t["name"] for t in simple]
        await client.post(f"{API}/composite-tools", json={"definition": GREETER})
        greet = next(
            t for t in (await client.get(f"{API}/ai-tools")).json()["tools"] if t["name"] == "py__greet"
        )
        assert greet["usedIn"] == ["greeter"]


@pytest.mark.parametrize("path", ["/openapi.json", "/docs"])
async def test_the_api_is_described(sqlite_app: AppFactory, path: str) -> None:
    api = await sqlite_app({"backends": [python_backend()]}, require_auth=True)
    async with api.client() as client:
        response = await client.get(path)
        assert response.status_code == 200
        if path == "/openapi.json":
            paths = response.json()["paths"]
            assert "/api/v1/composite-tools/invoke" in paths and "/api/v1/tools/batch" in paths
            assert "/api/v1/connections/{backend}" in paths


def test_the_export_route_knows_every_format() -> None:
    from typing import get_args

    from toolweave.export import FORMATS
    from toolweave.server.api.composites import Format

    assert set(get_args(Format)) == set(FORMATS)
