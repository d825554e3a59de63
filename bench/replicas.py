"""Replicas behind HAProxy: throughput of `tools/call` at c=16 with `wrk`, in one run, side by side.

    .venv/bin/python -m bench.replicas [--seconds 10] [--postgres URL] [--redis URL]

Rows (each `wrk -c16 -t2` for `--seconds`, 2026-07-28 plain JSON `tools/call`, no session):

- the bare SDK server (`bench/backend_server.py`, `echo`) behind HAProxy: the ceiling of the
  backend every gateway row calls;
- one `toolweave serve` replica, direct and behind HAProxy (`b1__echo`, relayed to that backend);
- two replicas behind HAProxy (round robin), sharing one PostgreSQL schema and Redis;
- the same two rows with an in-process Python tool (`bench/pyecho.py`): the gateway's own work;
- one replica direct vs `serve --workers 2` direct (in-process tool): the same machine's cores;
- 2025-11-25 `tools/call` on one session (`Mcp-Session-Id`, in-process tool): one replica that
  shares its sessions over Redis vs one that does not (no `redis_url`), and two replicas behind
  HAProxy serving one session round robin. With each row: p50 and the gateway processes' CPU per
  call (from /proc, all of a row's gateway processes, their workers included), so the session
  store's cost per call reads as the difference of two rows.

Needs wrk and haproxy (Debian) and PostgreSQL + Redis (defaults: this machine's). Prints a
table and, last, one JSON line. Every process it starts is stopped on exit. Read the ratios
on a shared 2-core machine, not the absolute figures: the gateways, the backend, HAProxy and
wrk all share the two cores.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import orjson
import yaml

from bench.procs import ProcessGroup, free_port, install_signal_handlers, start_backend, venv_bin, wait_port

C = 16
ROOT = Path(__file__).resolve().parents[1]
PROTOCOL = "2026-07-28"


def legacy_script(tool: str, session_id: str) -> str:
    """A 2025-11-25 `tools/call` on the session `session_id` (no `_meta` envelope), each request with
    an id of its own (`<thread>-<n>`): the SDK matches a session's answers to its requests by id, so
    16 requests in flight under one id would not be what any client sends."""
    params = orjson.dumps({"name": tool, "arguments": {"text": "hi"}}).decode()
    lines = [
        'wrk.method = "POST"',
        'wrk.headers["content-type"] = "application/json"',
        'wrk.headers["accept"] = "application/json, text/event-stream"',
        'wrk.headers["mcp-protocol-version"] = "2025-11-25"',
        f'wrk.headers["mcp-session-id"] = "{session_id}"',
        "local threads = 0",
        "function setup(thread)",
        "  threads = threads + 1",
        '  thread:set("tid", threads)',
        "end",
        "local n = 0",
        "function request()",
        "  n = n + 1",
        "  local body = string.format("
        + json.dumps('{"jsonrpc":"2.0","id":"%s-%d","method":"tools/call","params":' + params + "}")
        + ", tostring(tid), n)",
        "  return wrk.format(nil, nil, nil, body)",
        "end",
    ]
    return "\n".join(lines) + "\n"


def open_session(url: str) -> str:
    """`initialize` (2025-11-25) on `url`; the session's ID."""
    import httpx

    answer = httpx.post(
        url,
        json={
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "wrk", "version": "0"},
            },
        },
        headers={"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-11-25"},
        timeout=30,
    )
    if answer.status_code != 200 or "mcp-session-id" not in answer.headers:
        raise SystemExit(f"{url} initialize: {answer.status_code} {answer.text[:300]}")
    return answer.headers["mcp-session-id"]


def cpu_seconds(pid: int) -> float:
    """User + system CPU of `pid` and every process below it (a worker's, a stdio backend's)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
        total += (int(fields[11]) + int(fields[12])) / tick
        for task in Path(f"/proc/{pid}/task").iterdir():
            for child in (task / "children").read_text().split():
                total += cpu_seconds(int(child))
    except (FileNotFoundError, ProcessLookupError):
        pass
    return total


def wrk_script(tool: str) -> str:
    body = orjson.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {
                "name": tool,
                "arguments": {"text": "hi"},
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": PROTOCOL,
                    "io.modelcontextprotocol/clientInfo": {"name": "wrk", "version": "0"},
                    "io.modelcontextprotocol/clientCapabilities": {},
                },
            },
        }
    ).decode()
    lines = [
        'wrk.method = "POST"',
        f"wrk.body = {json.dumps(body)}",
        'wrk.headers["content-type"] = "application/json"',
        'wrk.headers["accept"] = "application/json, text/event-stream"',
        f'wrk.headers["mcp-protocol-version"] = "{PROTOCOL}"',
        'wrk.headers["mcp-method"] = "tools/call"',
        f'wrk.headers["mcp-name"] = "{tool}"',
    ]
    return "\n".join(lines) + "\n"


def haproxy_config(front: int, ports: list[int]) -> str:
    servers = "\n".join(f"    server s{i} 127.0.0.1:{port}" for i, port in enumerate(ports))
    return (
        "global\n    maxconn 4096\ndefaults\n    mode http\n    timeout connect 2s\n"
        "    timeout client 60s\n    timeout server 60s\n"
        f"frontend f\n    bind 127.0.0.1:{front}\n    default_backend b\n"
        f"backend b\n    balance roundrobin\n{servers}\n"
    )


def run_wrk(url: str, script: Path, seconds: int) -> dict[str, Any]:
    out = subprocess.run(
        ["wrk", "-t2", f"-c{C}", f"-d{seconds}s", "--latency", "-s", str(script), url],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    rps = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))  # type: ignore[union-attr]
    requests = int(re.search(r"(\d+) requests in", out).group(1))  # type: ignore[union-attr]
    p50 = re.search(r"50%\s+([\d.]+)(us|ms|s)", out)
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    scale = {"us": 0.001, "ms": 1.0, "s": 1000.0}
    return {
        "rps": rps,
        "p50_ms": float(p50.group(1)) * scale[p50.group(2)] if p50 else None,
        "non_2xx": int(errors.group(1)) if errors else 0,
        "requests": requests,
    }


def measured(url: str, script: Path, seconds: int, pids: list[int]) -> dict[str, Any]:
    """`run_wrk`, plus the CPU the row's gateway processes spent per call (microseconds)."""
    before = sum(cpu_seconds(pid) for pid in pids)
    row = run_wrk(url, script, seconds)
    spent = sum(cpu_seconds(pid) for pid in pids) - before
    row["cpu_us_per_call"] = round(spent / max(row["requests"], 1) * 1e6, 1)
    return row


def check_answer(url: str, tool: str) -> None:
    """One call first: a row measuring errors would be worthless."""
    import httpx

    script_body = json.loads(re.search(r"wrk.body = (.*)", wrk_script(tool)).group(1))  # type: ignore[union-attr]
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": PROTOCOL,
        "mcp-method": "tools/call",
        "mcp-name": tool,
    }
    answer = httpx.post(url, content=script_body, headers=headers, timeout=30)
    if (
        answer.status_code != 200
        or '"isError":true' in answer.text.replace(" ", "")
        or "hi" not in answer.text
    ):
        raise SystemExit(f"{url} {tool}: {answer.status_code} {answer.text[:300]}")


def await_ready(url: str, timeout: float = 90) -> None:
    """Until `/readyz` of the gateway at `url` answers 200 with its backends connected."""
    import time

    import httpx

    deadline = time.monotonic() + timeout
    ready = url.removesuffix("/mcp") + "/readyz"
    while time.monotonic() < deadline:
        try:
            answer = httpx.get(ready, timeout=5)
            if answer.status_code == 200 and not answer.json()["backends_not_connected"]:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"{ready}: not ready within {timeout:.0f} s")


async def drop_schema(base: str, schema: str) -> None:
    from sqlalchemy import text

    from toolweave.store import Database

    engine = Database.from_url(base)._create_engine()
    try:
        async with engine.begin() as conn:
            await conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
    finally:
        await engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds; the median is kept")
    parser.add_argument(
        "--only",
        default="",
        help="only the rows whose name contains this (e.g. 2025-11-25: the session store)",
    )
    parser.add_argument("--postgres", default="postgresql://postgres@127.0.0.1:5432/test")
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    args = parser.parse_args()
    haproxy = shutil.which("haproxy") or "/usr/sbin/haproxy"
    if not shutil.which("wrk") or not Path(haproxy).exists():
        raise SystemExit("needs wrk and haproxy (apt-get install wrk haproxy)")
    install_signal_handlers()
    schema = f"tw_bench_replicas_{uuid.uuid4().hex[:10]}"
    rows: dict[str, dict[str, Any]] = {}
    with ProcessGroup() as group:
        work = group.log_dir
        print(f"logs and configs: {work}", file=sys.stderr)
        backend = start_backend(group, "b1", json_response=True)
        backend_port = int(backend.url.rsplit(":", 1)[1].split("/")[0])
        config = work / "toolweave.yaml"
        database = f"{args.postgres}{'&' if '?' in args.postgres else '?'}schema={schema}"
        config.write_text(
            yaml.safe_dump(
                {
                    "gateway": {"database": database, "redis_url": args.redis, "log_level": "warning"},
                    "backends": [
                        {"name": "b1", "url": backend.url, "concurrent": True},
                        {"name": "py", "python": "bench.pyecho"},
                    ],
                },
                sort_keys=False,
            )
        )
        env = {
            "TOOLWEAVE_SECRET_KEY": "bench-replicas",
            # this checkout's own code, whichever tree the virtualenv was installed from
            "PYTHONPATH": os.pathsep.join(str(ROOT / part) for part in ("src", "")),
        }
        ports = [free_port(), free_port()]
        replicas = [
            group.start(
                f"replica{i}",
                [str(venv_bin("toolweave")), "serve", "-c", str(config), "--port", str(port)],
                env=env,
            )
            for i, port in enumerate(ports)
        ]
        local_config = work / "toolweave-local.yaml"  # the same, without Redis: sessions stay local
        local_config.write_text(
            yaml.safe_dump(
                {
                    "gateway": {"database": database, "log_level": "warning"},
                    "backends": [{"name": "py", "python": "bench.pyecho"}],
                },
                sort_keys=False,
            )
        )
        local_port, workers_port = free_port(), free_port()
        local = group.start(
            "local",
            [str(venv_bin("toolweave")), "serve", "-c", str(local_config), "--port", str(local_port)],
            env=env,
        )
        workers = group.start(
            "workers",
            [
                str(venv_bin("toolweave")),
                "serve",
                "-c",
                str(config),
                "--port",
                str(workers_port),
                "--workers",
                "2",
            ],
            env=env,
        )
        for managed, port in [
            *zip(replicas, ports, strict=True),
            (local, local_port),
            (workers, workers_port),
        ]:
            wait_port(managed, port, 90)

        def proxy(name: str, targets: list[int]) -> str:
            front = free_port()
            path = work / f"{name}.cfg"
            path.write_text(haproxy_config(front, targets))
            managed = group.start(name, [haproxy, "-f", str(path), "-db"])
            wait_port(managed, front, 10)
            return f"http://127.0.0.1:{front}/mcp"

        bare = proxy("haproxy-bare", [backend_port])
        one = proxy("haproxy-one", ports[:1])
        two = proxy("haproxy-two", ports)
        direct = f"http://127.0.0.1:{ports[0]}/mcp"
        local_url = f"http://127.0.0.1:{local_port}/mcp"
        workers_url = f"http://127.0.0.1:{workers_port}/mcp"
        gateways = [replicas[0].pid]
        both = [replica.pid for replica in replicas]
        plan: list[tuple[str, str, str, list[int], str | None]] = [
            ("bare SDK server behind HAProxy", bare, "echo", [], None),
            ("1 replica, direct", direct, "b1__echo", gateways, None),
            ("1 replica behind HAProxy", one, "b1__echo", gateways, None),
            ("2 replicas behind HAProxy", two, "b1__echo", both, None),
            ("1 replica behind HAProxy, in-process tool", one, "py__echo", gateways, None),
            ("2 replicas behind HAProxy, in-process tool", two, "py__echo", both, None),
            ("1 replica, direct, in-process tool", direct, "py__echo", gateways, None),
            ("serve --workers 2, direct, in-process tool", workers_url, "py__echo", [workers.pid], None),
            ("2025-11-25 session, 1 replica, shared store", direct, "py__echo", gateways, direct),
            ("2025-11-25 session, 1 replica, local sessions", local_url, "py__echo", [local.pid], local_url),
            ("2025-11-25 session, 2 replicas behind HAProxy", two, "py__echo", both, two),
        ]
        plan = [row for row in plan if args.only in row[0]]
        await_ready(workers_url)
        scripts: dict[str, Path] = {}
        for name, url, tool, _pids, session_at in plan:
            script = work / f"row{len(scripts)}.lua"
            if session_at is None:
                check_answer(url, tool)
                script.write_text(wrk_script(tool))
            else:
                script.write_text(legacy_script(tool, open_session(session_at)))
            scripts[name] = script
            run_wrk(url, script, 2)  # warm-up
        rounds: dict[str, list[dict[str, Any]]] = {name: [] for name, *_ in plan}
        load_before = os.getloadavg()
        for _ in range(args.rounds):  # interleaved: a busy moment of the machine hits every row alike
            for name, url, _tool, pids, _session_at in plan:
                rounds[name].append(measured(url, scripts[name], args.seconds, pids))
        load_after = os.getloadavg()
        for name, runs in rounds.items():
            rows[name] = sorted(runs, key=lambda row: row["rps"])[len(runs) // 2]
            rows[name]["rps_all"] = [row["rps"] for row in runs]
            rows[name]["cpu_us_all"] = [row["cpu_us_per_call"] for row in runs]
            print(
                f"{name:48} {rows[name]['rps']:7.0f} req/s  p50 {rows[name]['p50_ms']} ms  "
                f"cpu/call {sorted(rows[name]['cpu_us_all'])[len(runs) // 2]} us  non-2xx {rows[name]['non_2xx']}",
                file=sys.stderr,
            )
    asyncio.run(drop_schema(args.postgres, schema))
    summary: dict[str, Any] = {"rows": rows, "load_average": {"before": load_before, "after": load_after}}
    for name, (faster, slower) in RATIOS.items():
        if faster in rows and slower in rows:
            summary[name] = round(rows[faster]["rps"] / rows[slower]["rps"], 2)
    shared = rows.get("2025-11-25 session, 1 replica, shared store")
    alone = rows.get("2025-11-25 session, 1 replica, local sessions")
    if shared is not None and alone is not None:
        summary["session_store_cpu_us_per_call"] = round(
            sorted(shared["cpu_us_all"])[len(shared["cpu_us_all"]) // 2]
            - sorted(alone["cpu_us_all"])[len(alone["cpu_us_all"]) // 2],
            1,
        )
        summary["session_store_p50_ms"] = round((shared["p50_ms"] or 0) - (alone["p50_ms"] or 0), 3)
    print(json.dumps(summary))


RATIOS = {
    "two_vs_one_behind_haproxy": ("2 replicas behind HAProxy", "1 replica behind HAProxy"),
    "one_vs_bare": ("1 replica behind HAProxy", "bare SDK server behind HAProxy"),
    "two_vs_one_in_process": (
        "2 replicas behind HAProxy, in-process tool",
        "1 replica behind HAProxy, in-process tool",
    ),
    "workers2_vs_one_direct_in_process": (
        "serve --workers 2, direct, in-process tool",
        "1 replica, direct, in-process tool",
    ),
}
"""Throughput ratios in the summary: (numerator row, denominator row)."""


if __name__ == "__main__":
    main()
