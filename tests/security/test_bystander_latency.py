"""Finding 2: one tenant's heavy call no longer stalls the gateway for the others.

As found: a template squaring a big integer blocked the event loop for seconds (another tenant
waited 6.4 s), and a `pattern` froze it for 9 s. Now one tenant runs the heaviest templates the
limits allow and the worst patterns, back to back from several connections, while another tenant's
p99 latency for a plain call is measured against the same p99 with the gateway idle. The test
asserts a ratio, not a wall clock: the machine may be loaded, but both runs share the load.
"""

from __future__ import annotations

import asyncio
import statistics
import time
from typing import Any

import httpx

from support.api import AppFactory
from support.configs import python_backend

API = "/api/v1"
SAMPLES = 30
"""Bystander calls per window; idle and attack windows alternate `WINDOWS` times, so both see the
same machine load (on a shared, loaded machine the load moves more than anything measured here)."""
WINDOWS = 3
ATTACKERS = 4
MAX_RATIO = 8.0
"""Bystander p99 under attack / idle p99 (the median over the windows, so one spike of the machine's
load does not decide). Before the fix a single heavy render held the loop ~1 s: a ratio ≫ 50."""
IDLE_FLOOR = 0.010
"""An idle p99 below 10 ms counts as 10 ms: scheduling on a loaded 2-core machine is that coarse."""

HEAVY_TEMPLATE = (
    "{% set ns = namespace(n=0) %}{% for i in range(300) %}{% for j in range(300) %}"
    "{% set ns.n = ns.n + j %}{% endfor %}{% endfor %}{{ ns.n }}"
)
"""Just under the step budget: allowed, so it runs to the end (in the compute lane)."""


def heavy_workflow() -> dict[str, Any]:
    return {
        "name": "heavy",
        "description": "As expensive as the limits allow.",
        "parameters": {
            "type": "object",
            "properties": {"t": {"type": "string", "pattern": "^(a+)+$"}},
        },
        "steps": [{"id": "a", "tool": "py/greet", "arguments": {"name": HEAVY_TEMPLATE}}],
    }


def p99(samples: list[float]) -> float:
    return statistics.quantiles(samples, n=100)[98]


async def bystander_latencies(client: httpx.AsyncClient) -> list[float]:
    latencies = []
    for _ in range(SAMPLES):
        started = time.perf_counter()
        response = await client.post(f"{API}/tools/py__greet/call", json={"name": "B"})
        latencies.append(time.perf_counter() - started)
        assert response.status_code == 200 and response.json()["isError"] is False, response.text
        await asyncio.sleep(0.005)
    return latencies


async def attack(client: httpx.AsyncClient, stop: asyncio.Event, completed: list[int]) -> None:
    while not stop.is_set():
        rendered = await client.post(f"{API}/tools/heavy/call", json={"t": "a" * 30})
        assert rendered.json()["isError"] is False, rendered.text
        refused = await client.post(f"{API}/tools/heavy/call", json={"t": "a" * 5000 + "!"})
        assert refused.json()["isError"] is True, refused.text
        completed.append(1)


async def test_another_tenants_p99_stays_within_a_small_multiple_of_idle(sqlite_app: AppFactory) -> None:
    api = await sqlite_app({"backends": [python_backend()]}, require_auth=True)
    attacker_key = await api.key("mallory")
    bystander_key = await api.key("bob")
    async with api.client(attacker_key) as attacker, api.client(bystander_key) as bystander:
        created = await attacker.post(f"{API}/composite-tools", json={"definition": heavy_workflow()})
        assert created.status_code == 201, created.text
        await bystander_latencies(bystander)  # warm up: first calls compile and cache
        ratios: list[float] = []
        completed: list[int] = []
        for _ in range(WINDOWS):
            idle = await bystander_latencies(bystander)
            stop = asyncio.Event()
            attackers = [asyncio.create_task(attack(attacker, stop, completed)) for _ in range(ATTACKERS)]
            try:
                await asyncio.sleep(0.2)
                loaded = await bystander_latencies(bystander)
            finally:
                stop.set()
                await asyncio.gather(*attackers)
            ratios.append(p99(loaded) / max(p99(idle), IDLE_FLOOR))
            print(f"bystander p99 idle {p99(idle) * 1000:.1f} ms, under attack {p99(loaded) * 1000:.1f} ms")
    ratio = statistics.median(ratios)
    print(f"p99 ratios {[round(r, 1) for r in ratios]}, median {ratio:.1f}; {len(completed)} heavy rounds")
    assert completed, "the attacker's heavy calls must have run while the bystander was measured"
    assert ratio < MAX_RATIO, ratios
