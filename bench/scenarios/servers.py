"""L: virtual servers. 50 `[[servers]]` over 3 backends x 100 tools, beside `/mcp` in the same run.

Side by side on one gateway: a `tools/call` of `c1__echo` through `/mcp` and through
`/servers/s01/mcp` (the difference is what resolving a server costs a request: the route, one
dict lookup, the access check; shown as the gateway's CPU per call and p50, both within the noise
of a shared machine), and a raw `tools/list` of `/mcp` (300 tools) beside the largest server
(`s00`, every tool) and a small one (`s01`, 11 tools). The resolution step itself
(`VirtualEndpoints.resolve`) is timed in process, where it can be seen (the <= 0.05 ms target),
with what 50 servers add to a catalog rebuild (300 tools); the listing is checked against
scenario C's <= 5 ms goal.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path
from typing import Any

from bench.configs import http_backend
from bench.core import Bench, Check, ScenarioResult
from bench.gateway import GatewayRun, GatewayUnavailable, exposed, start_gateway, toml_dumps
from bench.load import Target, compare, tool_call, url_client
from bench.procs import start_backends
from bench.rawclient import raw_client, raw_list_tools
from bench.scenarios._common import ECHO_ARGS, stop_gateway

BACKENDS = 3
TOOLS_PER_BACKEND = 100
CORE_TOOLS = 4
SERVERS = 50


def servers() -> list[dict[str, Any]]:
    """s00: every tool; the others a few overlapping slices (by glob, backend or regex) and `c1__echo`."""
    found: list[dict[str, Any]] = [{"name": "s00", "tools": ["*"]}]
    for index in range(1, SERVERS):
        backend = f"c{index % BACKENDS + 1}"
        entry: dict[str, Any] = {
            "name": f"s{index:02d}",
            "tools": [f"{backend}__dummy_0{index % 10}*", "c1__echo"],
        }
        if index % 7 == 0:
            entry["backends"] = [backend]
        if index % 5 == 0:
            entry["tool_exposure"] = "search"
            entry["pinned"] = ["c1__echo"]
        found.append(entry)
    return found


def _module(folder: Path, tools: int) -> str:
    """A Python backend module of `tools` tools (the in-process part needs no backend process)."""
    lines = ["import toolweave", ""]
    for index in range(tools):
        lines += [
            f"@toolweave.tool(read_only=True, name='t{index:03d}')",
            f"def t{index:03d}(query: str) -> str:",
        ]
        lines += [f'    """Tool number {index}: answers a query."""', "    return query", ""]
    (folder / "bench_vserver_tools.py").write_text("\n".join(lines))
    return "bench_vserver_tools"


async def in_process(bench: Bench, result: ScenarioResult) -> None:
    """What resolving a server costs one request (the lookup and access check of
    `VirtualEndpoints.resolve`), and what the 50 views add to a catalog rebuild, timed in process."""
    from toolweave import Gateway
    from toolweave.config import parse_config
    from toolweave.executor import Session
    from toolweave.server.mcp.virtual import VirtualEndpoints

    sys.path.insert(0, str(bench.workdir))
    module = _module(bench.workdir, BACKENDS * TOOLS_PER_BACKEND)
    slices = [
        {"name": f"s{i:02d}", "tools": [f"py__t{i % 3}{i % 10}*", "py__t000"]} for i in range(1, SERVERS)
    ]
    raw: dict[str, Any] = {"backends": [{"name": "py", "python": module}]}
    with_servers = parse_config({**raw, "servers": [{"name": "s00", "tools": ["*"]}, *slices]})
    plain = parse_config(raw)
    assert with_servers is not None and plain is not None
    rebuild_ms: dict[str, float] = {}
    for label, config in (("without", plain), ("with", with_servers)):
        async with Gateway(config) as gateway:
            rounds = bench.settings.n(10, 40)
            started = time.perf_counter()
            for _ in range(rounds):
                gateway.rebuild()
            rebuild_ms[label] = (time.perf_counter() - started) * 1000 / rounds
            if label == "with":
                endpoints = VirtualEndpoints(
                    gateway, config.limits, host="127.0.0.1", json_response=False, local=Session()
                )
                session = Session(
                    tenant="acme", label="key:x", scopes=frozenset({"tools:read", "tools:call"})
                )
                calls = 200_000
                started = time.perf_counter()
                for index in range(calls):
                    endpoints.resolve("s17" if index & 1 else "s42", session)
                result.metrics["resolve_in_process_ms"] = (time.perf_counter() - started) * 1000 / calls
    result.metrics["rebuild_ms_without_servers"] = rebuild_ms["without"]
    result.metrics["rebuild_ms_with_50_servers"] = rebuild_ms["with"]


def server_url(run: GatewayRun, name: str) -> str:
    return run.url.removesuffix("/mcp") + f"/servers/{name}/mcp"


async def scenario_l(bench: Bench) -> ScenarioResult:
    result = ScenarioResult("L", f"virtual servers: {SERVERS} servers over 3 backends x 100 tools")
    extra = TOOLS_PER_BACKEND - CORE_TOOLS
    backends = start_backends(bench.group, [f"vserver{i}" for i in range(1, BACKENDS + 1)], extra_tools=extra)
    urls = [b.url for b in backends if b.url]
    path = bench.workdir / "l.toml"
    document = {
        "gateway": {"database": f"sqlite:///{path.with_suffix('.db')}", "log_level": "warning"},
        "backends": [http_backend(f"c{i}", url) for i, url in enumerate(urls, start=1)],
        "servers": servers(),
    }
    path.write_text(toml_dumps(document))
    expected = [exposed(f"c{i}", "dummy_000") for i in range(1, BACKENDS + 1)]
    try:
        run: GatewayRun | str = await start_gateway(bench.group, path, expected, name="toolweave-l")
    except GatewayUnavailable as exc:
        run = f"toolweave unavailable: {exc}"
    try:
        if isinstance(run, str):
            return result.skip(run)
        total = BACKENDS * TOOLS_PER_BACKEND
        echo = exposed("c1", "echo")
        pid = run.pid
        calls = [
            Target("call /mcp", url_client(run.url), tool_call(echo, ECHO_ARGS), pid=pid),
            Target(
                "call /servers/s01/mcp",
                url_client(server_url(run, "s01")),
                tool_call(echo, ECHO_ARGS),
                pid=pid,
            ),
        ]
        measured = await compare(
            calls,
            concurrency=1,
            calls=bench.settings.n(150, 1500),
            rounds=bench.settings.rounds,
            max_seconds=bench.settings.budget_s,
        )
        result.add_rows(measured, note="tools/call c1__echo, c=1")
        lists = [
            Target("raw list /mcp (300 tools)", raw_client(run.url), raw_list_tools(total), pid=pid),
            Target(
                "raw list s00 (300 tools)", raw_client(server_url(run, "s00")), raw_list_tools(total), pid=pid
            ),
            Target(
                "raw list s01 (11 tools)", raw_client(server_url(run, "s01")), raw_list_tools(11), pid=pid
            ),
        ]
        listed = await compare(
            lists,
            concurrency=1,
            calls=bench.settings.n(24, 300),
            warmup=3,
            rounds=bench.settings.rounds,
            max_seconds=bench.settings.budget_s,
        )
        result.add_rows(listed, note="tools/list, warm")
        main, server = measured[calls[0].label], measured[calls[1].label]
        m = result.metrics
        m["resolve_cpu_ms_per_call"] = server.cpu_ms_per_call - main.cpu_ms_per_call
        m["resolve_p50_ms"] = server.p50 - main.p50
        m["call_cpu_ms_per_call_mcp"] = main.cpu_ms_per_call
        m["tools_list_ms_mcp"] = listed[lists[0].label].p50
        m["tools_list_ms_server_300"] = listed[lists[1].label].p50
        m["tools_list_ms_server_13"] = listed[lists[2].label].p50
        m["list_cpu_ms_mcp"] = listed[lists[0].label].cpu_ms_per_call
        m["list_cpu_ms_server_300"] = listed[lists[1].label].cpu_ms_per_call
    finally:
        stop_gateway(bench, run)
        for backend in backends:
            bench.group.stop(backend)
    await in_process(bench, result)
    result.checks.append(
        Check(
            "resolving a server per request, in process", result.metrics["resolve_in_process_ms"], 0.05, "ms"
        )
    )
    m = result.metrics
    m["list_cpu_ratio_server_to_mcp"] = m["list_cpu_ms_server_300"] / m["list_cpu_ms_mcp"]
    result.checks.append(
        Check("300-tool server's listing, gateway CPU vs /mcp's", m["list_cpu_ratio_server_to_mcp"], 1.1, "x")
    )
    result.checks.append(
        Check(
            "tools/list p50 of a 300-tool server, minimal client",
            result.metrics["tools_list_ms_server_300"],
            5.0,
            "ms",
        )
    )
    return result
