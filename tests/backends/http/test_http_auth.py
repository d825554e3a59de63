"""Credentials from the config against a real API: API key (header, query, cookie), bearer, basic, OAuth2."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path
from typing import Any

import httpx2
import pytest

from support.configs import config, openapi_backend
from support.fixtures import OpenGateway
from support.results import text
from toolweave.backends.http.backend import HttpApiBackend
from toolweave.config import ConfigError, parse_config

API_KEY = "k-123456789"
BEARER = "b-abcdefgh"
CLIENT = ("client-1", "client-secret-1")


async def secure_call(
    open_gateway: OpenGateway, api_url: str, tool: str, auth: dict[str, Any], **extra: Any
) -> Any:
    gw = await open_gateway(
        config(openapi_backend("api", api_url, include=["tag:auth", "publicPing"], auth=auth, **extra))
    )
    assert gw.backends["api"].status == "connected", gw.backends["api"].last_error
    return gw, await gw.call(f"api__{tool}", {})


@pytest.mark.parametrize(
    ("tool", "auth"),
    [
        ("secureHeader", {"type": "api_key", "value": API_KEY}),  # name and `in` from the document's scheme
        ("secureQuery", {"type": "api_key", "scheme": "ApiKeyQuery", "value": API_KEY}),
        ("secureCookie", {"type": "api_key", "name": "session_key", "in": "cookie", "value": API_KEY}),
        ("secureBearer", {"type": "bearer", "token": BEARER}),
        ("secureBasic", {"type": "basic", "username": "alice", "password": "s3cret-pw"}),
        (
            "secureOauth",
            {"type": "oauth2", "client_id": CLIENT[0], "client_secret": CLIENT[1], "scopes": ["pets:read"]},
        ),
    ],
)
async def test_each_kind_of_credential_reaches_the_api(
    open_gateway: OpenGateway, api_url: str, tool: str, auth: dict[str, Any]
) -> None:
    if tool == "secureHeader":
        auth = {**auth, "scheme": "ApiKeyHeader"}
    _, result = await secure_call(open_gateway, api_url, tool, auth)
    assert not result.is_error, text(result)
    assert result.structured_content is not None and result.structured_content["ok"] is True


async def test_wrong_credentials_are_a_401_and_the_echoed_key_is_scrubbed(
    open_gateway: OpenGateway, api_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    wrong = "wrong-key-55555"
    gw, result = await secure_call(
        open_gateway, api_url, "secureHeader", {"type": "api_key", "scheme": "ApiKeyHeader", "value": wrong}
    )
    assert result.is_error and "HTTP 401" in text(result) and "credentials" in text(result)
    assert wrong not in text(result) and "[redacted]" in text(result)  # the API echoed it back
    assert all(wrong not in record.getMessage() for record in caplog.records)
    assert wrong not in repr(gw.config) and wrong not in gw.config.model_dump_json()
    assert wrong not in repr(gw.export("mcp"))


async def test_the_api_key_parameter_is_not_an_argument_when_the_gateway_sends_it(
    open_gateway: OpenGateway, api_url: str
) -> None:
    gw, _ = await secure_call(
        open_gateway, api_url, "secureHeader", {"type": "api_key", "scheme": "ApiKeyHeader", "value": API_KEY}
    )
    tool = gw.catalog.get("api__secureHeader").tool
    assert "X-API-Key" not in tool.input_schema["properties"]
    plain = await open_gateway(config(openapi_backend("plain", api_url, include=["secureHeader"])))
    assert "X-API-Key" in plain.catalog.get("plain__secureHeader").tool.input_schema["properties"]


async def test_a_public_operation_gets_no_credential(open_gateway: OpenGateway, api_url: str) -> None:
    _, result = await secure_call(open_gateway, api_url, "publicPing", {"type": "bearer", "token": BEARER})
    assert not result.is_error
    assert "authorization" not in result.structured_content["headers"]


async def test_a_missing_credential_says_how_to_give_one_and_calls_nothing(
    open_gateway: OpenGateway, api_url: str
) -> None:
    gw, result = await secure_call(open_gateway, api_url, "secureBearer", {"type": "bearer"})
    assert result.is_error
    message = text(result)
    assert (
        "needs token" in message
        and "PUT /api/v1/connections/api" in message
        and "Nothing was called" in message
    )
    async with httpx2.AsyncClient() as client:
        before = (await client.get(f"{api_url}/stats")).json().get("secure:bearer", 0)
        await gw.call("api__secureBearer", {})
        after = (await client.get(f"{api_url}/stats")).json().get("secure:bearer", 0)
    assert before == after


async def test_oauth2_tokens_are_cached_refreshed_before_expiry_and_after_a_401(
    open_gateway: OpenGateway, api_url: str
) -> None:
    auth = {"type": "oauth2", "client_id": CLIENT[0], "client_secret": CLIENT[1]}
    gw, first = await secure_call(open_gateway, api_url, "secureOauth", auth)
    backend = gw.backends["api"]
    assert isinstance(backend, HttpApiBackend)
    assert not first.is_error and backend.tokens.fetches == 1
    together = await asyncio.gather(*(gw.call("api__secureOauth", {}) for _ in range(10)))
    assert not any(r.is_error for r in together)
    assert backend.tokens.fetches == 1  # cached, one fetch however many calls
    await asyncio.sleep(2.0)  # the test API's tokens live 2 s
    assert not (await gw.call("api__secureOauth", {})).is_error
    assert backend.tokens.fetches == 2  # fetched again when it expired
    async with httpx2.AsyncClient() as client:
        await client.post(f"{api_url}/oauth/revoke")  # the API forgets every token: the next call gets a 401
    again = await gw.call("api__secureOauth", {})
    assert not again.is_error, text(again)
    assert backend.tokens.fetches == 3


async def test_oauth2_refused_client_credentials_are_a_clear_error(
    open_gateway: OpenGateway, api_url: str
) -> None:
    auth = {"type": "oauth2", "client_id": CLIENT[0], "client_secret": "not-the-secret-42"}
    _, result = await secure_call(open_gateway, api_url, "secureOauth", auth)
    assert result.is_error and "refused the client credentials" in text(result)
    assert "not-the-secret-42" not in text(result)


def test_auth_config_problems_are_reported_at_load() -> None:
    with pytest.raises(ConfigError) as error:
        parse_config(
            {
                "backends": [
                    {"name": "a", "openapi": "x.yaml", "auth": {"type": "bearer", "value": "x"}},
                    {"name": "b", "openapi": "x.yaml", "auth": {"type": "oauth2", "token_url": "ftp://x"}},
                    {"name": "c", "url": "http://x/mcp", "auth": {"type": "bearer", "token": "t"}},
                ]
            }
        )
    message = str(error.value)
    assert "backends[0].auth: auth type 'bearer' does not use value" in message
    assert "token_url must start with http" in message
    assert "'auth' needs 'openapi' or 'http'" in message


async def test_auth_that_the_document_cannot_complete_fails_the_backend(
    open_gateway: OpenGateway, api_url: str
) -> None:
    gw = await open_gateway(config(openapi_backend("api", api_url, auth={"type": "api_key", "value": "x"})))
    backend = gw.backends["api"]
    assert backend.status == "failed"  # the document has three apiKey schemes: which one is ambiguous
    assert "needs 'name' and 'in'" in (backend.last_error or "")
    unknown = await open_gateway(
        config(openapi_backend("u", api_url, auth={"type": "api_key", "scheme": "Nope", "value": "x"}))
    )
    assert "'Nope' is not in the document's security schemes" in (unknown.backends["u"].last_error or "")


KEYED_DOCUMENT = """
openapi: 3.0.3
info: {title: keyed, version: "1"}
paths:
  /secure/apikey-header:
    get:
      operationId: secureHeader
      parameters:
        - {name: x-api-key, in: header, required: true, schema: {type: string}}
        - {name: X-Trace, in: header, required: true, schema: {type: string}}
        - {name: verbose, in: query, schema: {type: boolean}}
      responses:
        "200": {description: ok}
"""


@pytest.mark.parametrize(
    "supplies",
    [
        pytest.param(
            {"auth": {"type": "api_key", "name": "X-API-Key", "in": "header", "value": API_KEY}}, id="auth"
        ),
        pytest.param({"headers": {"X-Api-KEY": API_KEY}}, id="headers"),
    ],
)
async def test_a_header_the_config_supplies_is_no_argument_whatever_its_case(
    open_gateway: OpenGateway, api_url: str, tmp_path: Path, supplies: dict[str, Any]
) -> None:
    """The document says `x-api-key` (required), the config `X-API-Key`: header names are
    case-insensitive, so the agent is not asked for it and the call carries the config's value."""
    document = tmp_path / "keyed.yaml"
    document.write_text(KEYED_DOCUMENT)
    backend = {"name": "keyed", "openapi": str(document), "base_url": api_url, "headers": {"X-Trace": "t-1"}}
    supplied = {**backend, **supplies, "headers": {**backend["headers"], **supplies.get("headers", {})}}
    gw = await open_gateway(config(supplied))
    assert gw.backends["keyed"].status == "connected", gw.backends["keyed"].last_error
    schema = gw.catalog.get("keyed__secureHeader").tool.input_schema
    assert set(schema["properties"]) == {"verbose"} and not schema.get("required"), schema
    result = await gw.call("keyed__secureHeader", {})
    assert not result.is_error, text(result)
