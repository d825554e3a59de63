"""I (an HTTP API behind toolweave): `GET /pets/{id}` made directly with an HTTP client vs through
toolweave's OpenAPI backend, side by side; the CPU each side spends per call; and the conversion time of
GitHub's REST description. No target was set for this scenario: it reports.

The direct side is what an agent's host would do without the gateway: one keep-alive
`httpx2.AsyncClient` per worker, a GET, the JSON parsed. The toolweave side is an MCP
`tools/call` of `api__getPet`, which the gateway turns into the same GET on its own
shared client. Both run interleaved in the same rounds, against the same API process.
"""

from __future__ import annotations

import importlib.util
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import httpx2

from bench.core import Bench, ScenarioResult, ratio
from bench.gateway import GatewayRun
from bench.load import Target, compare, tool_call, url_client
from bench.procs import BENCH_DIR, LOOPBACK, free_port, wait_port
from bench.scenarios._common import stop_gateway, try_gateway

ROOT = BENCH_DIR.parent


def _direct(base: str) -> Target:
    async def call(client: httpx2.AsyncClient) -> Any:
        response = await client.get("/pets/7")
        response.raise_for_status()
        return response.json()

    return Target("direct (HTTP)", lambda: httpx2.AsyncClient(base_url=base), call)


async def scenario_i(bench: Bench) -> ScenarioResult:
    result = ScenarioResult("I", "HTTP API: GET /pets/{id} direct vs through toolweave's OpenAPI backend")
    port = free_port()
    api = bench.group.start(
        "rest-api", [sys.executable, str(BENCH_DIR / "api_server.py"), "--port", str(port)]
    )
    wait_port(api, port, 30)
    base = f"http://{LOOPBACK}:{port}"
    backend = {"name": "api", "openapi": f"{base}/openapi.json"}
    run = await try_gateway(bench, "i", [backend], ["api__getPet"])
    try:
        result.metrics.update(await _cpu_per_call(base, bench.settings.n(400, 2000)))
        if isinstance(run, GatewayRun):
            targets = [
                _direct(base),
                Target("toolweave", url_client(run.url), tool_call("api__getPet", {"id": 7})),
            ]
            s = bench.settings
            for concurrency, calls in ((1, s.n(200, 2000)), (8, s.n(400, 4000))):
                measured = await compare(
                    targets, concurrency=concurrency, calls=calls, rounds=s.rounds, max_seconds=s.budget_s
                )
                result.add_rows(measured, note=f"c={concurrency}")
                direct, gateway = measured["direct (HTTP)"], measured["toolweave"]
                result.metrics[f"direct_p50_ms_c{concurrency}"] = direct.p50
                result.metrics[f"gateway_p50_ms_c{concurrency}"] = gateway.p50
                result.metrics[f"overhead_ms_p50_c{concurrency}"] = gateway.p50 - direct.p50
                result.metrics[f"throughput_ratio_c{concurrency}"] = ratio(
                    gateway.calls_per_s, direct.calls_per_s
                )
    finally:
        stop_gateway(bench, run)
        bench.group.stop(api)
    result.metrics.update(_github_conversion(bench))
    if isinstance(run, str):
        return result.skip(run)
    return result


async def _cpu_per_call(base: str, calls: int) -> dict[str, float]:
    """CPU milliseconds per call, in this process, interleaved: the raw httpx2 GET vs the OpenAPI backend's
    `call_tool` (encoding, the same GET on its shared client, checking the response against the output
    schema, building the result). CPU time, unlike latency, barely moves with the load of a shared machine.
    """
    from toolweave.backends.http.backend import HttpApiBackend
    from toolweave.config import parse_config

    config = parse_config({"backends": [{"name": "api", "openapi": f"{base}/openapi.json"}]})
    assert config is not None
    backend = HttpApiBackend(config.backends[0])
    await backend.start()
    try:
        if not await backend.wait_ready(30):
            return {}
        spent = {"direct": 0.0, "backend": 0.0}
        async with httpx2.AsyncClient(base_url=base) as client:

            async def direct() -> None:
                response = await client.get("/pets/7")
                response.raise_for_status()
                response.json()

            async def through() -> None:
                result = await backend.call_tool("getPet", {"id": 7})
                assert not result.is_error

            rounds = 8
            for _ in range(2):  # warm both
                await direct()
                await through()
            for index in range(rounds):
                for label, call in (("direct", direct), ("backend", through))[:: 1 if index % 2 else -1]:
                    started = time.process_time()
                    for _ in range(calls // rounds):
                        await call()
                    spent[label] += time.process_time() - started
        per_call = {label: seconds * 1000 / (calls // rounds * rounds) for label, seconds in spent.items()}
        return {
            "cpu_ms_per_call_direct": round(per_call["direct"], 3),
            "cpu_ms_per_call_backend": round(per_call["backend"], 3),
            "cpu_ms_added_by_backend": round(per_call["backend"] - per_call["direct"], 3),
        }
    finally:
        await backend.stop()


def _github_conversion(bench: Bench) -> dict[str, float]:
    """Seconds to parse and convert GitHub's REST description (median of a few runs), if npm can fetch it."""
    spec = importlib.util.spec_from_file_location(
        "npm_documents", ROOT / "tests" / "support" / "npm_documents.py"
    )
    if spec is None or spec.loader is None:
        return {}
    npm_documents = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(npm_documents)
    try:
        path: Path = npm_documents.github_document()
    except npm_documents.Unavailable as why:
        print(f"  I: GitHub document unavailable ({why}); conversion time not measured", flush=True)
        return {}
    from toolweave.backends.openapi import ConvertOptions, convert, parse_document

    raw = path.read_bytes()
    times: list[float] = []
    tools = 0
    for _ in range(bench.settings.n(1, 3)):
        started = time.perf_counter()
        conversion = convert(parse_document(raw, str(path)), ConvertOptions(name_room=54))
        times.append(time.perf_counter() - started)
        tools = len(conversion.operations)
    return {
        "github_document_mb": round(len(raw) / 1e6, 1),
        "github_conversion_s": round(statistics.median(times), 2),
        "github_tools": float(tools),
        "github_skipped": float(len(conversion.skipped)),
    }
