"""`python -m bench.security.session_flood [--sessions N]`: one API key floods `initialize`.

Two gateways side by side in one run, each in its own process (`toolweave serve --auth` on a
fresh SQLite file): one with the per-key and per-tenant caps out of the way
(`[limits] mcp_sessions_per_key = mcp_sessions_per_tenant = 10000`, i.e. as before the caps),
one with the defaults (16 per key, 64 per tenant). For each: the gateway's RSS before and after
the flood (N initialize requests by one key, 16 at a time), how many were accepted, and the
p50/p99 of another tenant's `initialize` (each session closed again) right after the flood: whether
it still gets a session at all is the point (past the global cap it gets 503).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "b", "version": "1"},
    },
}
TOOLWEAVE = [str(Path(sys.executable).parent / "toolweave")]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def create_key(config: Path, tenant: str) -> str:
    done = subprocess.run(
        [*TOOLWEAVE, "keys", "create", "--config", str(config), "--tenant", tenant, "--scopes", "tools:read"],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip().splitlines()[-1]


def start_server(config: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*TOOLWEAVE, "serve", "--config", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )


async def run_one(label: str, limits: str, sessions: int, folder: Path) -> dict[str, object]:
    port = free_port()
    config = folder / f"{label}.toml"
    config.write_text(
        f'[gateway]\ndatabase = "sqlite:///{folder / label}.db"\nport = {port}\n[auth]\nrequired = true\n{limits}'
    )
    flooder, bystander = create_key(config, "flood"), create_key(config, "other")
    process = start_server(config)
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        async with httpx.AsyncClient(timeout=30) as http:
            for _ in range(300):
                with contextlib.suppress(httpx.HTTPError):
                    await http.get(f"http://127.0.0.1:{port}/metrics")
                    break
                await asyncio.sleep(0.1)
            before = rss_mb(process.pid)
            semaphore = asyncio.Semaphore(16)
            statuses: list[int] = []

            async def one(key: str) -> int:
                async with semaphore:
                    auth = {**HEADERS, "Authorization": f"Bearer {key}"}
                    return (await http.post(url, json=INIT, headers=auth)).status_code

            started = time.perf_counter()
            statuses = list(await asyncio.gather(*(one(flooder) for _ in range(sessions))))
            flood_seconds = time.perf_counter() - started
            after = rss_mb(process.pid)
            latencies, other_statuses = [], []
            other = {**HEADERS, "Authorization": f"Bearer {bystander}"}
            for _ in range(50):  # open a session and close it again, like a short-lived client
                begun = time.perf_counter()
                answer = await http.post(url, json=INIT, headers=other)
                latencies.append((time.perf_counter() - begun) * 1000)
                other_statuses.append(answer.status_code)
                if "mcp-session-id" in answer.headers:
                    await http.delete(
                        url, headers={**other, "mcp-session-id": answer.headers["mcp-session-id"]}
                    )
    finally:
        process.terminate()
        process.wait(10)
    latencies.sort()
    return {
        "gateway": label,
        "accepted": statuses.count(200),
        "refused_429": statuses.count(429),
        "refused_503": statuses.count(503),
        "flood_s": round(flood_seconds, 1),
        "rss_before_mb": round(before),
        "rss_after_mb": round(after),
        "other_ok": other_statuses.count(200),
        "other_p50_ms": round(statistics.median(latencies), 1),
        "other_p99_ms": round(latencies[int(len(latencies) * 0.99) - 1], 1),
    }


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--sessions", type=int, default=2000)
    args = parser.parse_args()
    uncapped = "[limits]\nmcp_sessions_per_key = 10000\nmcp_sessions_per_tenant = 10000\n"
    with tempfile.TemporaryDirectory() as folder:
        os.environ.setdefault("TOOLWEAVE_SECRET_KEY", "bench-secret-key-for-the-session-flood")
        rows = [
            await run_one("uncapped", uncapped, args.sessions, Path(folder)),
            await run_one("capped", "", args.sessions, Path(folder)),
        ]
    print(
        f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; {args.sessions} initialize by one key"
    )
    for row in rows:
        print("  ".join(f"{key}={value}" for key, value in row.items()))
    print(json.dumps(rows))


if __name__ == "__main__":
    asyncio.run(main())
