"""A gateway as an HTTP API backend of another: toolweave's own REST API through its own /openapi.json.

Two real processes: gateway A (`toolweave serve --auth`, a subprocess) and gateway B (in this process),
whose `openapi` backend is A's document, authenticated with one of A's API keys.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from support.configs import config, python_backend
from support.fixtures import OpenGateway
from support.paths import TOOLWEAVE
from support.processes import free_port, stop_process, subprocess_env, wait_for_port
from support.results import text

TOOLS = ["call_tool_*", "list_ai_tools_*", "invoke_*"]


@pytest.fixture(scope="module")
def gateway_a(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, str]]:
    """(base URL, an API key) of `toolweave serve --auth` serving tests/servers/tw_pytools.py."""
    tmp_path = tmp_path_factory.mktemp("gateway_a")
    cfg = tmp_path / "a.yaml"
    cfg.write_text(
        yaml.safe_dump(
            {"gateway": {"database": f"sqlite:///{tmp_path / 'a.db'}"}, "backends": [python_backend()]}
        )
    )
    env = subprocess_env(HOME=str(tmp_path / "home"), TOOLWEAVE_SECRET_KEY="a" * 44)
    created = subprocess.run(
        [str(TOOLWEAVE), "keys", "create", "--tenant", "team", "-c", str(cfg)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    key = created.stdout.strip().splitlines()[-1]
    port = free_port()
    process = subprocess.Popen(
        [str(TOOLWEAVE), "serve", "-c", str(cfg), "--port", str(port), "--auth"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process, timeout=60)
        yield f"http://127.0.0.1:{port}", key
    finally:
        stop_process(process)


def upstream(base: str, **extra: Any) -> dict[str, Any]:
    return {"name": "up", "openapi": f"{base}/openapi.json", "include": TOOLS, **extra}


async def test_a_gateway_calls_another_through_its_openapi_document(
    open_gateway: OpenGateway, gateway_a: tuple[str, str]
) -> None:
    base, key = gateway_a
    router = {
        "name": "ask",
        "description": "List the upstream gateway's tools, or greet locally.",
        "operations": [
            {"slug": "upstream", "tool": "up/list_ai_tools_api_v1_ai_tools_get"},
            {"slug": "local", "tool": "py/greet", "arguments": {"name": "B"}},
        ],
        "rules": [
            {"condition": {"type": "equals", "field": "where", "value": "upstream"}, "operation": "upstream"}
        ],
        "default_operation": "local",
        "input_schema": {"type": "object", "properties": {"where": {"type": "string"}}},
    }
    gw = await open_gateway(
        config(
            upstream(base, auth={"type": "bearer", "token": key}), python_backend(), composite_tools=[router]
        )
    )
    backend = gw.backends["up"]
    assert backend.status == "connected", backend.last_error
    names = {tool.name for tool in gw.list_tools()}
    assert {
        "up__call_tool_api_v1_tools_name_call_post",
        "up__invoke_api_v1_composite_tools_invoke_post",
    } <= names

    called = await gw.call(
        "up__call_tool_api_v1_tools_name_call_post", {"name": "py__greet", "body": {"name": "Ada"}}
    )
    assert not called.is_error, text(called)
    assert called.structured_content is not None
    assert called.structured_content["content"][0]["text"] == "Hello, Ada."  # A's CallToolResult, as JSON

    routed = await gw.call("ask", {"where": "upstream"})
    assert not routed.is_error, text(routed)
    assert routed.meta["toolweave"]["operation"] == "upstream"
    listed = {tool["name"] for tool in routed.structured_content["tools"]}
    assert "py__greet" in listed

    wrong = await gw.call("up__call_tool_api_v1_tools_name_call_post", {"name": "py__nope", "body": {}})
    assert wrong.is_error or wrong.structured_content.get("isError") is True


async def test_without_the_key_the_upstream_gateway_refuses(
    open_gateway: OpenGateway, gateway_a: tuple[str, str]
) -> None:
    base, key = gateway_a
    gw = await open_gateway(config(upstream(base)))
    refused = await gw.call(
        "up__call_tool_api_v1_tools_name_call_post", {"name": "py__greet", "body": {"name": "x"}}
    )
    assert refused.is_error and "HTTP 401" in text(refused)
    assert key not in text(refused)
