"""Two `toolweave serve` processes on one PostgreSQL and Redis: a client on gateway A serves calls made on B.

Registrations are visible on both gateways; a call to B is relayed to A, run by the client
connected there, and answered; when the client leaves, B's catalog loses the tools too.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import yaml

from support.api import POSTGRES_ENV, drop_schema
from support.federation import FAST_HEARTBEAT, kill_group, python_client
from support.paths import TOOLWEAVE
from support.processes import free_port, stop_process, subprocess_env, wait_for_port

REDIS_ENV = "TOOLWEAVE_TEST_REDIS_URL"
pytestmark = [pytest.mark.postgres, pytest.mark.redis]


@pytest.fixture
def shared_config(tmp_path: Path) -> Iterator[tuple[Path, dict[str, str]]]:
    postgres, redis = os.environ.get(POSTGRES_ENV), os.environ.get(REDIS_ENV)
    if not postgres or not redis:
        pytest.skip(f"set {POSTGRES_ENV} and {REDIS_ENV} to run gateways that share a database and Redis")
    schema = f"tw_fed_{uuid.uuid4().hex[:12]}"
    sep = "&" if "?" in postgres else "?"
    settings = {
        "gateway": {"database": f"{postgres}{sep}schema={schema}", "redis_url": redis},
        "federation": FAST_HEARTBEAT,
    }
    cfg = tmp_path / "toolweave.yaml"
    cfg.write_text(yaml.safe_dump(settings))
    env = subprocess_env(HOME=str(tmp_path / "home"), TOOLWEAVE_SECRET_KEY="f" * 44)
    try:
        yield cfg, env
    finally:
        asyncio.run(drop_schema(postgres, schema))


@contextlib.contextmanager
def serve(cfg: Path, env: dict[str, str]) -> Iterator[str]:
    port = free_port()
    process = subprocess.Popen(
        [str(TOOLWEAVE), "serve", "-c", str(cfg), "--port", str(port), "--auth"],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for_port(port, process, timeout=60)
        yield f"http://127.0.0.1:{port}"
    finally:
        stop_process(process)


def create_key(cfg: Path, env: dict[str, str], scopes: str) -> str:
    created = subprocess.run(
        [str(TOOLWEAVE), "keys", "create", "--tenant", "acme", "--scopes", scopes, "-c", str(cfg)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    return created.stdout.strip().splitlines()[-1]


async def listed(base: str, key: str) -> set[str]:
    async with httpx.AsyncClient(base_url=base, headers={"Authorization": f"Bearer {key}"}) as http:
        return {tool["name"] for tool in (await http.get("/api/v1/ai-tools")).json()["tools"]}


async def test_a_client_on_gateway_a_serves_a_call_made_on_gateway_b(shared_config) -> None:
    cfg, env = shared_config
    with serve(cfg, env) as gateway_a, serve(cfg, env) as gateway_b:
        client_key = create_key(cfg, env, "tools:federate")
        agent_key = create_key(cfg, env, "tools:read,tools:call")
        with python_client(gateway_a, client_key, "inv", WAREHOUSE="on-a") as client:
            await wait_until_listed(gateway_b, agent_key, "inv__stock")
            assert "inv__stock" in await listed(gateway_a, agent_key)
            async with httpx.AsyncClient(
                base_url=gateway_b, headers={"Authorization": f"Bearer {agent_key}"}, timeout=30
            ) as http:
                response = await http.post("/api/v1/tools/inv__stock/call", json={"sku": "ab"})
                secret = await http.post("/api/v1/tools/inv__secret_holder/call", json={})
            body = response.json()
            assert body.get("isError") is not True, body
            assert body["structuredContent"] == {"sku": "ab", "count": 14, "warehouse": "on-a"}
            assert secret.json()["content"][0]["text"] == "(none)"
            kill_group(client, signal.SIGKILL)
            await wait_until_listed(gateway_b, agent_key, "inv__stock", present=False)


async def wait_until_listed(base: str, key: str, name: str, present: bool = True) -> None:
    """Poll a gateway's listing (another process: no event to wait on)."""
    async with asyncio.timeout(30.0):
        while (name in await listed(base, key)) is not present:  # noqa: ASYNC110 - another process
            await asyncio.sleep(0.2)
