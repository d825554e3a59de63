"""G: toolweave's own RSS, idle with 20 stdio backends and across 10,000 calls."""

from __future__ import annotations

import itertools
from pathlib import Path

import anyio
from mcp import Client

from bench.configs import stdio_backend
from bench.core import Bench, Check, ScenarioResult
from bench.gateway import GatewayRun, exposed
from bench.load import CallFn, LoadResult, Target, compare, tool_call, url_client
from bench.procs import rss_mb, stdio_backend_argv
from bench.scenarios._common import ECHO_ARGS, stop_gateway, try_gateway

STDIO_BACKENDS = 20
SETTLE_S = 2.0
GROWTH_BOUND_MB = 5.0
SAMPLES = 5


def _names() -> list[str]:
    return [f"s{i:02d}" for i in range(1, STDIO_BACKENDS + 1)]


def rotating_echo() -> CallFn:
    """Each call goes to the next stdio backend's echo."""
    tools = itertools.cycle([exposed(name, "echo") for name in _names()])

    async def call(client: Client) -> object:
        return await tool_call(next(tools), ECHO_ARGS)(client)

    return call


def child_count(pid: int) -> int:
    """How many direct children a process has (the stdio backends it spawned)."""
    total = 0
    for task in Path(f"/proc/{pid}/task").glob("*/children"):
        try:
            total += len(task.read_text().split())
        except OSError:
            continue
    return total


async def _soak(run: GatewayRun, calls: int, budget_s: float) -> tuple[list[float], LoadResult]:
    """`calls` calls at c=8 in SAMPLES chunks, the gateway's RSS read after each chunk."""
    target = Target("toolweave: 20 stdio echo", url_client(run.url), rotating_echo())
    series: list[float] = []
    merged = LoadResult(target.label, 8)
    for _ in range(SAMPLES):
        chunk = await compare(
            [target], concurrency=8, calls=calls // SAMPLES, warmup=8, rounds=1, max_seconds=budget_s
        )
        part = chunk[target.label]
        merged.latencies_ms += part.latencies_ms
        merged.errors += part.errors
        merged.active_s += part.active_s
        merged.first_error = merged.first_error or part.first_error
        series.append(rss_mb(run.pid) or float("nan"))
    return series, merged


async def scenario_g(bench: Bench) -> ScenarioResult:
    result = ScenarioResult("G", "memory: 20 stdio backends, idle and after many calls")
    # The stdlib-only backend: G measures toolweave, and 20 SDK servers would cost ~12 s of CPU to start.
    backends = [stdio_backend(name, stdio_backend_argv(lite=True)) for name in _names()]
    expected = [exposed(name, "echo") for name in (_names()[0], _names()[-1])]
    run = await try_gateway(bench, "g", backends, expected)
    if isinstance(run, str):
        return result.skip(run)
    try:
        await anyio.sleep(SETTLE_S)
        idle = rss_mb(run.pid)
        result.metrics["rss_idle_mb"] = idle
        result.metrics["backend_processes"] = child_count(run.pid)
        calls = bench.settings.n(400, 10000)
        series, load = await _soak(run, calls, bench.settings.n(2, 300))
    finally:
        stop_gateway(bench, run)
    result.add_rows([load], note=f"{load.calls} calls, c=8")
    result.metrics["calls"] = load.calls
    result.metrics["rss_series_mb"] = [round(v, 1) for v in series]
    growth = series[-1] - series[0]
    result.metrics["rss_growth_mb"] = growth
    result.checks += [
        Check("RSS idle, 20 stdio backends", idle, 150.0, "MB"),
        Check(
            f"RSS growth over the last {load.calls - load.calls // SAMPLES} calls",
            growth,
            GROWTH_BOUND_MB,
            "MB",
        ),
    ]
    return result
