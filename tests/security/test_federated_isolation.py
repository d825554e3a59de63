"""Another tenant's federated namespace does not exist for a tenant: not in `GET /backends` or the
UI's backends page, `404` (not `409`) on reconnect, and a composite named like one of its tools gets
the same `409` as any name used on the gateway, naming nothing of it."""

from __future__ import annotations

import re

import httpx

from support.federation import raw_client, served, tool

API = "/api/v1"


async def ui_login(http: httpx.AsyncClient, key: str) -> None:
    page = await http.get("/login")
    found = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert found, page.text
    done = await http.post("/login", data={"key": key, "csrf": found.group(1), "next": "/"})
    assert done.status_code == 303, done.text


def workflow(name: str) -> dict[str, object]:
    return {"definition": {"name": name, "description": "d", "steps": [{"id": "s", "tool": "crm__lookup"}]}}


async def test_another_tenants_federated_namespace_is_not_seen(sqlite_app) -> None:
    patient = {"heartbeat_interval": 60, "heartbeat_timeout": 120}  # the raw client answers no pings
    api = await sqlite_app({"federation": patient}, require_auth=True)
    acme_federate = await api.key("acme", "tools:federate")
    acme_admin = await api.key("acme", "tools:read", "tools:call", "tools:admin")
    globex_admin = await api.key("globex", "tools:read", "tools:call", "tools:admin")
    async with served(api) as base, raw_client(base, acme_federate, "crm") as client:
        assert (await client.register([tool("lookup")]))["accepted"]
        async with api.client(acme_admin) as acme, api.client(globex_admin) as globex:
            listed = {b["name"] for b in (await acme.get(f"{API}/backends")).json()["backends"]}
            assert "crm" in listed
            assert (await acme.post(f"{API}/backends/crm/reconnect")).status_code == 409

            listed = {b["name"] for b in (await globex.get(f"{API}/backends")).json()["backends"]}
            assert "crm" not in listed  # before: listed, with its status and tool count
            unknown = await globex.post(f"{API}/backends/nope/reconnect")
            hidden = await globex.post(f"{API}/backends/crm/reconnect")
            assert hidden.status_code == unknown.status_code == 404  # before: 409 "is federated"
            assert hidden.json()["error"] == {**unknown.json()["error"], "message": "no backend named 'crm'"}

            clash = await globex.post(f"{API}/composite-tools", json=workflow("crm__lookup"))
            assert clash.status_code == 409, clash.text
            assert "'crm'" not in clash.text and "'lookup'" not in clash.text and "backend" not in clash.text
            # the same words as for a name another tenant's composite holds
            made = await acme.post(f"{API}/composite-tools", json=workflow("acme_wf"))
            assert made.status_code == 201, made.text
            taken = await globex.post(f"{API}/composite-tools", json=workflow("acme_wf"))
            assert taken.status_code == 409, taken.text
            assert taken.json()["error"]["message"] == clash.json()["error"]["message"].replace(
                "crm__lookup", "acme_wf"
            )

        async with api.client() as browser:
            await ui_login(browser, globex_admin)
            page = await browser.get("/backends")
            assert page.status_code == 200 and 'data-backend="crm"' not in page.text
        async with api.client() as browser:
            await ui_login(browser, acme_admin)
            assert 'data-backend="crm"' in (await browser.get("/backends")).text
