"""`python -m bench.security [--samples N] [--only NAME,...]`: a bystander tenant's latency under attack.

One `toolweave serve --auth` on a fresh SQLite file, with an in-process Python tool `py__greet`.
Tenant `bob` calls it over REST, one call at a time; tenant `mallory` runs each attack of issue 26
(hardening II) in its own process. For each attack, in one run: bob's p50 and p99 with the gateway
idle, then while the attack runs (after a second of warm-up), and their ratios — the goal is
p50 ≤ 3× idle and p99 ≤ 10× idle. Idle and attack windows alternate, attack by attack, so both
share the machine's load; read the ratios, not the milliseconds. Also printed: what the attacker
got (the limits that answered it).

Attacks: `flood` (a federated socket sending notifications as fast as it can, reconnecting when
closed), `schemas` (a tenant admin storing and deleting a workflow whose parameters hold 4,900
properties, and registering federated manifests of three such schemas), `churn` (four loops
registering and dropping 256-tool namespaces), `streams` (holding as many `/api/v1/events` streams
as it can), `login` (wrong keys at `POST /login` as fast as it can), `calls` (four loops of 50-call
batches).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import multiprocessing
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

import httpx
import orjson

from bench.security.session_flood import TOOLWEAVE, free_port

TOOLS_MODULE = '''
import toolweave


@toolweave.tool
def greet(name: str) -> str:
    """Greet someone."""
    return f"Hello, {name}."
'''
NOTE = orjson.dumps(
    {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": 1, "progress": 1}}
).decode()
ATTACKS = ("flood", "schemas", "churn", "streams", "login", "calls")


def create_key(config: Path, tenant: str, scopes: str) -> str:
    done = subprocess.run(
        [*TOOLWEAVE, "keys", "create", "--config", str(config), "--tenant", tenant, "--scopes", scopes],
        capture_output=True,
        text=True,
        check=True,
    )
    return done.stdout.strip().splitlines()[-1]


def wide_schema(count: int) -> dict[str, Any]:
    return {"type": "object", "properties": {f"p{i}": {"type": "string"} for i in range(count)}}


# -- the attacks (each in its own process, until terminated) --------------------------------------


async def _federated(base: str, key: str, namespace: str, tools: list[dict[str, Any]] | None) -> str:
    """One federated connection: flood notifications (`tools` None) or register `tools` and leave."""
    from websockets.asyncio.client import connect

    url = base.replace("http://", "ws://") + f"/api/v1/federation?namespace={namespace}"
    async with connect(url, additional_headers={"Authorization": f"Bearer {key}"}, max_size=None) as socket:
        if tools is None:
            while True:
                await socket.send(NOTE)
        while True:
            message = orjson.loads(await socket.recv())
            method, request_id = message.get("method"), message.get("id")
            if method == "initialize":
                result: dict[str, Any] = {
                    "protocolVersion": "2025-06-18",
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "attacker", "version": "1"},
                }
            elif method == "tools/list":
                result = {"tools": tools}
            elif method == "notifications/toolweave/registration":
                return "accepted" if message["params"]["accepted"] else "refused"
            else:
                result = {}
            if request_id is not None:
                await socket.send(
                    orjson.dumps({"jsonrpc": "2.0", "id": request_id, "result": result}).decode()
                )


async def _loop(outcomes: Any, step: Any) -> None:
    while True:
        try:
            outcomes.put(await step())
        except Exception as error:  # noqa: BLE001 - every failure is an outcome to count
            code = getattr(getattr(error, "rcvd", None), "code", None)
            outcomes.put(f"closed {code}" if code else type(error).__name__)
            await asyncio.sleep(0.05)


async def attack(name: str, base: str, key: str, outcomes: Any) -> None:
    auth = {"Authorization": f"Bearer {key}"}
    async with httpx.AsyncClient(base_url=base, headers=auth, timeout=60) as http:
        if name == "flood":
            await _loop(outcomes, lambda: _federated(base, key, "flood", None))
        elif name == "schemas":
            big = [
                {"name": f"t{i}", "description": "wide", "inputSchema": wide_schema(4900)} for i in range(3)
            ]
            workflow = {
                "name": "wide",
                "description": "Wide parameters.",
                "parameters": wide_schema(4900),
                "steps": [{"id": "a", "tool": "py/greet", "arguments": {"name": "x"}}],
            }

            async def store_and_register() -> str:
                stored = await http.post("/api/v1/composite-tools", json={"definition": workflow})
                await http.delete("/api/v1/composite-tools/wide")
                registered = await _federated(base, key, "wide", big)
                return f"stored {stored.status_code}, manifest {registered}"

            await _loop(outcomes, store_and_register)
        elif name == "churn":
            tools = [{"name": f"t{i}", "inputSchema": {"type": "object"}} for i in range(256)]
            await asyncio.gather(
                *(_loop(outcomes, lambda n=n: _federated(base, key, f"churn{n}", tools)) for n in range(4))
            )
        elif name == "streams":
            async with contextlib.AsyncExitStack() as stack:
                for _ in range(100):
                    response = await stack.enter_async_context(http.stream("GET", "/api/v1/events"))
                    outcomes.put(f"stream {response.status_code}")
                await asyncio.sleep(3600)
        elif name == "login":
            async with httpx.AsyncClient(base_url=base, timeout=60) as browser:
                page = await browser.get("/login")
                csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
                data = {"csrf": csrf.group(1) if csrf else "", "next": "/"}

                async def guess() -> str:
                    answer = await browser.post("/login", data={**data, "key": "tw_" + os.urandom(16).hex()})
                    return f"login {answer.status_code}"

                await _loop(outcomes, guess)
        elif name == "calls":
            calls = {"calls": [{"name": "py__greet", "arguments": {"name": "m"}} for _ in range(50)]}

            async def batch() -> str:
                answer = await http.post("/api/v1/tools/batch", json=calls)
                return f"batch {answer.status_code}"

            await asyncio.gather(*(_loop(outcomes, batch) for _ in range(4)))


def _attack_process(name: str, base: str, key: str, outcomes: Any) -> None:
    asyncio.run(attack(name, base, key, outcomes))


# -- the bystander ------------------------------------------------------------------------------


async def bystander(http: httpx.AsyncClient, samples: int) -> list[float]:
    latencies = []
    for _ in range(samples):
        started = time.perf_counter()
        answer = await http.post("/api/v1/tools/py__greet/call", json={"name": "bob"})
        latencies.append((time.perf_counter() - started) * 1000)
        if answer.status_code != 200 or answer.json().get("isError"):
            raise RuntimeError(f"the bystander's call failed: {answer.status_code} {answer.text[:200]}")
        await asyncio.sleep(0.01)
    return latencies


def p99(values: list[float]) -> float:
    return (
        sorted(values)[max(0, int(len(values) * 0.99) - 1)]
        if len(values) < 100
        else statistics.quantiles(values, n=100)[98]
    )


async def run(samples: int, only: list[str], folder: Path) -> list[dict[str, Any]]:
    port = free_port()
    (folder / "bench_tools.py").write_text(TOOLS_MODULE)
    config = folder / "gateway.toml"
    config.write_text(
        f'[gateway]\ndatabase = "sqlite:///{folder / "gw.db"}"\nport = {port}\nlog_level = "error"\n'
        '[auth]\nrequired = true\n[[backends]]\nname = "py"\npython = "bench_tools"\n'
    )
    env = {**os.environ, "PYTHONPATH": f"{folder}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}
    bob = create_key(config, "bob", "tools:read,tools:call")
    scopes = "tools:read,tools:call,tools:admin,tools:federate"
    mallory = {name: create_key(config, "mallory", scopes) for name in only}  # a key per attack: its
    # penalties (a flooder's key is refused 10 s) and buckets do not carry over to the next attack
    process = subprocess.Popen(  # noqa: ASYNC220 - started once, before anything is measured
        [*TOOLWEAVE, "serve", "--config", str(config)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = f"http://127.0.0.1:{port}"
    rows = []
    try:
        async with httpx.AsyncClient(
            base_url=base, headers={"Authorization": f"Bearer {bob}"}, timeout=120
        ) as http:
            for _ in range(300):
                with contextlib.suppress(httpx.HTTPError):
                    if (
                        await http.post("/api/v1/tools/py__greet/call", json={"name": "b"})
                    ).status_code == 200:
                        break
                await asyncio.sleep(0.1)
            await bystander(http, 20)  # warm up
            for name in only:
                idle = await bystander(http, samples)
                outcomes: Any = multiprocessing.Queue()
                attacker = multiprocessing.Process(
                    target=_attack_process, args=(name, base, mallory[name], outcomes)
                )
                attacker.start()
                await asyncio.sleep(1.0)
                attacked = await bystander(http, samples)
                attacker.terminate()
                attacker.join(10)
                seen: Counter[str] = Counter()
                with contextlib.suppress(Exception):
                    while not outcomes.empty():
                        seen[outcomes.get_nowait()] += 1
                rows.append(
                    {
                        "attack": name,
                        "idle_p50_ms": round(statistics.median(idle), 1),
                        "attack_p50_ms": round(statistics.median(attacked), 1),
                        "p50_ratio": round(statistics.median(attacked) / statistics.median(idle), 2),
                        "idle_p99_ms": round(p99(idle), 1),
                        "attack_p99_ms": round(p99(attacked), 1),
                        "p99_ratio": round(p99(attacked) / p99(idle), 2),
                        "attacker_got": dict(seen.most_common(4)),
                    }
                )
                print(json.dumps(rows[-1]), flush=True)
                await asyncio.sleep(1.0)  # let the gateway settle (closed sockets, expired buckets)
    finally:
        process.terminate()
        process.wait(10)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--samples", type=int, default=100)
    parser.add_argument("--only", default=",".join(ATTACKS))
    args = parser.parse_args()
    only = [name for name in args.only.split(",") if name]
    unknown = sorted(set(only) - set(ATTACKS))
    if unknown:
        sys.exit(f"unknown attack(s) {unknown}; choose from {', '.join(ATTACKS)}")
    os.environ.setdefault("TOOLWEAVE_SECRET_KEY", "bench-secret-key-for-the-security-bench")
    with tempfile.TemporaryDirectory() as folder:
        rows = asyncio.run(run(args.samples, only, Path(folder)))
    print(
        f"\nload average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores; {args.samples} bystander calls a window"
    )
    print("| attack | idle p50 | attack p50 | ×  | idle p99 | attack p99 | × | attacker got |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for row in rows:
        got = ", ".join(f"{k} ×{v}" for k, v in row["attacker_got"].items())
        print(
            f"| {row['attack']} | {row['idle_p50_ms']} ms | {row['attack_p50_ms']} ms | {row['p50_ratio']} "
            f"| {row['idle_p99_ms']} ms | {row['attack_p99_ms']} ms | {row['p99_ratio']} | {got} |"
        )


if __name__ == "__main__":
    main()
