"""Measurement peers: FastMCP 4.1.0 `create_proxy` and IBM ContextForge 1.0.7.

Each is installed (idempotently, once) into its own virtual environment under
`bench/.peers/` and started as a proxy in front of a bench backend. They are never
dependencies of toolweave: nothing in the project imports them.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import httpx2

from bench.procs import BENCH_DIR, LOOPBACK, Managed, ProcessGroup, StartError, free_port, wait_port

PEERS_DIR = BENCH_DIR / ".peers"
FASTMCP_SPEC = "fastmcp==4.1.0"
CONTEXTFORGE_SPEC = "mcp-contextforge-gateway==1.0.7"
INSTALL_TIMEOUT_S = 900.0

FASTMCP_PROXY_SCRIPT = '''\
"""FastMCP create_proxy in front of one MCP URL, served over streamable HTTP (bench peer)."""
import asyncio
import sys

from fastmcp.server import create_proxy


async def main(backend_url: str, port: int) -> None:
    proxy = create_proxy(backend_url, name="bench-fastmcp-proxy")
    await proxy.run_http_async(
        show_banner=False, transport="http", host="127.0.0.1", port=port, log_level="warning"
    )


asyncio.run(main(sys.argv[1], int(sys.argv[2])))
'''


@dataclass
class PeerEnv:
    """One peer's virtual environment and the package spec it holds."""

    name: str
    spec: str

    @property
    def root(self) -> Path:
        return PEERS_DIR / self.name

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    @property
    def marker(self) -> Path:
        return self.root / ".installed"

    def installed(self) -> bool:
        return self.marker.exists() and self.marker.read_text().strip() == self.spec and self.python.exists()


FASTMCP = PeerEnv("fastmcp", FASTMCP_SPEC)
CONTEXTFORGE = PeerEnv("contextforge", CONTEXTFORGE_SPEC)


def _run(argv: list[str], timeout: float) -> None:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise StartError(
            f"{' '.join(argv)} failed ({done.returncode}):\n{(done.stdout + done.stderr)[-3000:]}"
        )


def ensure_installed(peer: PeerEnv) -> Path:
    """Create the peer's venv and install its pinned package unless already done; return its python."""
    if peer.installed():
        return peer.python
    PEERS_DIR.mkdir(parents=True, exist_ok=True)
    if not peer.python.exists():
        _run([sys.executable, "-m", "venv", str(peer.root)], timeout=120)
    _run(
        [str(peer.python), "-m", "pip", "install", "-q", "--disable-pip-version-check", peer.spec],
        INSTALL_TIMEOUT_S,
    )
    peer.marker.write_text(peer.spec + "\n")
    return peer.python


# ---------------------------------------------------------------- FastMCP


def start_fastmcp_proxy(group: ProcessGroup, backend_url: str, timeout: float = 60.0) -> Managed:
    """Start FastMCP's `create_proxy(backend_url)` over streamable HTTP; its URL is on `.url`."""
    python = ensure_installed(FASTMCP)
    script = PEERS_DIR / "fastmcp_proxy.py"
    script.write_text(FASTMCP_PROXY_SCRIPT)
    port = free_port()
    managed = group.start("fastmcp-proxy", [str(python), str(script), backend_url, str(port)])
    wait_port(managed, port, timeout)
    managed.url = f"http://{LOOPBACK}:{port}/mcp"
    return managed


# ---------------------------------------------------------------- ContextForge

CF_ADMIN_EMAIL = "admin@example.com"


def _contextforge_env(workdir: Path, port: int, jwt_secret: str, admin_password: str) -> dict[str, str]:
    """Environment for a loopback-only ContextForge run with auth on and limits off."""
    return {
        "HOST": LOOPBACK,
        "PORT": str(port),
        "ENVIRONMENT": "development",
        "DATABASE_URL": f"sqlite:///{workdir / 'mcp.db'}",
        "CACHE_TYPE": "memory",
        "JWT_SECRET_KEY": jwt_secret,
        "AUTH_ENCRYPTION_SECRET": secrets.token_urlsafe(32),
        "BASIC_AUTH_PASSWORD": secrets.token_urlsafe(16),
        "PLATFORM_ADMIN_EMAIL": CF_ADMIN_EMAIL,
        "PLATFORM_ADMIN_PASSWORD": admin_password,
        "AUTH_REQUIRED": "true",
        "MCPGATEWAY_UI_ENABLED": "false",
        "MCPGATEWAY_ADMIN_API_ENABLED": "true",
        "RATE_LIMITING_ENABLED": "false",
        "RATE_LIMIT_LOCKOUT_ENABLED": "false",
        "SSRF_ALLOW_LOCALHOST": "true",
        "SSRF_ALLOW_PRIVATE_NETWORKS": "true",
        "LOG_LEVEL": "WARNING",
        "OBSERVABILITY_ENABLED": "false",
        "PLUGINS_ENABLED": "false",
        "MCPGATEWAY_A2A_ENABLED": "false",
        "WEBHOOK_ENABLED": "false",
        "REDIS_URL": "",
    }


def _contextforge_token(python: Path, env: dict[str, str]) -> str:
    """A short-lived admin JWT minted with the CLI ContextForge ships for that purpose."""
    argv = [
        str(python),
        "-m",
        "mcpgateway.utils.create_jwt_token",
        "--username",
        CF_ADMIN_EMAIL,
        "--exp",
        "120",
        "--secret",
        env["JWT_SECRET_KEY"],
    ]
    done = subprocess.run(
        argv, capture_output=True, text=True, timeout=120, env={**os.environ, **env}, check=False
    )
    if done.returncode != 0:
        raise StartError(f"minting a ContextForge token failed:\n{(done.stdout + done.stderr)[-2000:]}")
    return done.stdout.strip().splitlines()[-1].strip()


@dataclass
class ContextForgeRun:
    """A running ContextForge with the bench backend registered behind it."""

    managed: Managed
    base_url: str
    mcp_url: str
    token: str
    tool_name: str

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}


def _wait_health(managed: Managed, base_url: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    with httpx2.Client(timeout=2.0) as client:
        while time.monotonic() < deadline:
            if not managed.alive():
                raise StartError(
                    f"ContextForge exited with {managed.proc.returncode}:\n{managed.log_tail(4000)}"
                )
            try:
                if client.get(f"{base_url}/health").status_code == 200:
                    return
            except httpx2.HTTPError:
                pass
            time.sleep(0.3)
    raise StartError(f"ContextForge not healthy within {timeout:.0f}s:\n{managed.log_tail(4000)}")


def _register_backend(base_url: str, token: str, backend_url: str) -> None:
    """Register the bench backend as a ContextForge gateway (federated MCP server)."""
    body = {
        "name": "bench",
        "url": backend_url,
        "transport": "STREAMABLEHTTP",
        "description": "bench backend",
    }
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    with httpx2.Client(timeout=60.0) as client:
        response = client.post(f"{base_url}/gateways", content=json.dumps(body), headers=headers)
    if response.status_code >= 300:
        raise StartError(
            f"registering the backend with ContextForge failed: {response.status_code} {response.text}"
        )


def _wait_tool(base_url: str, token: str, suffix: str, timeout: float) -> str:
    """Wait until ContextForge lists a tool whose name ends with `suffix`; return its MCP name."""
    headers = {"Authorization": f"Bearer {token}"}
    deadline = time.monotonic() + timeout
    names: list[str] = []
    with httpx2.Client(timeout=10.0) as client:
        while time.monotonic() < deadline:
            response = client.get(f"{base_url}/tools", headers=headers)
            if response.status_code == 200:
                payload = response.json()
                items = (
                    payload if isinstance(payload, list) else payload.get("items", payload.get("tools", []))
                )
                names = [str(t.get("name")) for t in items]
                match = [n for n in names if n == suffix or n.endswith(suffix)]
                if match:
                    return match[0]
            time.sleep(0.5)
    raise StartError(f"ContextForge never listed a tool ending in {suffix!r} (saw {names[:10]})")


def start_contextforge(group: ProcessGroup, backend_url: str, timeout: float = 180.0) -> ContextForgeRun:
    """Start ContextForge on loopback, register `backend_url`, return how to reach its MCP endpoint."""
    python = ensure_installed(CONTEXTFORGE)
    workdir = CONTEXTFORGE.root / "run"
    workdir.mkdir(parents=True, exist_ok=True)
    (workdir / "mcp.db").unlink(missing_ok=True)
    port = free_port()
    env = _contextforge_env(workdir, port, secrets.token_urlsafe(48), secrets.token_urlsafe(16) + "Aa1!")
    argv = [str(python.parent / "mcpgateway"), "--host", LOOPBACK, "--port", str(port)]
    managed = group.start("contextforge", argv, env=env, cwd=workdir)
    base_url = f"http://{LOOPBACK}:{port}"
    wait_port(managed, port, timeout)
    _wait_health(managed, base_url, timeout)
    token = _contextforge_token(python, env)
    _register_backend(base_url, token, backend_url)
    tool = _wait_tool(base_url, token, "echo", 60.0)
    managed.url = f"{base_url}/mcp"
    return ContextForgeRun(managed, base_url, f"{base_url}/mcp/", token, tool)
