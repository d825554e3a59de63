"""The MCP front over stdio: `toolweave serve --stdio -c CONFIG` as a subprocess, on both protocol revisions."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import mcp_types as types
import pytest
from mcp import Client, StdioServerParameters

from support.configs import python_backend, stdio_backend
from support.fixtures import WriteConfig
from support.paths import TOOLWEAVE
from support.processes import subprocess_env
from support.results import names, text

MODES = [
    pytest.param("auto", "2026-07-28", id="2026-07-28"),
    pytest.param("legacy", "2025-11-25", id="2025-11-25"),
]


@pytest.fixture
def config_path(write_config: WriteConfig, tmp_path: Path) -> Path:
    return write_config(
        {
            "backends": [
                stdio_backend(),
                python_backend(),
                {"name": "down", "command": str(tmp_path / "missing-binary")},
            ]
        }
    )


def server(config_path: Path) -> StdioServerParameters:
    return StdioServerParameters(
        command=str(TOOLWEAVE), args=["serve", "--stdio", "-c", str(config_path)], env=subprocess_env()
    )


@pytest.mark.parametrize(("mode", "version"), MODES)
async def test_stdio_front(config_path: Path, mode: str, version: str) -> None:
    async with Client(server(config_path), mode=mode) as client:
        assert client.protocol_version == version
        listed = names((await client.list_tools()).tools)
        assert {"ts__echo", "py__greet"} <= set(listed)
        assert text(await client.call_tool("ts__echo", {"text": "through two pipes"})) == "through two pipes"
        assert text(await client.call_tool("py__greet", {"name": "stdio"})) == "Hello, stdio."
        unknown = await client.call_tool("nope", {})
        assert unknown.is_error and "unknown tool 'nope'" in text(unknown)
        down = await client.call_tool("down__x", {})
        assert down.is_error and "backend 'down' is not connected" in text(down)
        invalid = await client.call_tool("ts__add", {"a": [], "b": 1})
        assert invalid.is_error and "argument 'a'" in text(invalid)
        prompt = await client.get_prompt("ts__greet", {"name": "Lin"})
        assert prompt.messages[0].content.text == "Say hello to Lin, from testserver."


async def test_stdio_front_announces_list_changes(config_path: Path) -> None:
    received = asyncio.Event()

    async def on_message(message: Any) -> None:
        if isinstance(getattr(message, "root", message), types.ToolListChangedNotification):
            received.set()

    async with Client(server(config_path), mode="legacy", message_handler=on_message) as client:
        await client.list_tools()
        await client.call_tool("ts__add_tool", {"name": "over_stdio"})
        async with asyncio.timeout(10):
            await received.wait()
        assert "ts__over_stdio" in names((await client.list_tools()).tools)


async def test_a_bad_config_ends_serve_with_the_problems(write_config: WriteConfig) -> None:
    path = write_config({"backends": [{"name": "Bad", "command": "x"}]})
    process = await asyncio.create_subprocess_exec(
        str(TOOLWEAVE),
        "serve",
        "--stdio",
        "-c",
        str(path),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=subprocess_env(),
    )
    stdout, stderr = await asyncio.wait_for(process.communicate(), 30)
    assert process.returncode == 1 and stdout == b""  # nothing on the protocol stream
    assert "backends[0].name: backend name 'Bad' must match" in stderr.decode()
