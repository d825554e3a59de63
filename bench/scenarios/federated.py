"""K (federated tools): the same stdio MCP server as an ordinary stdio backend vs as a federated
client (`toolweave federate`), both behind one toolweave, side by side.

The stdio backend `st` is spawned by the gateway; the federated namespace `fed` is the same
server spawned by `toolweave federate`, connected out to the gateway over a WebSocket. An MCP
client calls `st__echo` and `fed__echo` in interleaved rounds; the ratio is what the extra hop
(gateway → WebSocket → bridge → the server's stdin, and back) costs. No target was set: it reports.
"""

from __future__ import annotations

import asyncio

from bench.configs import stdio_backend
from bench.core import Bench, ScenarioResult, ratio
from bench.gateway import GatewayRun, _listed
from bench.load import Target, compare, tool_call, url_client
from bench.procs import stdio_backend_argv, venv_bin
from bench.scenarios._common import ECHO_ARGS, stop_gateway, try_gateway

REGISTER_TIMEOUT_S = 60.0


async def scenario_k(bench: Bench) -> ScenarioResult:
    result = ScenarioResult("K", "federated: the same stdio server as a stdio backend vs a federated client")
    server = stdio_backend_argv()
    run = await try_gateway(bench, "k", [stdio_backend("st", server)], ["st__echo"])
    if isinstance(run, str):
        return result.skip(run)
    base = run.url.removesuffix("/mcp")
    bridge = bench.group.start(
        "federate",
        [str(venv_bin("toolweave")), "federate", "--gateway", base, "--namespace", "fed", "--", *server],
    )
    try:
        if not await _registered(run, "fed__echo"):
            return result.fail(f"the federated client did not register: {bridge.log_tail()}")
        targets = [
            Target("stdio backend", url_client(run.url), tool_call("st__echo", ECHO_ARGS)),
            Target("federated", url_client(run.url), tool_call("fed__echo", ECHO_ARGS)),
        ]
        s = bench.settings
        for concurrency, calls in ((1, s.n(200, 2000)), (8, s.n(400, 4000))):
            measured = await compare(
                targets, concurrency=concurrency, calls=calls, rounds=s.rounds, max_seconds=s.budget_s
            )
            result.add_rows(measured, note=f"c={concurrency}")
            stdio, federated = measured["stdio backend"], measured["federated"]
            result.metrics[f"stdio_p50_ms_c{concurrency}"] = stdio.p50
            result.metrics[f"federated_p50_ms_c{concurrency}"] = federated.p50
            result.metrics[f"federated_overhead_ms_p50_c{concurrency}"] = federated.p50 - stdio.p50
            result.metrics[f"federated_p50_ratio_c{concurrency}"] = ratio(federated.p50, stdio.p50)
            result.metrics[f"federated_throughput_ratio_c{concurrency}"] = ratio(
                federated.calls_per_s, stdio.calls_per_s
            )
    finally:
        bench.group.stop(bridge)
        stop_gateway(bench, run)
    return result


async def _registered(run: GatewayRun, name: str) -> bool:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + REGISTER_TIMEOUT_S
    while loop.time() < deadline:
        if name in await _listed(run.url):
            return True
        await asyncio.sleep(0.2)
    return False
