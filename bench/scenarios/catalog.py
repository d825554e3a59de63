"""C: a warm tools/list through toolweave with 3 backends of 100 tools each."""

from __future__ import annotations

from typing import Any

from mcp import Client

from bench.configs import http_backend
from bench.core import Bench, Check, ScenarioResult
from bench.gateway import GatewayRun, exposed
from bench.load import Target, compare, url_client
from bench.procs import start_backend
from bench.scenarios._common import stop_gateway, try_gateway

BACKENDS = 3
TOOLS_PER_BACKEND = 100
CORE_TOOLS = 4  # echo, big, sleep50, noop


def list_tools_call(expect_at_least: int) -> Any:
    """tools/list with the client's response cache bypassed, checking the count."""

    async def call(client: Client) -> Any:
        listed = await client.list_tools(cache_mode="bypass")
        if len(listed.tools) < expect_at_least:
            raise RuntimeError(f"tools/list returned {len(listed.tools)} tools, expected {expect_at_least}+")
        return listed

    return call


async def scenario_c(bench: Bench) -> ScenarioResult:
    result = ScenarioResult("C", "tools/list: 3 backends x 100 tools, warm")
    extra = TOOLS_PER_BACKEND - CORE_TOOLS
    backends = [start_backend(bench.group, f"catalog{i}", extra_tools=extra) for i in range(1, BACKENDS + 1)]
    urls = [b.url for b in backends if b.url]
    config = [http_backend(f"c{i}", url) for i, url in enumerate(urls, start=1)]
    run = await try_gateway(bench, "c", config, [exposed(f"c{i}", "dummy_000") for i in range(1, BACKENDS + 1)])
    try:
        targets = [Target("direct (1 backend, 100 tools)", url_client(urls[0]), list_tools_call(TOOLS_PER_BACKEND))]
        if isinstance(run, GatewayRun):
            total = BACKENDS * TOOLS_PER_BACKEND
            targets.append(Target("toolweave (300 tools)", url_client(run.url), list_tools_call(total)))
        measured = await compare(
            targets, concurrency=1, calls=bench.settings.n(40, 300), warmup=5, rounds=bench.settings.rounds
        )
        result.add_rows(measured, note="tools/list, cache bypassed")
        result.metrics["direct_one_backend_p50_ms"] = measured[targets[0].label].p50
        if isinstance(run, GatewayRun):
            result.metrics["tools_list_ms"] = measured[targets[1].label].p50
    finally:
        stop_gateway(bench, run)
        for backend in backends:
            bench.group.stop(backend)
    if isinstance(run, str):
        return result.skip(run)
    result.checks.append(Check("tools/list p50 (300 tools)", result.metrics["tools_list_ms"], 5.0, "ms"))
    return result
