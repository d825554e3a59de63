"""D (fan-out), E (router) and F (workflow): composites against the same calls made directly."""

from __future__ import annotations

import time
from typing import Any

import anyio
from mcp import Client

from bench.configs import (
    DAG_WIDTH,
    ROUTED_INPUT,
    ROUTER_RULES,
    WORKFLOW_STEPS,
    chain_workflow,
    dag_workflow,
    fanout_backends,
    fanout_tool,
    http_backend,
    router_tool,
)
from bench.core import Bench, Check, ScenarioResult, ratio
from bench.gateway import GatewayRun, exposed
from bench.load import CallFn, LoadResult, Target, compare, tool_call, url_client
from bench.scenarios._common import stop_gateway, try_baseline, try_gateway

BASELINE = "baseline "


def _baseline_targets(baseline: GatewayRun | str | None, targets: list[Target]) -> list[Target]:
    """The baseline tree's copies of toolweave's targets (same calls, its gateway's URL)."""
    if not isinstance(baseline, GatewayRun):
        return []
    return [
        Target(BASELINE + t.label, url_client(baseline.url), t.call, pid=baseline.pid)
        for t in targets
        if t.label.startswith("toolweave")
    ]


def _versus(result: ScenarioResult, measured: dict[str, LoadResult], label: str, what: str) -> None:
    if label in measured and BASELINE + label in measured:
        result.versus_calls(what, measured[label], measured[BASELINE + label])


def sequential_calls(name: str, count: int) -> CallFn:
    """`count` calls of `name`, one after the other, on one session."""
    single = tool_call(name)

    async def call(client: Client) -> None:
        for _ in range(count):
            await single(client)

    return call


def direct_dag(name: str, width: int) -> CallFn:
    """The DAG shape made directly: one call, `width` concurrent calls, one call."""
    single = tool_call(name)

    async def call(client: Client) -> None:
        await single(client)
        async with anyio.create_task_group() as tg:
            for _ in range(width):
                tg.start_soon(single, client)
        await single(client)

    return call


async def _meta_of(url: str, name: str, args: dict[str, Any]) -> dict[str, Any]:
    """`_meta["toolweave"]` of one call's result, plus `_wall_ms`: that call's own wall time."""
    async with Client(url) as client:
        start = time.perf_counter()
        result = await client.call_tool(name, args)
        wall_ms = (time.perf_counter() - start) * 1000.0
    found = (result.meta or {}).get("toolweave")
    return {**(found if isinstance(found, dict) else {}), "_wall_ms": wall_ms}


# ---------------------------------------------------------------- D. fan-out


async def scenario_d(bench: Bench) -> ScenarioResult:
    result = ScenarioResult("D", "fan-out: 5 targets x 50 ms in one composite")
    run = await try_gateway(bench, "d", fanout_backends(bench.backend_url), ["fan"], [fanout_tool()])
    baseline = await try_baseline(bench, "d", fanout_backends(bench.backend_url), ["fan"], [fanout_tool()])
    url = bench.backend_url
    targets = [
        Target("direct: one sleep50", url_client(url), tool_call("sleep50")),
        Target("direct: 5 sleep50 in sequence", url_client(url), sequential_calls("sleep50", 5)),
    ]
    try:
        if isinstance(run, GatewayRun):
            targets.append(
                Target("toolweave: fan (5 x sleep50)", url_client(run.url), tool_call("fan"), pid=run.pid)
            )
        measured = await compare(
            targets + _baseline_targets(baseline, targets),
            concurrency=1,
            calls=bench.settings.n(12, 60),
            warmup=3,
            rounds=bench.settings.slow_rounds,
            max_seconds=bench.settings.budget_s,
        )
    finally:
        stop_gateway(bench, run)
        stop_gateway(bench, baseline)
    result.add_rows(measured, note="c=1")
    _versus(result, measured, "toolweave: fan (5 x sleep50)", "fan-out (5 x 50 ms):")
    one = measured[targets[0].label].p50
    result.metrics["direct_one_p50_ms"] = one
    result.metrics["direct_sequential_p50_ms"] = measured[targets[1].label].p50
    if isinstance(run, str):
        return result.skip(run)
    fan = measured[targets[2].label].p50
    result.metrics["fanout_p50_ms"] = fan
    result.metrics["fanout_ratio"] = ratio(fan, one)
    result.checks.append(Check("fan-out p50 / one 50 ms call", result.metrics["fanout_ratio"], 1.15, "x"))
    return result


# ---------------------------------------------------------------- E. router


async def scenario_e(bench: Bench) -> ScenarioResult:
    result = ScenarioResult("E", f"router: {ROUTER_RULES} rules vs the chosen tool")
    backends, expected = [http_backend("b1", bench.backend_url)], ["route", exposed("b1", "echo")]
    run = await try_gateway(bench, "e", backends, expected, [router_tool()])
    baseline = await try_baseline(bench, "e", backends, expected, [router_tool()])
    echo_args = {"text": ROUTED_INPUT["url"]}
    targets = [Target("direct: echo", url_client(bench.backend_url), tool_call("echo", echo_args))]
    try:
        if isinstance(run, GatewayRun):
            targets += [
                Target(
                    "toolweave: b1__echo",
                    url_client(run.url),
                    tool_call(exposed("b1", "echo"), echo_args),
                    pid=run.pid,
                ),
                Target(
                    "toolweave: route (last rule)",
                    url_client(run.url),
                    tool_call("route", ROUTED_INPUT),
                    pid=run.pid,
                ),
            ]
            result.metrics["router_meta"] = await _meta_of(run.url, "route", ROUTED_INPUT)
        measured = await compare(
            targets + _baseline_targets(baseline, targets),
            concurrency=1,
            calls=bench.settings.n(300, 2000),
            rounds=bench.settings.rounds,
            max_seconds=bench.settings.budget_s,
        )
    finally:
        stop_gateway(bench, run)
        stop_gateway(bench, baseline)
    result.add_rows(measured, note="c=1")
    _versus(result, measured, "toolweave: b1__echo", "router's tool alone (b1__echo):")
    _versus(result, measured, "toolweave: route (last rule)", "router (20 rules, last):")
    if isinstance(run, str):
        return result.skip(run)
    _router_metrics(result, measured, [t.label for t in targets])
    return result


def _router_metrics(result: ScenarioResult, measured: dict[str, LoadResult], labels: list[str]) -> None:
    direct, echo, route = (measured[label].p50 for label in labels)
    result.metrics["router_decision_ms"] = route - echo
    result.metrics["router_vs_direct_ms"] = route - direct
    chosen = result.metrics["router_meta"].get("operation")
    expected = f"op{ROUTER_RULES - 1:02d}"
    if chosen != expected:
        result.message = f"router chose {chosen!r}, expected {expected!r} (see _meta.toolweave)"
    result.checks.append(Check("router decision (route - b1__echo p50)", route - echo, 0.2, "ms"))


# ---------------------------------------------------------------- F. workflow


def _per_step(gateway: LoadResult, direct: LoadResult) -> float:
    return (gateway.p50 - direct.p50) / WORKFLOW_STEPS


def _chain_meta_overhead(meta: dict[str, Any]) -> float | None:
    """Per-step time of one chain run beyond its steps' own latencies (`_meta.toolweave.steps`)."""
    steps = meta.get("steps")
    if not isinstance(steps, list) or not steps:
        return None
    tools_ms = sum(float(s.get("latency_ms", 0.0)) for s in steps if isinstance(s, dict))
    return (float(meta["_wall_ms"]) - tools_ms) / WORKFLOW_STEPS


async def scenario_f(bench: Bench) -> ScenarioResult:
    result = ScenarioResult("F", f"workflow: {WORKFLOW_STEPS} no-op steps, chain and wide DAG")
    backends, workflows = [http_backend("b1", bench.backend_url)], [chain_workflow(), dag_workflow()]
    run = await try_gateway(bench, "f", backends, ["wf_chain", "wf_dag"], workflows)
    baseline = await try_baseline(bench, "f", backends, ["wf_chain", "wf_dag"], workflows)
    url = bench.backend_url
    targets = [
        Target("direct: 50 noop in sequence", url_client(url), sequential_calls("noop", WORKFLOW_STEPS)),
        Target("direct: noop DAG 1+48+1", url_client(url), direct_dag("noop", DAG_WIDTH)),
    ]
    try:
        if isinstance(run, GatewayRun):
            targets += [
                Target("toolweave: wf_chain", url_client(run.url), tool_call("wf_chain"), pid=run.pid),
                Target("toolweave: wf_dag", url_client(run.url), tool_call("wf_dag"), pid=run.pid),
            ]
        measured = await compare(
            targets + _baseline_targets(baseline, targets),
            concurrency=1,
            calls=bench.settings.n(6, 40),
            warmup=2,
            rounds=bench.settings.slow_rounds,
            max_seconds=bench.settings.budget_s,
        )
        if isinstance(run, GatewayRun):
            result.metrics["chain_meta"] = await _meta_of(run.url, "wf_chain", {})
    finally:
        stop_gateway(bench, run)
        stop_gateway(bench, baseline)
    result.add_rows(measured, note="c=1, per workflow run")
    _versus(result, measured, "toolweave: wf_chain", f"workflow chain ({WORKFLOW_STEPS} steps):")
    _versus(result, measured, "toolweave: wf_dag", f"workflow DAG (1+{DAG_WIDTH}+1 steps):")
    if isinstance(run, str):
        return result.skip(run)
    _workflow_metrics(result, measured, [t.label for t in targets])
    return result


def _workflow_metrics(result: ScenarioResult, measured: dict[str, LoadResult], labels: list[str]) -> None:
    direct_chain, direct_dag_, chain, dag = (measured[label] for label in labels)
    m = result.metrics
    m["chain_ms_per_step"] = _per_step(chain, direct_chain)
    m["dag_ms_per_step"] = _per_step(dag, direct_dag_)
    m["chain_meta_ms_per_step"] = _chain_meta_overhead(m.pop("chain_meta"))
    m["workflow_ms_per_step"] = max(m["chain_ms_per_step"], m["dag_ms_per_step"])
    result.checks.append(Check("workflow gateway time per step", m["workflow_ms_per_step"], 0.2, "ms"))
