"""What a refused MCP client is told: a 401 on /mcp is a JSON-RPC error whose message is the reason
(SDK clients show it) and keeps its `WWW-Authenticate` challenge; with issuers configured the challenge
names the protected-resource metadata, which is served (RFC 9728) at both well-known forms."""

from __future__ import annotations

import httpx
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

from support.api import AppFactory
from support.configs import python_backend
from support.serving import serve_asgi

ISSUER = "http://127.0.0.1:9/realms/acme"
"""An issuer nobody answers at: nothing here needs its keys."""


async def test_a_401_on_mcp_is_a_jsonrpc_error_the_sdk_client_shows(sqlite_app: AppFactory) -> None:
    api = await sqlite_app({"backends": [python_backend()]}, require_auth=True)
    async with api.client("tw_not-a-real-key") as client:
        refused = await client.post("/mcp", json={"jsonrpc": "2.0", "id": 7, "method": "tools/list"})
    assert refused.status_code == 401
    assert refused.headers["www-authenticate"].startswith("Bearer ")
    assert 'error="invalid_token"' in refused.headers["www-authenticate"]
    body = refused.json()
    assert (
        body["jsonrpc"] == "2.0"
        and body["error"]["message"] == "the API key is unknown, malformed or revoked"
    )
    app = api.app
    await api.runtime.close()
    async with serve_asgi(app) as base:
        http = create_mcp_http_client(headers={"Authorization": "Bearer tw_not-a-real-key"})
        with pytest.raises(BaseException) as raised:
            async with Client(streamable_http_client(f"{base}/mcp", http_client=http)) as mcp:
                await mcp.list_tools()
    # before: "Server returned an error response", the reason lost
    assert "the API key is unknown, malformed or revoked" in leaf_messages(raised.value)


def leaf_messages(error: BaseException) -> list[str]:
    """The messages of the exceptions inside (nested) exception groups."""
    if isinstance(error, BaseExceptionGroup):
        return [message for inner in error.exceptions for message in leaf_messages(inner)]
    return [str(error)]


async def test_the_rest_api_keeps_its_error_shape(sqlite_app: AppFactory) -> None:
    api = await sqlite_app({"backends": [python_backend()]}, require_auth=True)
    async with api.client() as client:
        refused = await client.get("/api/v1/backends")
    assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"
    assert 'realm="toolweave"' in refused.headers["www-authenticate"]


async def test_with_an_issuer_the_challenge_names_the_resource_metadata(sqlite_app: AppFactory) -> None:
    config = {
        "backends": [python_backend()],
        "gateway": {"public_url": "https://tools.example.com/"},
        "auth": {"issuers": [{"issuer": ISSUER}]},
    }
    api = await sqlite_app(config, require_auth=True)
    async with api.client() as client:
        missing = await client.post("/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
        forged = await client.post(
            "/mcp",
            json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"},
            headers={"Authorization": "Bearer not.a.jwt"},
        )
        documents = [
            await client.get(path)
            for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource")
        ]
    metadata_url = "https://tools.example.com/.well-known/oauth-protected-resource/mcp"
    assert missing.status_code == 401
    assert missing.headers["www-authenticate"] == (
        f'Bearer resource_metadata="{metadata_url}", scope="tools:read tools:call"'
    )
    assert "access token is required" in missing.json()["error"]["message"]
    assert forged.status_code == 401 and 'error="invalid_token"' in forged.headers["www-authenticate"]
    assert "malformed" in forged.json()["error"]["message"]
    for document in documents:
        assert document.status_code == 200 and document.headers["access-control-allow-origin"] == "*"
        assert document.json() == {
            "resource": "https://tools.example.com/mcp",
            "authorization_servers": [ISSUER],
            "scopes_supported": ["tools:read", "tools:call", "tools:admin", "tools:federate"],
            "bearer_methods_supported": ["header"],
            "resource_name": "toolweave",
        }


def test_an_issuer_that_signs_with_a_shared_secret_is_refused_in_the_config() -> None:
    from pydantic import ValidationError

    from toolweave.config.auth import IssuerConfig

    for bad in (["none"], ["HS256"], []):
        with pytest.raises(ValidationError, match="public-key"):
            IssuerConfig(issuer=ISSUER, algorithms=bad)
    assert httpx  # the raw client is the SDK's, above
