"""`GET /healthz` and `GET /readyz`: unauthenticated probes for load balancers; `/metrics`' `instance` label."""

from __future__ import annotations

from pathlib import Path

import httpx

from support.api import AppFactory, database_url
from support.configs import http_backend, python_backend
from toolweave.config import parse_config
from toolweave.server.app import server_app


def _client(app: object) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, client=("10.0.0.9", 40000))  # not loopback: no operator
    return httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8080")


async def test_not_ready_until_the_runtime_has_started_then_ready_without_a_key(
    tmp_path: Path, api_env: None
) -> None:
    url, _ = database_url("sqlite", tmp_path)
    down = http_backend("down", "http://127.0.0.1:9/mcp")  # nothing listens: never connects
    raw = {
        "gateway": {"database": url, "instance": "replica-a"},
        "backends": [python_backend(), down],
    }
    cfg = parse_config(raw)
    assert cfg is not None
    app = server_app(cfg, require_auth=True)
    async with _client(app) as client:
        assert (await client.get("/healthz")).json() == {"status": "ok", "instance": "replica-a"}
        starting = await client.get("/readyz")
        assert starting.status_code == 503
        assert starting.json()["database"] == "starting" and starting.json()["ready"] is False
        assert "database" in starting.json()["reason"]
        runtime = app.state.runtime
        await runtime.start()
        try:
            ready = await client.get("/readyz")
            assert ready.status_code == 200, ready.text
            body = ready.json()
            assert body["ready"] is True and body["database"] == "open" and body["instance"] == "replica-a"
            # a backend that is down is listed, by name and status only, and does not fail readiness
            assert [b["name"] for b in body["backends_not_connected"]] == ["down"]
            assert set(body["backends_not_connected"][0]) == {"name", "status"}
            assert (await client.get("/api/v1/tools")).status_code == 401  # the probes alone are open
            assert ready.headers["cache-control"] == "no-store"
        finally:
            await runtime.close()
        assert (await client.get("/readyz")).status_code == 503  # shutting down: drained first
        assert (await client.get("/healthz")).status_code == 200


async def test_every_metrics_series_carries_the_instance_label(sqlite_app: AppFactory) -> None:
    api = await sqlite_app({"gateway": {"instance": "replica-b"}, "backends": [python_backend()]})
    async with api.client() as client:
        await client.post("/api/v1/tools/py__greet/call", json={"name": "a"})
        text = (await client.get("/metrics")).text
    series = [line for line in text.splitlines() if line and not line.startswith("#")]
    assert series and all('instance="replica-b"' in line for line in series), series[:5]
    assert 'toolweave_tool_calls_total{backend="py",instance="replica-b",kind="backend"' in text


async def test_the_default_instance_is_host_and_process(sqlite_app: AppFactory) -> None:
    import os
    import socket

    api = await sqlite_app({"backends": [python_backend()]})
    async with api.client() as client:
        body = (await client.get("/healthz")).json()
    assert body["instance"] == f"{socket.gethostname()}:{os.getpid()}"
