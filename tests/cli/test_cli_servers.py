"""Virtual servers from the CLI: `connect CLIENT --server NAME` writes the server's URL (or the stdio
command serving it), that command serves only the server's selection to a real MCP client, and
`export --server NAME` prints its tools under the names it gives them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp import Client, StdioServerParameters
from typer.testing import CliRunner

from support.configs import python_backend
from support.fixtures import WriteConfig
from support.paths import TOOLWEAVE
from support.processes import subprocess_env
from support.results import names, text
from toolweave.cli import app

runner = CliRunner()


def cli(*args: str) -> Any:
    return runner.invoke(app, list(args), catch_exceptions=False)


@pytest.fixture
def config_path(write_config: WriteConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.chdir(tmp_path)
    return write_config(
        {
            "gateway": {"database": f"sqlite:///{tmp_path / 'tw.db'}"},
            "backends": [python_backend()],
            "servers": [
                {
                    "name": "support",
                    "instructions": "Greet customers.",
                    "tools": ["py__greet"],
                    "overrides": {"py__greet": {"name": "hello"}},
                }
            ],
        }
    )


def test_connect_writes_the_servers_url_or_its_stdio_command(config_path: Path, tmp_path: Path) -> None:
    done = cli("connect", "vscode", "--http", "http://127.0.0.1:8080/mcp", "--server", "support")
    assert done.exit_code == 0, done.output
    written = json.loads((tmp_path / ".vscode" / "mcp.json").read_text())
    assert written["servers"]["toolweave-support"] == {
        "type": "http",
        "url": "http://127.0.0.1:8080/servers/support/mcp",
    }
    done = cli("connect", "cursor", "-c", str(config_path), "--server", "support")
    assert done.exit_code == 0, done.output
    entry = json.loads((tmp_path / ".cursor" / "mcp.json").read_text())["mcpServers"]["toolweave-support"]
    assert entry["args"] == ["serve", "--stdio", "-c", str(config_path.resolve()), "--server", "support"]
    unknown = cli("connect", "cursor", "-c", str(config_path), "--server", "nope")
    assert unknown.exit_code == 1 and "no virtual server 'nope'" in unknown.output


async def test_the_stdio_command_serves_only_the_server(config_path: Path) -> None:
    params = StdioServerParameters(
        command=str(TOOLWEAVE),
        args=["serve", "--stdio", "-c", str(config_path), "--server", "support"],
        env=subprocess_env(),
    )
    async with Client(params) as client:
        assert client.server_info is not None and client.server_info.name == "support"
        assert client.instructions == "Greet customers."
        assert names((await client.list_tools()).tools) == ["hello"]
        assert text(await client.call_tool("hello", {"name": "Ada"})) == "Hello, Ada."


def test_export_prints_the_servers_tools(config_path: Path) -> None:
    done = cli("export", "--server", "support", "-f", "anthropic", "-c", str(config_path), "--local")
    assert done.exit_code == 0, done.output
    exported = json.loads(done.stdout)
    assert [tool["name"] for tool in exported] == ["hello"]
    missing = cli("export", "--server", "nope", "-c", str(config_path), "--local")
    assert missing.exit_code == 1 and "no virtual server 'nope'" in missing.output


def test_validate_names_what_a_server_selects_nothing_by(write_config: WriteConfig) -> None:
    path = write_config(
        {
            "backends": [python_backend()],
            "composite_tools": [{"name": "both", "tools": ["py/greet", "py/multiply"]}],
            "servers": [{"name": "odd", "tools": ["nope_*", "both"]}],
        }
    )
    done = cli("validate", "-c", str(path))
    assert done.exit_code == 1
    assert "servers[0].tools[0]: 'nope_*' matches no listed tool" in done.output
    assert "servers[0].tools: composite 'both' calls py__greet, py__multiply" in done.output
