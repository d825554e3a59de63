"""Per-tool health: `GET /api/v1/stats` and the dashboard, from rolled-up rows (never the run records):
calls, error rate, p50/p95 per tool and backend; tenants see their own calls; gateways sharing a
database add up."""

from __future__ import annotations

import random
import re

import mcp_types as types
from sqlalchemy import text

from support.api import GREETER, ApiApp, AppFactory
from support.configs import python_backend
from toolweave.services.stats import ToolStats
from toolweave.store.stats import StatsRepository, Tally, bucket_of, percentile

CONFIG = {"backends": [python_backend()], "composite_tools": [GREETER]}


def test_percentiles_of_the_rolled_up_histogram_are_within_a_bucket() -> None:
    rng = random.Random(7)
    latencies = [rng.uniform(1.0, 100.0) for _ in range(5000)] + [
        rng.uniform(800.0, 1200.0) for _ in range(100)
    ]
    tally = Tally()
    for ms in latencies:
        tally.add_call(ms, is_error=False)
    ordered = sorted(latencies)
    for fraction in (0.5, 0.95, 0.99):
        exact = ordered[int(fraction * len(ordered)) - 1]
        estimate = percentile(tally.histogram, fraction)
        assert estimate is not None and abs(estimate - exact) / exact < 0.13, (fraction, exact, estimate)
    assert percentile({}, 0.5) is None
    assert bucket_of(0.0) == 0 and bucket_of(1e12) == bucket_of(1e15)  # bounded


async def call(api: ApiApp, key: str | None, name: str, arguments: dict) -> None:
    async with api.client(key) as client:
        answer = await client.post(f"/api/v1/tools/{name}/call", json=arguments)
        assert answer.status_code == 200, answer.text
        assert answer.json()["isError"] is (name == "py__explode"), answer.text


async def test_stats_per_tool_and_backend(make_app: AppFactory) -> None:
    api = await make_app(CONFIG)
    for _ in range(3):
        await call(api, None, "py__greet", {"name": "x"})
    await call(api, None, "py__explode", {})
    await call(api, None, "greeter", {"operation": "greet", "name": "y"})
    async with api.client() as client:
        body = (await client.get("/api/v1/stats")).json()
        day = (await client.get("/api/v1/stats", params={"window": "day"})).json()
        assert (await client.get("/api/v1/stats", params={"window": "week"})).status_code == 422
    tools = {t["tool"]: t for t in body["tools"]}
    assert tools["py__greet"]["calls"] == 4  # 3 direct, 1 inside the router
    assert tools["py__greet"]["errors"] == 0 and tools["py__greet"]["backend"] == "py"
    assert (tools["py__explode"]["calls"], tools["py__explode"]["errorRate"]) == (1, 1.0)
    assert tools["greeter"]["backend"] == "(composite)" and tools["greeter"]["calls"] == 1
    assert (
        tools["py__greet"]["p50Ms"] is not None and tools["py__greet"]["p95Ms"] >= tools["py__greet"]["p50Ms"]
    )
    assert body["bucketSeconds"] == 60 and len(tools["py__greet"]["series"]) == 60
    assert sum(point["calls"] for point in tools["py__greet"]["series"]) == 4
    backends = {b["backend"]: b for b in body["backends"]}
    assert backends["py"]["calls"] == 5 and backends["py"]["errors"] == 1
    day_tools = {t["tool"]: t for t in day["tools"]}
    assert day["bucketSeconds"] == 3600 and len(day_tools["py__greet"]["series"]) == 24
    assert day_tools["py__greet"]["calls"] == 4

    # rolled up: the report reads the stats rows, not the run records
    async with api.runtime.db.write() as conn:
        await conn.execute(text("DELETE FROM run_steps"))
        await conn.execute(text("DELETE FROM runs"))
    async with api.client() as client:
        again = {t["tool"]: t["calls"] for t in (await client.get("/api/v1/stats")).json()["tools"]}
    assert again["py__greet"] == 4


async def test_tenants_see_their_own_calls_and_gateways_add_up(make_app: AppFactory) -> None:
    api = await make_app(CONFIG, require_auth=True)
    acme, other = await api.key("acme"), await api.key("other")
    await call(api, acme, "py__greet", {"name": "a"})
    await call(api, other, "py__numbers", {})
    # another gateway on the same database: its tallies add to the same rows
    elsewhere = ToolStats(StatsRepository(api.runtime.db))
    entry = api.gateway.catalog.get("py__greet")
    elsewhere.observe(entry, types.CallToolResult(content=[], is_error=True), 0.002, "acme")
    await elsewhere.flush()
    async with api.client(acme) as client:
        mine = (await client.get("/api/v1/stats")).json()["tools"]
        assert [(t["tool"], t["calls"], t["errors"]) for t in mine] == [("py__greet", 2, 1)]
        assert (await client.get("/api/v1/stats", params={"tenant": "other"})).status_code == 403
    everyone = await api.runtime.stats.report("hour")
    assert {(h.name, h.total.calls) for h in everyone.tools} == {("py__greet", 2), ("py__numbers", 1)}
    assert [
        h.total.calls for h in (await api.runtime.stats.report("hour", None)).tools
    ] == []  # the operator's own


async def test_the_dashboard_draws_each_tool(sqlite_app: AppFactory) -> None:
    api = await sqlite_app(CONFIG)
    await call(api, None, "py__greet", {"name": "x"})
    await call(api, None, "py__explode", {})
    async with api.client() as client:
        page = await client.get("/dashboard")
        day = await client.get("/dashboard", params={"window": "day"})
    assert page.status_code == 200 and day.status_code == 200
    rows = re.findall(r'<tr data-tool="([^"]+)">', page.text)
    assert set(rows) == {"py__greet", "py__explode"}
    explode = page.text[page.text.index('data-tool="py__explode"') :]
    explode = explode[: explode.index("</tr>")]
    assert "100.0 %" in explode and "<svg" in explode and 'class="chart-errors"' in explode
    assert 'class="chart-calls"' not in explode  # its one call failed: the bar is all error
