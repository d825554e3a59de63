"""`toolweave init` from an MCP client's configuration, `toolweave connect CLIENT`, and an `mcpServers`
file read directly as a config: with a real Claude-Desktop-style file of several servers, served."""

from __future__ import annotations

import asyncio
import contextlib
import json
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from mcp import Client

from support.configs import stdio_backend
from support.paths import TOOLWEAVE
from support.processes import free_port, stop_process, subprocess_env, wait_for_port
from support.results import text
from toolweave.config.loader import load_config
from toolweave.config.mcp_servers import loads_jsonc

EVERYTHING = "@modelcontextprotocol/server-everything"
NPM_CACHE = str(Path.home() / ".npm")
"""The npm cache of the user running the tests (the tests move HOME): a server fetched once is reused."""
TIME_SERVER = shutil.which("mcp-server-time", path=str(TOOLWEAVE.parent))
DEMO_SERVER = shutil.which("toolweave-demo-server", path=str(TOOLWEAVE.parent))


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / ".config"))
    monkeypatch.chdir(tmp_path)
    return home


def npm_server_missing() -> str | None:
    """Why the npm reference server cannot run here (None: fetched into the npm cache, once, and runs)."""
    npx = shutil.which("npx")
    if npx is None:
        return "npx (Node.js) is not installed"
    try:
        done = subprocess.run(
            [npx, "-y", EVERYTHING, "stdio"],
            input="",
            capture_output=True,
            text=True,
            timeout=240,
            env=subprocess_env(npm_config_cache=NPM_CACHE),
        )
    except subprocess.TimeoutExpired:
        return f"npx -y {EVERYTHING} did not start within 240 s (no npm registry?)"
    if "server" in done.stderr.lower() and done.returncode in (0, 1):
        return None
    return f"npx -y {EVERYTHING} failed: {done.stderr.strip()[-300:]}"


def claude_desktop_config(home: Path, npm: bool = False) -> Path:
    """Where Claude Desktop keeps its servers on Linux, with the kinds of entries people have."""
    if TIME_SERVER is None or DEMO_SERVER is None:
        pytest.skip("mcp-server-time (PyPI) and toolweave-demo-server are installed by the test extra")
    test_server = stdio_backend()
    path = home / ".config" / "Claude" / "claude_desktop_config.json"
    path.parent.mkdir(parents=True)
    path.write_text(
        """{
  // Claude Desktop's own settings sit beside the servers
  "globalShortcut": "Ctrl+Space",
  "mcpServers": {
    "time": {"command": "$time", "args": ["--local-timezone", "UTC"]},
    "Demo Docs": {"command": "$demo"},
    "test server": {"command": "$python", "args": ["$script"], "env": {"TESTSERVER_NAME": "from-claude"}},
    "old-sse": {"type": "sse", "url": "http://127.0.0.1:9/sse"},$npm
  },
}
""".replace("$time", TIME_SERVER)
        .replace("$demo", DEMO_SERVER)
        .replace("$python", test_server["command"])
        .replace("$script", test_server["args"][0])
        .replace("$npm", NPM_ENTRY.replace("$cache", NPM_CACHE) if npm else "")
    )
    return path


NPM_ENTRY = f"""
    "everything": {{"command": "npx", "args": ["-y", "{EVERYTHING}"], "env": {{"npm_config_cache": "$cache"}}}},"""


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(TOOLWEAVE), *args], capture_output=True, text=True, timeout=120, env=subprocess_env()
    )


def wait_until_connected(port: int, process: subprocess.Popen[bytes], timeout: float = 120) -> None:
    """`serve` listens before its backends are up; the listing is compared once every one is."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, "serve exited"
        with contextlib.suppress(OSError, ValueError):
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/api/v1/backends", timeout=5) as answer:
                backends = json.loads(answer.read())["backends"]
            if backends and all(backend["status"] == "connected" for backend in backends):
                return
        time.sleep(0.1)
    raise TimeoutError(f"the backends did not all connect within {timeout}s")


@contextlib.contextmanager
def serving(config: str) -> Iterator[int]:
    port = free_port()
    process = subprocess.Popen(
        [str(TOOLWEAVE), "serve", "-c", config, "--port", str(port)],
        env=subprocess_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process, 60)
        wait_until_connected(port, process)
        yield port
    finally:
        stop_process(process)


async def test_init_imports_a_claude_desktop_config_and_serves_its_servers(
    home: Path, tmp_path: Path
) -> None:
    """A PyPI server, the demo's, the test server and, where npx can run it, an npm server (started by
    npx as Claude Desktop would): one gateway serves them all, as each start costs seconds."""
    missing = await asyncio.to_thread(npm_server_missing)
    claude_desktop_config(home, npm=missing is None)
    done = run("init", "claude-desktop", "-o", "toolweave.toml")
    assert done.returncode == 0, done.stderr
    assert "skipped mcpServers.old-sse: the legacy SSE transport is not supported" in done.stderr.replace(
        "\n", " "
    )
    cfg = load_config(tmp_path / "toolweave.toml")
    npm = ["everything"] if missing is None else []
    assert [b.name for b in cfg.backends] == ["time", "demo-docs", "test-server", *npm]
    assert cfg.backends[2].env == {"TESTSERVER_NAME": "from-claude"}
    again = run("init", "claude-desktop", "-o", "toolweave.toml")
    assert again.returncode == 1 and "--force" in again.stderr

    with serving("toolweave.toml") as port:
        async with Client(f"http://127.0.0.1:{port}/mcp") as client:
            clock = await client.call_tool("time__get_current_time", {"timezone": "UTC"})
            assert not clock.is_error and "UTC" in text(clock)  # a PyPI server
            echoed = await client.call_tool("test-server__echo", {"text": "imported"})
            assert text(echoed) == "imported"
            names = {tool.name for tool in (await client.list_tools()).tools}
            assert "demo-docs__search" in names
            if missing is None:
                echoed = await client.call_tool("everything__echo", {"message": "from npm"})
                assert not echoed.is_error and "from npm" in text(echoed), text(echoed)
    if missing is not None:
        pytest.skip(f"all but the npm server passed; it cannot run here: {missing}")


def test_an_mcp_servers_file_is_read_as_a_config(home: Path) -> None:
    path = claude_desktop_config(home)
    done = run("validate", "--offline", "-c", str(path))
    assert done.returncode == 1  # the SSE server is a problem, said with its path
    assert "mcpServers.old-sse: the legacy SSE transport is not supported" in done.stderr.replace("\n", " ")
    document = loads_jsonc(path.read_text())
    del document["mcpServers"]["old-sse"]
    clean = path.with_name("clean.json")
    clean.write_text(json.dumps(document))
    cfg = load_config(clean)
    assert {b.name for b in cfg.backends} == {"time", "demo-docs", "test-server"}


def test_connect_adds_the_gateway_to_a_client_keeping_a_copy(home: Path, tmp_path: Path) -> None:
    path = claude_desktop_config(home)
    before = path.read_text()
    config = tmp_path / "gw.toml"
    config.write_text('[[backends]]\nname = "py"\npython = "tw_pytools"\n')
    done = run("connect", "claude-desktop", "-c", str(config))
    assert done.returncode == 0, done.stderr
    document = json.loads(path.read_text())
    entry = document["mcpServers"]["toolweave"]
    assert entry["args"] == ["serve", "--stdio", "-c", str(config.resolve())]
    assert Path(entry["command"]).name == "toolweave"
    assert document["globalShortcut"] == "Ctrl+Space" and "time" in document["mcpServers"]
    [backup] = path.parent.glob("claude_desktop_config.json.*.bak")
    assert backup.read_text() == before

    vscode = run("connect", "vscode", "--http", "http://127.0.0.1:8080/mcp", "--key", "tw_secret")
    assert vscode.returncode == 0, vscode.stderr
    written = json.loads((tmp_path / ".vscode" / "mcp.json").read_text())
    assert written["servers"]["toolweave"] == {
        "type": "http",
        "url": "http://127.0.0.1:8080/mcp",
        "headers": {"Authorization": "Bearer tw_secret"},
    }
    unknown = run("connect", "notepad")
    assert unknown.returncode == 2 and "claude-desktop" in unknown.stderr


def test_jsonc_comments_and_trailing_commas() -> None:
    text = '{"a": "// not a comment", /* gone */ "b": [1, 2,], // gone\n "c": "x,]",}'
    assert loads_jsonc(text) == {"a": "// not a comment", "b": [1, 2], "c": "x,]"}
