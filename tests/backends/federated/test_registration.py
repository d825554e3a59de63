"""Registration, ownership and the wire, driven by a hand-written client socket against a served gateway.

Bad manifests get every problem back before the close; nobody registers over a backend's
tools or another tenant's namespace; keys are checked (scope, revocation) and malformed,
binary or oversized frames close only the connection that sent them.
"""

from __future__ import annotations

import asyncio

import orjson
import pytest

from support.configs import stdio_backend
from support.federation import FAST_HEARTBEAT, gone, raw_client, registered, served, tool
from toolweave.backends.federated import protocol


async def federating_app(sqlite_app, **config):
    api = await sqlite_app(
        {"federation": {**FAST_HEARTBEAT, **config.pop("federation", {})}, **config}, require_auth=True
    )
    return api, await api.key("acme", "tools:federate")


async def test_a_bad_manifest_gets_every_problem_back_then_a_close(sqlite_app) -> None:
    api, key = await federating_app(sqlite_app)
    tools = [
        tool("fine"),
        tool("bad name!"),
        {"name": "no_schema"},
        tool("fine"),
        {"name": "wrong_type", "inputSchema": {"type": "array"}},
        tool("broken_schema", properties={"x": {"type": "nonsense"}}),
        {**tool("meta"), "_meta": {"toolweave/federation": {"handler": 5, "extra": "x"}}},
    ]
    async with served(api) as base, raw_client(base, key, "crm") as client:
        answer = await client.register(tools)
        code, reason = await client.closed()
    assert answer["accepted"] is False
    problems = {(p["path"], p["message"].split(" (")[0]) for p in answer["problems"]}
    paths = {path for path, _ in problems}
    assert {
        "tools[1].name",
        "tools[2].inputSchema",
        "tools[3].name",
        "tools[4].inputSchema.type",
        "tools[5].inputSchema.properties.x.type",
        "tools[6]._meta.toolweave/federation.handler",
        "tools[6]._meta.toolweave/federation.extra",
    } <= paths, problems
    assert code == protocol.REJECTED and reason.startswith("manifest refused:")
    assert api.gateway.catalog.get("crm__fine") is None


@pytest.mark.usefixtures("in_process_testserver")  # the gateway's stdio backend: its tools, not its process
@pytest.mark.parametrize(
    ("namespace", "expected"),
    [
        ("Bad Name", "must match"),
        ("ts", "is the name of a configured backend"),
        ("crm", "would be exposed as 'crm__echo', which is already tool 'echo' of backend 'ts'"),
    ],
)
async def test_no_client_registers_over_a_backends_tools(sqlite_app, namespace: str, expected: str) -> None:
    backend = stdio_backend("ts", tools={"echo": {"name": "crm__echo"}})
    api, key = await federating_app(sqlite_app, backends=[backend])
    async with served(api) as base, raw_client(base, key, namespace) as client:
        answer = await client.register([tool("echo")])
        code, _reason = await client.closed()
    assert not answer["accepted"]
    assert any(expected in p["message"] for p in answer["problems"]), answer["problems"]
    assert code == protocol.REJECTED
    assert api.gateway.catalog.get("crm__echo").backend.name == "ts"  # the alias still reaches the backend


async def test_a_namespace_is_its_tenants_alone(sqlite_app) -> None:
    api, acme_key = await federating_app(
        sqlite_app, federation={"namespaces": [{"name": "billing", "tenant": "globex"}]}
    )
    globex_key = await api.key("globex", "tools:federate")
    acme_agent = await api.key("acme", "tools:read", "tools:call")
    globex_agent = await api.key("globex", "tools:read", "tools:call")
    async with served(api) as base, raw_client(base, acme_key, "crm") as acme:
        assert (await acme.register([tool("lookup")]))["accepted"]
        async with raw_client(base, globex_key, "crm") as intruder:
            refused = await intruder.register([tool("lookup")])
            assert (await intruder.closed())[0] == protocol.REJECTED
        assert refused["problems"] == [
            {"path": "namespace", "message": "namespace 'crm' is registered by another tenant"}
        ]
        async with raw_client(base, acme_key, "billing") as squatter:
            refused = await squatter.register([tool("charge")])
        assert refused["problems"][0]["message"] == "namespace 'billing' is reserved for another tenant"
        for key, listed in ((acme_agent, True), (globex_agent, False)):
            async with api.client(key) as http:
                names = {t["name"] for t in (await http.get("/api/v1/ai-tools")).json()["tools"]}
                called = await http.post("/api/v1/tools/crm__lookup/call", json={})
            assert ("crm__lookup" in names) is listed
            assert (called.status_code == 200) is listed, called.text


async def test_a_shared_namespace_is_visible_to_every_tenant_and_served_by_its_tenant_only(
    sqlite_app,
) -> None:
    """A shared namespace receives every tenant's calls, so only the tenant the config names may serve
    it: another tenant's `tools:federate` key registering it first would receive them all."""
    namespaces = [{"name": "crm", "shared": True, "tenant": "acme"}]
    api, key = await federating_app(sqlite_app, federation={"namespaces": namespaces})
    globex_agent = await api.key("globex", "tools:read")
    globex_federate = await api.key("globex", "tools:federate")
    async with served(api) as base:
        async with raw_client(base, globex_federate, "crm") as squatter:
            refused = await squatter.register([tool("lookup")])
        assert refused["problems"][0]["message"] == "namespace 'crm' is reserved for another tenant"
        async with raw_client(base, key, "crm") as client:
            assert (await client.register([tool("lookup")]))["accepted"]
            async with api.client(globex_agent) as http:
                names = {t["name"] for t in (await http.get("/api/v1/ai-tools")).json()["tools"]}
            assert "crm__lookup" in names


async def test_without_auth_the_local_operator_serves_a_reserved_namespace(sqlite_app) -> None:
    """Without keys everyone is the operator, who may serve what the config reserves for a tenant."""
    namespaces = [{"name": "crm", "shared": True, "tenant": "acme"}]
    api = await sqlite_app({"federation": {**FAST_HEARTBEAT, "namespaces": namespaces}})
    async with served(api) as base, raw_client(base, None, "crm") as client:
        assert (await client.register([tool("lookup")]))["accepted"]


async def test_keys_without_the_scope_or_revoked_are_closed_with_the_reason(sqlite_app) -> None:
    api, key = await federating_app(sqlite_app)
    agent_key = await api.key("acme", "tools:read", "tools:call")
    async with served(api) as base:
        for bad, code, reason in (
            (agent_key, protocol.FORBIDDEN, "this API key lacks the tools:federate scope"),
            ("tw_nonsense", protocol.UNAUTHORIZED, "the API key is unknown, malformed or revoked"),
            (None, protocol.UNAUTHORIZED, "an API key is required"),
        ):
            async with raw_client(base, bad) as client:
                assert await client.closed() == (code, reason)
        async with raw_client(base, key, "crm") as client:
            assert (await client.register([tool("lookup")]))["accepted"]
            info = next(k for k in await api.runtime.keys.list() if "tools:federate" in k.scopes)
            await api.runtime.revoke_key(info.id)
            assert await client.closed(2.0) == (protocol.UNAUTHORIZED, "the API key was revoked")
        await gone(api.gateway, "crm__lookup", 2.0)


@pytest.mark.parametrize(
    ("frame", "code", "reason"),
    [
        ("not json", protocol.INVALID, "a frame is not JSON"),
        (
            '[{"jsonrpc": "2.0", "method": "ping", "id": 1}]',
            protocol.INVALID,
            "JSON-RPC batches are not accepted",
        ),
        ('{"id": 1, "result": {}}', protocol.INVALID, "a frame is not a JSON-RPC 2.0 message"),
        (b"\x00\x01", protocol.UNSUPPORTED, "binary frames are not accepted"),
        ("x" * 5000, protocol.TOO_BIG, "a message is larger than the limit of 4096 bytes"),
    ],
)
async def test_a_bad_frame_closes_only_its_own_connection(sqlite_app, frame, code: int, reason: str) -> None:
    api, key = await federating_app(sqlite_app, federation={"max_frame_bytes": 4096})
    async with served(api) as base, raw_client(base, key, "good") as good:
        assert (await good.register([tool("lookup")]))["accepted"]
        async with raw_client(base, key, "bad") as bad:
            assert (await bad.register([tool("lookup")]))["accepted"]
            await bad.socket.send(frame)
            closed_code, closed_reason = await bad.closed()
        assert closed_code == code and closed_reason.startswith(reason), closed_reason
        await gone(api.gateway, "bad__lookup")
        assert api.gateway.catalog.get("good__lookup") is not None
        await good.socket.send(orjson.dumps({"jsonrpc": "2.0", "id": "p", "method": "ping"}).decode())
        assert orjson.loads(await good.socket.recv())["id"] == "p"  # the other client is served on


async def test_a_silent_client_is_disconnected_within_seconds_and_its_calls_fail(sqlite_app) -> None:
    api, key = await federating_app(sqlite_app)
    agent_key = await api.key("acme", "tools:read", "tools:call")
    async with served(api) as base, raw_client(base, key, "mute") as client:
        assert (await client.register([tool("lookup")]))["accepted"]
        await registered(api.gateway, "mute__lookup")
        async with api.client(agent_key) as http:
            started = asyncio.get_running_loop().time()
            response = await http.post("/api/v1/tools/mute__lookup/call", json={})  # never answered
            waited = asyncio.get_running_loop().time() - started
        result = response.json()
        assert result["isError"] and "mute#" in result["content"][0]["text"], result
        assert waited < 3.0
        assert (await client.closed(1.0))[0] == protocol.HEARTBEAT
        await gone(api.gateway, "mute__lookup")


async def test_a_timed_out_call_is_cancelled_on_the_client(sqlite_app) -> None:
    api, key = await federating_app(sqlite_app, federation={"call_timeout": 0.5})
    agent_key = await api.key("acme", "tools:read", "tools:call")
    async with served(api) as base, raw_client(base, key, "lazy") as client:
        assert (await client.register([tool("work")]))["accepted"]
        async with api.client(agent_key) as http:
            pending = asyncio.create_task(http.post("/api/v1/tools/lazy__work/call", json={}))
            call = await client.next_message()
            assert call["method"] == "tools/call" and call["params"] == {"name": "work", "arguments": {}}
            cancelled = await client.next_message(5)
            result = (await pending).json()
    assert cancelled["method"] == "notifications/cancelled"
    assert cancelled["params"]["requestId"] == call["id"]
    assert (
        result["isError"]
        and "timed out after 0.5s (the client was told to cancel it)" in result["content"][0]["text"]
    )


async def test_a_result_that_breaks_the_tools_output_schema_is_an_error(sqlite_app) -> None:
    api, key = await federating_app(sqlite_app)
    agent_key = await api.key("acme", "tools:read", "tools:call")
    counted = {
        **tool("count"),
        "outputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]},
    }
    async with served(api) as base, raw_client(base, key, "typed") as client:
        assert (await client.register([counted]))["accepted"]
        results = []
        async with api.client(agent_key) as http:
            for structured in ({"n": 3}, {"n": "three"}, None):
                pending = asyncio.create_task(http.post("/api/v1/tools/typed__count/call", json={}))
                call = await client.next_message()
                answer: dict = {"content": [{"type": "text", "text": "counted"}]}
                if structured is not None:
                    answer["structuredContent"] = structured
                await client.answer(call["id"], answer)
                results.append((await pending).json())
    good, wrong, missing = results
    assert not good.get("isError") and good["structuredContent"] == {"n": 3}
    assert (
        wrong["isError"]
        and "does not match the tool's outputSchema: n: 'three' is not of type 'integer'"
        in wrong["content"][0]["text"]
    )
    assert missing["isError"] and "it has no structuredContent" in missing["content"][0]["text"]
