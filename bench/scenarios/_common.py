"""Helpers the scenarios share: starting toolweave for a scenario, and the standard calls.

Each scenario gets its own toolweave (its own config) in a full run. With `--quick`,
scenarios A, B, D, E and F share one toolweave serving all of their tools, which saves
four server starts; if that combined gateway cannot start, every scenario falls back to
its own, so a failure is reported by the scenario it concerns.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bench.configs import (
    chain_workflow,
    dag_workflow,
    fanout_backends,
    fanout_tool,
    http_backend,
    router_tool,
)
from bench.core import Bench
from bench.gateway import (
    GatewayRun,
    GatewayUnavailable,
    baseline_exe,
    exposed,
    start_gateway,
    write_config,
)

ECHO_ARGS = {"text": "hello"}
SHARED_NAME = "shared"


async def _start(
    bench: Bench,
    name: str,
    backends: Sequence[Mapping[str, Any]],
    expected_tools: Sequence[str],
    composites: Sequence[Mapping[str, Any]],
) -> GatewayRun | str:
    config = write_config(bench.workdir / f"{name}.toml", backends, composites)
    try:
        return await start_gateway(bench.group, config, expected_tools, name=f"toolweave-{name}")
    except GatewayUnavailable as exc:
        return f"toolweave unavailable: {exc}"


async def _shared(bench: Bench) -> GatewayRun | str:
    """The combined gateway of `--quick`, started on first use."""
    if bench.shared is None:
        url = bench.backend_url
        backends = [http_backend("b1", url), *fanout_backends(url)]
        composites = [fanout_tool(), router_tool(), chain_workflow(), dag_workflow()]
        expected = [exposed("b1", "echo"), "fan", "route", "wf_chain", "wf_dag"]
        bench.shared = await _start(bench, SHARED_NAME, backends, expected, composites)
    return bench.shared


async def try_gateway(
    bench: Bench,
    name: str,
    backends: Sequence[Mapping[str, Any]],
    expected_tools: Sequence[str],
    composites: Sequence[Mapping[str, Any]] = (),
) -> GatewayRun | str:
    """A toolweave serving `expected_tools`; the run, or why it is unavailable."""
    if bench.settings.quick and all(b.get("url") == bench.backend_url for b in backends):
        shared = await _shared(bench)
        if isinstance(shared, GatewayRun) and set(expected_tools) <= shared.tools:
            return shared
    return await _start(bench, name, backends, expected_tools, composites)


async def try_baseline(
    bench: Bench,
    name: str,
    backends: Sequence[Mapping[str, Any]],
    expected_tools: Sequence[str],
    composites: Sequence[Mapping[str, Any]] = (),
) -> GatewayRun | str | None:
    """The baseline tree's toolweave (`--baseline DIR`) serving the same config (its own database):
    the run, why it is unavailable, or None without `--baseline`."""
    tree = bench.settings.baseline
    if tree is None:
        return None
    config = write_config(bench.workdir / f"{name}-baseline.toml", backends, composites)
    try:
        return await start_gateway(
            bench.group, config, expected_tools, name=f"baseline-{name}", exe=baseline_exe(tree)
        )
    except GatewayUnavailable as exc:
        return f"baseline toolweave unavailable: {exc}"


def stop_gateway(bench: Bench, run: GatewayRun | str | None) -> None:
    """Stop a scenario's own toolweave (the shared one lives until the end of the run)."""
    if isinstance(run, GatewayRun) and run is not bench.shared:
        bench.group.stop(run.managed)
