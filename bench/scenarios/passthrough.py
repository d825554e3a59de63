"""A (passthrough: one small call, c=1 and c=8) and B (a 100 KB result), direct vs toolweave."""

from __future__ import annotations

from bench.configs import http_backend
from bench.core import Bench, Check, ScenarioResult, ratio
from bench.gateway import GatewayRun, exposed
from bench.load import LoadResult, Target, compare, tool_call, url_client
from bench.scenarios._common import ECHO_ARGS, stop_gateway, try_baseline, try_gateway

BASELINE = "baseline toolweave"


def _targets(
    bench: Bench,
    run: GatewayRun | str,
    tool: str,
    args: dict[str, str],
    baseline: GatewayRun | str | None = None,
) -> list[Target]:
    targets = [Target("direct", url_client(bench.backend_url), tool_call(tool, args))]
    if isinstance(run, GatewayRun):
        targets.append(
            Target("toolweave", url_client(run.url), tool_call(exposed("b1", tool), args), pid=run.pid)
        )
    if isinstance(baseline, GatewayRun):
        targets.append(
            Target(BASELINE, url_client(baseline.url), tool_call(exposed("b1", tool), args), pid=baseline.pid)
        )
    return targets


def _versus_baseline(result: ScenarioResult, measured: dict[str, LoadResult], concurrency: int) -> None:
    this, before = measured.get("toolweave"), measured.get(BASELINE)
    if this is None or before is None:
        return
    result.versus_calls(f"passthrough, c={concurrency}:", this, before)
    result.versus(f"passthrough throughput, c={concurrency}", "calls/s", this.calls_per_s, before.calls_per_s)


def _passthrough_metrics(results: dict[str, LoadResult], concurrency: int) -> dict[str, float]:
    direct, gateway = results["direct"], results["toolweave"]
    return {
        f"overhead_ms_p50_c{concurrency}": gateway.p50 - direct.p50,
        f"ratio_p50_c{concurrency}": ratio(gateway.p50, direct.p50),
        f"throughput_ratio_c{concurrency}": ratio(gateway.calls_per_s, direct.calls_per_s),
        f"direct_p50_ms_c{concurrency}": direct.p50,
        f"gateway_p50_ms_c{concurrency}": gateway.p50,
    }


async def scenario_a(bench: Bench) -> ScenarioResult:
    result = ScenarioResult("A", "passthrough: echo, direct vs through toolweave")
    backends = [http_backend("b1", bench.backend_url)]
    run = await try_gateway(bench, "a", backends, [exposed("b1", "echo")])
    baseline = await try_baseline(bench, "a", backends, [exposed("b1", "echo")])
    try:
        targets = _targets(bench, run, "echo", ECHO_ARGS, baseline)
        s = bench.settings
        for concurrency, calls in ((1, s.n(200, 2000)), (8, s.n(400, 4000))):
            measured = await compare(
                targets, concurrency=concurrency, calls=calls, rounds=s.rounds, max_seconds=s.budget_s
            )
            result.add_rows(measured, note=f"c={concurrency}")
            _versus_baseline(result, measured, concurrency)
            if isinstance(run, GatewayRun):
                result.metrics.update(_passthrough_metrics(measured, concurrency))
            else:
                result.metrics[f"direct_p50_ms_c{concurrency}"] = measured["direct"].p50
    finally:
        stop_gateway(bench, run)
        stop_gateway(bench, baseline)
    if isinstance(baseline, str):
        result.message = baseline
    if isinstance(run, str):
        return result.skip(run)
    m = result.metrics
    result.checks += [
        Check("overhead p50 at c=1", m["overhead_ms_p50_c1"], 1.0, "ms"),
        Check("throughput at c=8 vs direct", m["throughput_ratio_c8"], 0.8, "x", higher_is_better=True),
    ]
    return result


async def scenario_b(bench: Bench) -> ScenarioResult:
    result = ScenarioResult("B", "big result: 100 KB, direct vs through toolweave")
    run = await try_gateway(bench, "b", [http_backend("b1", bench.backend_url)], [exposed("b1", "big")])
    try:
        targets = _targets(bench, run, "big", {})
        measured = await compare(
            targets,
            concurrency=1,
            calls=bench.settings.n(60, 400),
            rounds=bench.settings.rounds,
            max_seconds=bench.settings.budget_s,
        )
        result.add_rows(measured, note="100 KB, c=1")
        result.metrics["direct_p50_ms"] = measured["direct"].p50
        if isinstance(run, GatewayRun):
            gateway = measured["toolweave"]
            result.metrics["overhead_ms_p50"] = gateway.p50 - measured["direct"].p50
            result.metrics["ratio_p50"] = ratio(gateway.p50, measured["direct"].p50)
    finally:
        stop_gateway(bench, run)
    return result.skip(run) if isinstance(run, str) else result
