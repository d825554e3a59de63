"""What sharing 2025-11-25 sessions costs per call: `python -m bench.session_store [--before TREE]`.

Side by side in one run, each variant in its own process, in interleaved rounds (the median kept):

- `local`: this tree, sessions in the process only (no `redis_url`);
- `shared`: this tree, sessions and their SSE events in Redis (`server/mcp/shared.py`, `events.py`);
- `before`: another toolweave tree (`--before`, e.g. a `git worktree` of an older commit), shared;
- `postgres` (`--postgres URL`): this tree, sessions shared through PostgreSQL (`shared_db.py`), no Redis;
- `before-pg` (`--before-postgres TREE`, with `--postgres`): another tree, shared through PostgreSQL.

Each process serves one gateway (the in-process `bench/pyecho.py` tool) under uvicorn on loopback,
opens one 2025-11-25 session and calls `py__echo` on it over HTTP with an httpx client in the same
process: `--calls` calls one after another (c=1: CPU per call and p50), then the same number with 16
in flight (c=16: CPU per call). CPU is the whole process's (`time.process_time`: server, client, the
event store's writes behind), so a difference between variants is the server's. The last line is one
JSON object. Needs Redis (`--redis`, default this machine's).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CHILD = "--child"
C = 16
HEADERS = {
    "accept": "application/json, text/event-stream",
    "content-type": "application/json",
    "mcp-protocol-version": "2025-11-25",
}


async def _measure(redis_url: str | None, calls: int) -> dict[str, float]:
    """In the child: CPU µs per call at c=1 and c=16, and the c=1 p50 in ms."""
    import httpx
    import uvicorn

    from toolweave import Gateway
    from toolweave.config import parse_config
    from toolweave.server.app import create_app

    cfg = parse_config(
        {
            "gateway": {"database": "sqlite:///:memory:", "log_level": "warning"},
            "backends": [{"name": "py", "python": "bench.pyecho"}],
        }
    )
    assert cfg is not None
    async with Gateway(cfg) as gateway:
        sharing: Any = None
        db: Any = None
        schema = f"tw_bench_sessions_{uuid.uuid4().hex[:10]}"
        if redis_url is not None and redis_url.startswith("postgresql"):
            from toolweave.server.mcp.shared_db import DatabaseSessionSharing
            from toolweave.store import Database

            db = Database.from_url(f"{redis_url}{'&' if '?' in redis_url else '?'}schema={schema}")
            await db.start()
            sharing = DatabaseSessionSharing(db, idle_seconds=600)
        elif redis_url is not None:
            from toolweave.server.mcp.shared import SessionSharing

            namespace = f"toolweave:bench-sessions:{uuid.uuid4().hex[:10]}"
            sharing = SessionSharing(redis_url, namespace, idle_seconds=600)
        app = create_app(gateway, start_gateway=False, sharing=sharing)
        server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning"))
        server.capture_signals = contextlib.nullcontext  # type: ignore[method-assign]
        serving = asyncio.create_task(server.serve())
        while not server.started:  # noqa: ASYNC110 - uvicorn offers no event to wait on
            await asyncio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        url = f"http://127.0.0.1:{port}/mcp"
        try:
            async with httpx.AsyncClient(timeout=30, limits=httpx.Limits(max_connections=C)) as http:
                return await _calls(http, url, calls)
        finally:
            server.should_exit = True
            await serving
            if db is not None:
                from sqlalchemy import text

                async with db.write() as conn:
                    await conn.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
                await db.close()


async def _calls(http: Any, url: str, calls: int) -> dict[str, float]:
    opened = await http.post(
        url,
        json={
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-11-25",
                "capabilities": {},
                "clientInfo": {"name": "bench", "version": "0"},
            },
        },
        headers=HEADERS,
    )
    headers = {**HEADERS, "mcp-session-id": opened.headers["mcp-session-id"]}
    await http.post(url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    ids = iter(range(1, 1 << 62))

    async def call() -> float:
        body = {"jsonrpc": "2.0", "id": next(ids), "method": "tools/call", "params": {"name": "py__echo"}}
        started = time.perf_counter()
        answer = await http.post(url, json=body, headers=headers)
        assert answer.status_code == 200 and '"hi"' in answer.text, (answer.status_code, answer.text[:300])
        return time.perf_counter() - started

    for _ in range(max(50, calls // 10)):
        await call()
    cpu = time.process_time()
    walls = [await call() for _ in range(calls)]
    one = (time.process_time() - cpu) / calls * 1e6
    left = calls

    async def worker() -> None:
        nonlocal left
        while left > 0:
            left -= 1
            await call()

    cpu = time.process_time()
    await asyncio.gather(*(worker() for _ in range(C)))
    many = (time.process_time() - cpu) / calls * 1e6
    await asyncio.sleep(0.2)  # the event store's last batch is written (and counted) before the exit
    return {"c1_cpu_us": one, "c1_p50_ms": statistics.median(walls) * 1e3, "c16_cpu_us": many}


def _child(argv: list[str]) -> None:
    redis_url = None if argv[0] == "-" else argv[0]
    print(json.dumps(asyncio.run(_measure(redis_url, int(argv[1])))))


def _run(tree: Path, redis_url: str | None, calls: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join((str(tree / "src"), str(ROOT)))}
    out = subprocess.run(
        [sys.executable, "-m", "bench.session_store", CHILD, redis_url or "-", str(calls)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"{tree} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, help="another toolweave tree (its src/ is imported), shared")
    parser.add_argument("--calls", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0")
    parser.add_argument(
        "--postgres", help="also `postgres`: this tree, sessions shared through PostgreSQL (no Redis)"
    )
    parser.add_argument("--before-postgres", type=Path, help="another tree, shared through `--postgres`")
    args = parser.parse_args()
    variants: list[tuple[str, Path, str | None]] = [("local", ROOT, None), ("shared", ROOT, args.redis)]
    if args.postgres:
        variants.append(("postgres", ROOT, args.postgres))
    if args.before is not None:
        variants.append(("before", args.before.resolve(), args.redis))
    if args.before_postgres is not None and args.postgres:
        variants.append(("before-pg", args.before_postgres.resolve(), args.postgres))
    seen: dict[str, list[dict[str, float]]] = {name: [] for name, _, _ in variants}
    load_before = os.getloadavg()
    for round_ in range(args.rounds):
        turn = variants[round_ % len(variants) :] + variants[: round_ % len(variants)]  # rotating order
        for name, tree, redis_url in turn:
            seen[name].append(_run(tree, redis_url, args.calls))
    summary: dict[str, Any] = {"calls": args.calls, "rounds": args.rounds}
    print(f"{'variant':8} {'c=1 CPU µs/call':>16} {'c=1 p50 ms':>11} {'c=16 CPU µs/call':>17}")
    for name, _tree, _redis in variants:
        figures = {key: round(statistics.median(r[key] for r in seen[name]), 3) for key in seen[name][0]}
        summary[name] = {**figures, "rounds": seen[name]}
        print(
            f"{name:8} {figures['c1_cpu_us']:16.1f} {figures['c1_p50_ms']:11.3f} {figures['c16_cpu_us']:17.1f}"
        )
    for name, _tree, _redis in variants[1:]:
        summary[f"{name}_minus_local"] = {
            key: round(summary[name][key] - summary["local"][key], 3) for key in seen["local"][0]
        }
    summary["load_average"] = {"before": load_before, "after": os.getloadavg()}
    print(json.dumps(summary))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == CHILD:
        _child(sys.argv[2:])
    else:
        main()
