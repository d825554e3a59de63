"""`toolweave serve --workers N`: N gateway processes on one port sharing MCP sessions over Redis
(any worker serves any session); refused without `gateway.redis_url`; the workers stop with `serve`;
a worker that dies is replaced."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import time
import uuid
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from support.configs import python_backend
from support.fixtures import WriteConfig
from support.paths import TOOLWEAVE
from support.processes import free_port, stop_process, subprocess_env, wait_for_port
from toolweave.cli import app

REDIS_ENV = "TOOLWEAVE_TEST_REDIS_URL"
HEADERS = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25"}


def test_workers_without_redis_are_refused_naming_the_setting(write_config: WriteConfig) -> None:
    path = write_config({"backends": [python_backend()]})
    result = CliRunner().invoke(app, ["serve", "-c", str(path), "--workers", "2"], catch_exceptions=False)
    assert result.exit_code == 2
    assert "--workers needs gateway.redis_url" in result.output


@pytest.mark.skipif(not os.environ.get(REDIS_ENV), reason=f"set {REDIS_ENV} (e.g. redis://127.0.0.1:6379/0)")
async def test_two_workers_share_one_port_and_every_session(
    write_config: WriteConfig, tmp_path: Path
) -> None:
    """Fresh connections reach both workers; a 2025-11-25 session opened on one is served on every
    connection, whichever worker takes it; stopping `serve` stops both."""
    path = write_config(
        {
            "gateway": {"database": f"sqlite:///{tmp_path / 'tw.db'}", "redis_url": os.environ[REDIS_ENV]},
            "backends": [python_backend()],
        }
    )
    port = free_port()
    process = _serve(path, port, tmp_path)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for_port(port, process, 90)
        instances: set[str] = set()
        async with asyncio.timeout(90):
            while len(instances) < 2:  # a new connection each time: the kernel spreads them
                with contextlib.suppress(httpx.HTTPError):
                    async with httpx.AsyncClient(base_url=base, timeout=10) as fresh:
                        answer = await fresh.get("/readyz")
                        if answer.status_code == 200 and not answer.json()["backends_not_connected"]:
                            instances.add(answer.json()["instance"])
                await asyncio.sleep(0.05)
        async with httpx.AsyncClient(base_url=base, timeout=30) as first:
            opened = await first.post(
                "/mcp",
                headers=HEADERS,
                json={
                    "jsonrpc": "2.0",
                    "id": 1,
                    "method": "initialize",
                    "params": {
                        "protocolVersion": "2025-11-25",
                        "capabilities": {},
                        "clientInfo": {"name": "workers", "version": "1"},
                    },
                },
            )
        assert opened.status_code == 200, opened.text
        session = {**HEADERS, "mcp-session-id": opened.headers["mcp-session-id"]}
        for index in range(12):  # 12 new connections: both workers serve the session (1 in 2^11 not)
            name = f"w{index}-{uuid.uuid4().hex[:4]}"
            async with httpx.AsyncClient(base_url=base, timeout=30) as fresh:
                call = await fresh.post(
                    "/mcp",
                    headers=session,
                    json={
                        "jsonrpc": "2.0",
                        "id": index + 2,
                        "method": "tools/call",
                        "params": {"name": "py__greet", "arguments": {"name": name}},
                    },
                )
            assert call.status_code == 200 and name in call.text, (index, call.status_code, call.text[:300])
    finally:
        stop_process(process)
    assert _all_gone([int(instance.rpartition(":")[2]) for instance in instances]), instances


@pytest.mark.skipif(not os.environ.get(REDIS_ENV), reason=f"set {REDIS_ENV} (e.g. redis://127.0.0.1:6379/0)")
async def test_a_killed_worker_is_replaced_and_serves(write_config: WriteConfig, tmp_path: Path) -> None:
    """`kill -9` of one worker: `serve` forks another in its place, and the port is served by two
    workers again (the new one answers on fresh connections); `serve` itself keeps running."""
    path = write_config(
        {
            "gateway": {"database": f"sqlite:///{tmp_path / 'tw.db'}", "redis_url": os.environ[REDIS_ENV]},
            "backends": [python_backend()],
        }
    )
    port = free_port()
    process = _serve(path, port, tmp_path)
    base = f"http://127.0.0.1:{port}"
    seen: set[int] = set()
    try:
        wait_for_port(port, process, 90)
        first = await _workers_seen(base, 2)
        victim = sorted(first)[0]
        os.kill(victim, 9)
        after = await _workers_seen(base, 2, excluding={victim})
        seen = first | after
        assert victim not in after and len(after) == 2, (first, after)
        assert process.poll() is None
    finally:
        stop_process(process)
    assert _all_gone(sorted(seen - {victim})), seen


async def _workers_seen(
    base: str, count: int, excluding: frozenset[int] | set[int] = frozenset()
) -> set[int]:
    """The pids of `count` ready workers answering fresh connections (not one of `excluding`)."""
    pids: set[int] = set()
    async with asyncio.timeout(120):
        while len(pids) < count:  # a new connection each time: the kernel spreads them
            with contextlib.suppress(httpx.HTTPError):
                async with httpx.AsyncClient(base_url=base, timeout=10) as fresh:
                    answer = await fresh.get("/readyz")
                    if answer.status_code == 200 and not answer.json()["backends_not_connected"]:
                        pid = int(answer.json()["instance"].rpartition(":")[2])
                        if pid not in excluding:
                            pids.add(pid)
            await asyncio.sleep(0.05)
    return pids


def _serve(path: Path, port: int, home: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [str(TOOLWEAVE), "serve", "-c", str(path), "--port", str(port), "--workers", "2"],
        env=subprocess_env(HOME=str(home)),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _all_gone(pids: list[int], timeout: float = 15) -> bool:
    deadline = time.monotonic() + timeout
    while any(_alive(pid) for pid in pids):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
