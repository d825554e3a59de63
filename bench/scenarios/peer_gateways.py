"""H (`--peers`): scenario A through FastMCP 4.1.0 `create_proxy` and ContextForge 1.0.7, side by side."""

from __future__ import annotations

from bench import peers
from bench.configs import http_backend
from bench.core import Bench, ScenarioResult, ratio
from bench.gateway import GatewayRun, exposed
from bench.load import LoadResult, Target, compare, header_client, tool_call, url_client
from bench.procs import StartError
from bench.scenarios._common import ECHO_ARGS, stop_gateway, try_gateway


def _fastmcp_target(bench: Bench, notes: list[str]) -> Target | None:
    try:
        proxy = peers.start_fastmcp_proxy(bench.group, bench.backend_url)
    except (StartError, OSError) as exc:
        notes.append(f"FastMCP unavailable: {exc}")
        return None
    assert proxy.url is not None
    return Target("FastMCP 4.1.0 create_proxy", url_client(proxy.url), tool_call("echo", ECHO_ARGS))


def _contextforge_target(bench: Bench, notes: list[str]) -> Target | None:
    try:
        cf = peers.start_contextforge(bench.group, bench.backend_url)
    except (StartError, OSError) as exc:
        notes.append(f"ContextForge unavailable: {exc}")
        return None
    return Target(
        "ContextForge 1.0.7", header_client(cf.mcp_url, cf.headers), tool_call(cf.tool_name, ECHO_ARGS)
    )


def _peer_metrics(result: ScenarioResult, measured: dict[str, LoadResult], concurrency: int) -> None:
    direct = measured["direct"]
    for label, load in measured.items():
        if label == "direct":
            continue
        result.metrics[f"{label} | overhead_ms_p50_c{concurrency}"] = load.p50 - direct.p50
        result.metrics[f"{label} | throughput_ratio_c{concurrency}"] = ratio(
            load.calls_per_s, direct.calls_per_s
        )


async def scenario_h(bench: Bench) -> ScenarioResult:
    result = ScenarioResult("H", "peers: passthrough through FastMCP and ContextForge")
    notes: list[str] = []
    run = await try_gateway(bench, "h", [http_backend("b1", bench.backend_url)], [exposed("b1", "echo")])
    if isinstance(run, str):
        notes.append(run)
    targets = [Target("direct", url_client(bench.backend_url), tool_call("echo", ECHO_ARGS))]
    if isinstance(run, GatewayRun):
        targets.append(Target("toolweave", url_client(run.url), tool_call(exposed("b1", "echo"), ECHO_ARGS)))
    targets += [t for t in (_fastmcp_target(bench, notes), _contextforge_target(bench, notes)) if t]
    try:
        for concurrency, calls in ((1, bench.settings.n(100, 400)), (8, bench.settings.n(200, 800))):
            measured = await compare(
                targets, concurrency=concurrency, calls=calls, warmup=10, rounds=4, max_seconds=240
            )
            result.add_rows(measured, note=f"c={concurrency}")
            _peer_metrics(result, measured, concurrency)
    finally:
        stop_gateway(bench, run)
    result.message = "; ".join(notes)
    return result
