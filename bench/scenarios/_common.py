"""Helpers the scenarios share: a toolweave per scenario, and the standard calls."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from bench.core import Bench
from bench.gateway import GatewayRun, GatewayUnavailable, start_gateway, write_config

ECHO_ARGS = {"text": "hello"}


async def try_gateway(
    bench: Bench,
    name: str,
    backends: Sequence[Mapping[str, Any]],
    expected_tools: Sequence[str],
    composites: Sequence[Mapping[str, Any]] = (),
) -> GatewayRun | str:
    """Start toolweave with this config; return the run, or why it is unavailable."""
    config = write_config(bench.workdir / f"{name}.toml", backends, composites)
    try:
        return await start_gateway(bench.group, config, expected_tools, name=f"toolweave-{name}")
    except GatewayUnavailable as exc:
        return f"toolweave unavailable: {exc}"


def stop_gateway(bench: Bench, run: GatewayRun | str) -> None:
    if isinstance(run, GatewayRun):
        bench.group.stop(run.managed)
