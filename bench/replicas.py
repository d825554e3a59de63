"""Replicas behind HAProxy: throughput of `tools/call` at c=16 with `wrk`, in one run, side by side.

    .venv/bin/python -m bench.replicas [--seconds 10] [--postgres URL] [--redis URL]

Rows (each `wrk -c16 -t2` for `--seconds`, 2026-07-28 plain JSON `tools/call`, no session):

- the bare SDK server (`bench/backend_server.py`, `echo`) behind HAProxy: the ceiling of the
  backend every gateway row calls;
- one `toolweave serve` replica, direct and behind HAProxy (`b1__echo`, relayed to that backend);
- two replicas behind HAProxy (round robin), sharing one PostgreSQL schema and Redis;
- the same two rows with an in-process Python tool (`bench/pyecho.py`): the gateway's own work.

Needs wrk and haproxy (Debian) and PostgreSQL + Redis (defaults: this machine's). Prints a
table and, last, one JSON line. Every process it starts is stopped on exit. Read the ratios
on a shared 2-core machine, not the absolute figures: the gateways, the backend, HAProxy and
wrk all share the two cores.
"""

from __future__ import annotations

import argparse
import asyncio
import json
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
PROTOCOL = "2026-07-28"


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
    p50 = re.search(r"50%\s+([\d.]+)(us|ms|s)", out)
    errors = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    scale = {"us": 0.001, "ms": 1.0, "s": 1000.0}
    return {
        "rps": rps,
        "p50_ms": float(p50.group(1)) * scale[p50.group(2)] if p50 else None,
        "non_2xx": int(errors.group(1)) if errors else 0,
    }


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
            "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
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
        for managed, port in zip(replicas, ports, strict=True):
            wait_port(managed, port, 60)

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
        plan = [
            ("bare SDK server behind HAProxy", bare, "echo"),
            ("1 replica, direct", direct, "b1__echo"),
            ("1 replica behind HAProxy", one, "b1__echo"),
            ("2 replicas behind HAProxy", two, "b1__echo"),
            ("1 replica behind HAProxy, in-process tool", one, "py__echo"),
            ("2 replicas behind HAProxy, in-process tool", two, "py__echo"),
        ]
        rounds: dict[str, list[dict[str, Any]]] = {name: [] for name, _, _ in plan}
        for _name, url, tool in plan:
            check_answer(url, tool)
            (work / f"{tool}.lua").write_text(wrk_script(tool))
            run_wrk(url, work / f"{tool}.lua", 2)  # warm-up
        for _ in range(args.rounds):  # interleaved: a busy moment of the machine hits every row alike
            for name, url, tool in plan:
                rounds[name].append(run_wrk(url, work / f"{tool}.lua", args.seconds))
        for name, measured in rounds.items():
            rows[name] = sorted(measured, key=lambda row: row["rps"])[len(measured) // 2]
            rows[name]["rps_all"] = [row["rps"] for row in measured]
            print(f"{name:44} {rows[name]['rps']:9.0f} req/s  p50 {rows[name]['p50_ms']} ms", file=sys.stderr)
    asyncio.run(drop_schema(args.postgres, schema))
    one_rps = rows["1 replica behind HAProxy"]["rps"]
    summary = {
        "rows": rows,
        "two_vs_one_behind_haproxy": round(rows["2 replicas behind HAProxy"]["rps"] / one_rps, 2),
        "one_vs_bare": round(one_rps / rows["bare SDK server behind HAProxy"]["rps"], 2),
        "two_vs_one_in_process": round(
            rows["2 replicas behind HAProxy, in-process tool"]["rps"]
            / rows["1 replica behind HAProxy, in-process tool"]["rps"],
            2,
        ),
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
