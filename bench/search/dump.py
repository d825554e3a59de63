"""Dump the tools of real MCP servers to `bench/search/catalog/<server>.json`.

Each server is installed from npm or PyPI into `bench/.search-servers/` (outside git), run as a
subprocess over stdio, asked `initialize` and every page of `tools/list`, and stopped. The dumps
are committed: the search evaluation replays them (`bench.search.replay`), so scoring needs no
network, no credentials and none of these servers. Re-run with `python -m bench.search.dump`
to refresh them; credentials are placeholders, since listing tools needs none that are valid.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

HERE = Path(__file__).resolve().parent
CATALOG_DIR = HERE / "catalog"
SERVERS_DIR = HERE.parent / ".search-servers"
NODE_BIN = SERVERS_DIR / "node_modules" / ".bin"
PY_BIN = SERVERS_DIR / "pyenv" / "bin"
AWS_DIR = SERVERS_DIR / "aws"
PROTOCOL = "2025-06-18"
TIMEOUT_S = 60.0


@dataclass
class ServerSpec:
    """One real MCP server: how to start it, with placeholder credentials."""

    name: str
    argv: list[str]
    env: dict[str, str] = field(default_factory=dict)


def _node(name: str, *args: str, **env: str) -> ServerSpec:
    return ServerSpec(name, [str(NODE_BIN / args[0]), *args[1:]], env)


def _py(name: str, *args: str, **env: str) -> ServerSpec:
    return ServerSpec(name, [str(PY_BIN / args[0]), *args[1:]], env)


SERVERS = [
    _node("github", "mcp-server-github", GITHUB_PERSONAL_ACCESS_TOKEN="ghp_placeholder"),
    _node("gitlab", "mcp-server-gitlab", GITLAB_PERSONAL_ACCESS_TOKEN="glpat-placeholder"),
    _node("slack", "mcp-server-slack", SLACK_BOT_TOKEN="xoxb-placeholder", SLACK_TEAM_ID="T000"),
    _node("filesystem", "mcp-server-filesystem", "/tmp"),
    _node("memory", "mcp-server-memory"),
    _node("google-maps", "mcp-server-google-maps", GOOGLE_MAPS_API_KEY="placeholder"),
    _node("puppeteer", "mcp-server-puppeteer"),
    _node("brave-search", "mcp-server-brave-search", BRAVE_API_KEY="placeholder"),
    _node("everything", "mcp-server-everything"),
    _node("postgres", "mcp-server-postgres", "postgresql://127.0.0.1:1/none"),
    _node("sequential-thinking", "mcp-server-sequential-thinking"),
    _node("notion", "notion-mcp-server", NOTION_TOKEN="ntn_placeholder"),
    _node(
        "azdo",
        "mcp-server-azuredevops",
        "placeholder-org",
        "--authentication",
        "envvar",
        ADO_MCP_AUTH_TOKEN="placeholder",
    ),
    _node("kubernetes", "mcp-server-kubernetes"),
    _node("hubspot", "mcp-hubspot", PRIVATE_APP_ACCESS_TOKEN="pat-placeholder"),
    _node("playwright", "playwright-mcp"),
    _node("context7", "context7-mcp"),
    _node("redis", "mcp-server-redis", "redis://127.0.0.1:1"),
    _node("stripe", "mcp", "--tools=all", "--api-key=sk_test_placeholder"),
    _node("sentry", "sentry-mcp", "--access-token=placeholder"),
    _node("supabase", "mcp-server-supabase", "--access-token=sbp_placeholder"),
    _node("airtable", "airtable-mcp-server", AIRTABLE_API_KEY="pat_placeholder"),
    _py("time", "mcp-server-time"),
    _py("fetch", "mcp-server-fetch"),
    _py("git", "mcp-server-git"),
    _py("sqlite", "mcp-server-sqlite", "--db-path", "/tmp/search-dump.db"),
    _py(
        "atlassian",
        "mcp-atlassian",
        JIRA_URL="https://example.atlassian.net",
        JIRA_USERNAME="a@example.com",
        JIRA_API_TOKEN="placeholder",
        CONFLUENCE_URL="https://example.atlassian.net/wiki",
        CONFLUENCE_USERNAME="a@example.com",
        CONFLUENCE_API_TOKEN="placeholder",
    ),
    _py("aws-location", "awslabs.aws-location-mcp-server", AWS_REGION="us-east-1"),
    _py(
        "aws-sns-sqs",
        "awslabs.amazon-sns-sqs-mcp-server",
        AWS_REGION="us-east-1",
        AWS_CONFIG_FILE=str(AWS_DIR / "config"),  # it reads the `default` profile at start
        AWS_SHARED_CREDENTIALS_FILE=str(AWS_DIR / "credentials"),
    ),
    _py("aws-pricing", "awslabs.aws-pricing-mcp-server", AWS_REGION="us-east-1"),
    _py("docker", "mcp-server-docker"),
]


class StdioPeer:
    """A minimal MCP client over a child's stdio: newline-delimited JSON-RPC, one request at a time."""

    def __init__(self, spec: ServerSpec) -> None:
        env = {**os.environ, **spec.env}
        self.process = subprocess.Popen(
            spec.argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env
        )
        self._next_id = 0
        self._buffer = b""

    def request(self, method: str, params: dict | None = None) -> dict:
        self._next_id += 1
        self._send({"jsonrpc": "2.0", "id": self._next_id, "method": method, "params": params or {}})
        deadline = time.monotonic() + TIMEOUT_S
        while True:
            message = self._read(deadline)
            if message.get("id") == self._next_id and "method" not in message:
                if "error" in message:
                    raise RuntimeError(f"{method}: {message['error']}")
                return message["result"]

    def notify(self, method: str) -> None:
        self._send({"jsonrpc": "2.0", "method": method})

    def close(self) -> None:
        self.process.kill()
        self.process.wait()

    def _send(self, message: dict) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(json.dumps(message).encode() + b"\n")
        self.process.stdin.flush()

    def _read(self, deadline: float) -> dict:
        assert self.process.stdout is not None
        fd = self.process.stdout.fileno()
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError("no answer")
            ready, _, _ = select.select([fd], [], [], remaining)
            if ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    raise RuntimeError(f"exited with {self.process.wait()}")
                self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        try:
            return json.loads(line)
        except ValueError:
            return {}  # a log line on stdout


def dump(spec: ServerSpec) -> dict:
    """The server's initialize answer and all its tools."""
    peer = StdioPeer(spec)
    try:
        init = peer.request(
            "initialize",
            {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": {"name": "dump", "version": "1"}},
        )
        peer.notify("notifications/initialized")
        tools: list[dict] = []
        cursor = None
        while True:
            page = peer.request("tools/list", {"cursor": cursor} if cursor else {})
            tools += page.get("tools", [])
            cursor = page.get("nextCursor")
            if not cursor:
                break
    finally:
        peer.close()
    return {
        "server": spec.name,
        "serverInfo": init.get("serverInfo", {}),
        "instructions": init.get("instructions"),
        "tools": tools,
    }


def main(names: list[str]) -> None:
    CATALOG_DIR.mkdir(exist_ok=True)
    AWS_DIR.mkdir(parents=True, exist_ok=True)  # a placeholder `default` profile
    (AWS_DIR / "config").write_text("[default]\nregion = us-east-1\n")
    (AWS_DIR / "credentials").write_text(
        "[default]\naws_access_key_id = AKIAPLACEHOLDER\naws_secret_access_key = placeholder\n"
    )
    for spec in SERVERS:
        if names and spec.name not in names:
            continue
        try:
            data = dump(spec)
        except Exception as error:  # noqa: BLE001 - one server failing must not stop the others
            print(f"{spec.name}: FAILED {error}")
            continue
        (CATALOG_DIR / f"{spec.name}.json").write_text(json.dumps(data, indent=1, ensure_ascii=False) + "\n")
        print(f"{spec.name}: {len(data['tools'])} tools")


if __name__ == "__main__":
    main(sys.argv[1:])
