"""Finding 12 of hardening II: per-key and per-tenant call rates.

As found: nothing limited how fast one tenant called tools; its batch loops raised a bystander's
p50 ×52. Now `[limits] calls_per_second_per_key` and `calls_per_second_per_tenant` are token
buckets (bursts of two seconds' worth) charged once per top-level call: past one, REST answers
`429 rate_limited` with `Retry-After` and MCP an `isError` naming the setting; other tenants are not
affected. With Redis the buckets are shared by every gateway of the deployment.
"""

from __future__ import annotations

import os
import uuid

import pytest

from support.api import AppFactory
from support.configs import python_backend
from toolweave import Gateway
from toolweave.config import parse_config
from toolweave.config.models import LimitsConfig
from toolweave.executor import Session

API = "/api/v1"


async def test_a_key_past_its_rate_gets_429_with_retry_after_and_others_are_served(
    sqlite_app: AppFactory,
) -> None:
    api = await sqlite_app(
        {
            "backends": [python_backend()],
            "limits": {"calls_per_second_per_key": 2, "calls_per_second_per_tenant": 3},
        },
        require_auth=True,
    )
    first, second = await api.key("mallory"), await api.key("mallory")
    bystander = await api.key("bob")
    async with api.client(first) as one, api.client(second) as two, api.client(bystander) as bob:
        statuses = [
            (await one.post(f"{API}/tools/py__greet/call", json={"name": "x"})).status_code for _ in range(8)
        ]
        assert statuses[:4] == [200] * 4 and set(statuses[4:]) == {429}, statuses  # a burst of 2 s at 2/s
        refused = await one.post(f"{API}/tools/py__greet/call", json={"name": "x"})
        assert refused.status_code == 429 and int(refused.headers["Retry-After"]) >= 1
        assert "limits.calls_per_second_per_key" in refused.json()["error"]["message"]
        by_tenant = [
            (await two.post(f"{API}/tools/py__greet/call", json={"name": "x"})).status_code for _ in range(4)
        ]
        assert 429 in by_tenant, by_tenant  # the tenant's 6-call burst is spent by both keys together
        batch = await two.post(
            f"{API}/tools/batch", json={"calls": [{"name": "py__greet", "arguments": {"name": "x"}}]}
        )
        assert batch.status_code == 429 and "calls_per_second_per_tenant" in batch.json()["error"]["message"]
        served = await bob.post(f"{API}/tools/py__greet/call", json={"name": "B"})
        assert served.status_code == 200 and served.json()["isError"] is False


async def test_over_mcp_and_the_python_api_a_refusal_is_an_iserror_naming_the_limit() -> None:
    config = parse_config({"backends": [python_backend()], "limits": {"calls_per_second_per_key": 1}})
    async with Gateway(config) as gateway:
        executor = gateway.executor(Session(tenant="acme", label="key:tw_test"))
        results = [await executor.call("py__greet", {"name": "x"}) for _ in range(3)]
        assert [r.is_error for r in results] == [False, False, True]
        assert "limits.calls_per_second_per_key" in results[2].content[0].text
        operator = gateway.executor()  # the local operator is not limited
        assert not any([(await operator.call("py__greet", {"name": "x"})).is_error for _ in range(5)])


async def test_with_redis_two_gateways_share_one_bucket() -> None:
    url = os.environ.get("TOOLWEAVE_TEST_REDIS_URL")
    if not url:
        pytest.skip("set TOOLWEAVE_TEST_REDIS_URL (e.g. redis://127.0.0.1:6379/0) to run the Redis case")
    from toolweave.services.call_rates import RedisCallRates

    prefix = f"tw-test-{uuid.uuid4().hex}:"
    limits = LimitsConfig(calls_per_second_per_key=2, calls_per_second_per_tenant=0)
    first, second = RedisCallRates(url, prefix, limits), RedisCallRates(url, prefix, limits)
    caller = Session(tenant="acme", label="key:tw_shared")
    try:
        refusals = [await (first if i % 2 else second).charge(caller) for i in range(8)]
    finally:
        await first.close()
        await second.close()
    assert [r is None for r in refusals].count(True) == 4, refusals  # one burst of 4 for the deployment
    assert all(r.limit == "limits.calls_per_second_per_key" for r in refusals if r is not None)


async def test_calls_through_a_virtual_server_are_charged_to_the_same_bucket() -> None:
    """A virtual server's registry shares the gateway's call rates: its endpoint is no way around them."""
    from toolweave.executor import ToolExecutor

    config = parse_config(
        {
            "backends": [python_backend()],
            "limits": {"calls_per_second_per_key": 1},
            "servers": [{"name": "desk", "tools": ["py__greet"]}],
        }
    )
    async with Gateway(config) as gateway:
        caller = Session(tenant="acme", label="key:tw_desk")
        through = ToolExecutor(gateway.servers.by_name["desk"].registry, caller)
        results = [await through.call("py__greet", {"name": "x"}) for _ in range(2)]
        results.append(await gateway.executor(caller).call("py__greet", {"name": "x"}))
        assert [r.is_error for r in results] == [False, False, True]
        assert "limits.calls_per_second_per_key" in results[2].content[0].text
