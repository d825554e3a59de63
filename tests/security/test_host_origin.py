"""DNS rebinding and cross-site requests: the Host and Origin checks hold on every route.

A web page the user visits can make the browser send requests to a loopback
gateway under the page's own host name (DNS rebinding), or from its own
origin. With auth off (the loopback default) every such request would be the
operator, so `/api/v1`, `/mcp` and `/metrics` must refuse a Host or Origin
that is not the gateway's own.
"""

from __future__ import annotations

import asyncio

import httpx
import pytest

from support.api import GREETER, AppFactory
from support.configs import python_backend
from support.serving import serve_asgi

API = "/api/v1"
MCP_INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


def client_for(app: object, host: str) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=("127.0.0.1", 50000))  # type: ignore[arg-type]
    return httpx.AsyncClient(transport=transport, base_url=f"http://{host}")


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("GET", f"{API}/ai-tools", None),
        ("POST", f"{API}/tools/py__greet/call", {"name": "a"}),
        ("POST", f"{API}/composite-tools", {"definition": GREETER}),
        ("GET", "/metrics", None),
        ("POST", "/mcp", MCP_INIT),
    ],
)
async def test_a_rebound_host_name_is_refused_on_every_route(
    sqlite_app: AppFactory, method: str, path: str, body: object
) -> None:
    api = await sqlite_app({"backends": [python_backend()]})
    async with client_for(api.app, "attacker.example:8080") as client:
        response = await client.request(method, path, json=body, headers=MCP_HEADERS)
    assert response.status_code == 421, response.text
    assert response.json()["error"]["code"] == "misdirected_request"
    assert "attacker.example" in response.json()["error"]["message"]
    async with api.client() as local:
        assert (await local.get(f"{API}/composite-tools")).json()[
            "compositeTools"
        ] == []  # nothing was created


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.1:8080", "localhost:9", "localhost", "[::1]:8080"])
async def test_loopback_host_names_are_served(sqlite_app: AppFactory, host: str) -> None:
    api = await sqlite_app({"backends": [python_backend()]})
    async with client_for(api.app, host) as client:
        assert (await client.get(f"{API}/ai-tools")).status_code == 200


async def test_a_foreign_origin_is_refused_and_the_gateways_own_is_served(sqlite_app: AppFactory) -> None:
    api = await sqlite_app({"backends": [python_backend()]})
    async with client_for(api.app, "127.0.0.1:8080") as client:
        evil = await client.post(
            f"{API}/tools/py__greet/call", json={"name": "a"}, headers={"Origin": "https://attacker.example"}
        )
        assert evil.status_code == 403 and evil.json()["error"]["code"] == "forbidden_origin"
        null = await client.get(f"{API}/ai-tools", headers={"Origin": "null"})
        assert null.status_code == 403
        own = await client.get(f"{API}/ai-tools", headers={"Origin": "http://127.0.0.1:8080"})
        assert own.status_code == 200
        local_page = await client.get(f"{API}/ai-tools", headers={"Origin": "http://localhost:3000"})
        assert local_page.status_code == 200


async def test_configured_hosts_and_origins_replace_the_loopback_default(sqlite_app: AppFactory) -> None:
    api = await sqlite_app(
        {
            "backends": [python_backend()],
            "gateway": {
                "allowed_hosts": ["tools.internal", "gw.example:*"],
                "allowed_origins": ["https://console.example"],
            },
        }
    )
    for host, status in [("tools.internal", 200), ("gw.example:8443", 200), ("other.example", 421)]:
        async with client_for(api.app, host) as client:
            assert (await client.get(f"{API}/ai-tools")).status_code == status, host
    async with client_for(api.app, "tools.internal") as client:
        ok = await client.get(f"{API}/ai-tools", headers={"Origin": "https://console.example"})
        bad = await client.get(f"{API}/ai-tools", headers={"Origin": "https://elsewhere.example"})
    assert (ok.status_code, bad.status_code) == (200, 403)


def test_bad_allowed_host_entries_are_config_errors() -> None:
    from toolweave.config import parse_config
    from toolweave.problems import ConfigError

    with pytest.raises(ConfigError) as caught:
        parse_config({"gateway": {"allowed_hosts": ["http://x.example/"], "allowed_origins": ["x.example"]}})
    text = str(caught.value)
    assert "allowed_hosts" in text and "allowed_origins" in text


@pytest.mark.parametrize(
    ("headers", "reason"),
    [({"Host": "attacker.example:8080"}, "attacker.example"), ({"Origin": "https://evil.example"}, "origin")],
)
async def test_a_websocket_from_a_rebound_host_or_foreign_origin_is_closed_with_the_reason(
    sqlite_app: AppFactory, headers: dict[str, str], reason: str
) -> None:
    """The federation socket goes through the same check; the refusal must be a WebSocket close, which
    the server turns into a 403 for the handshake, not an HTTP reply written onto a WebSocket."""
    api = await sqlite_app({"backends": [python_backend()]})
    async with serve_asgi(api.app, lifespan="off") as base:
        host, port = base.removeprefix("http://").split(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        fields = {
            "Host": f"{host}:{port}",
            "Upgrade": "websocket",
            "Connection": "Upgrade",
            "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
            "Sec-WebSocket-Version": "13",
            **headers,
        }
        request = f"GET {API}/federation?namespace=x HTTP/1.1\r\n" + "".join(
            f"{name}: {value}\r\n" for name, value in fields.items()
        )
        writer.write((request + "\r\n").encode())
        await writer.drain()
        status = await asyncio.wait_for(reader.readline(), 10)
        writer.close()
    assert status.split()[1] == b"403", status
