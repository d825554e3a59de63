"""Finding 7 of hardening II: one key can no longer hold every `/api/v1/events` stream.

As found: the gateway holds at most 100 event streams, first come; one `tools:read` key opened all
100 and every other tenant got `503 busy`. Now one key holds at most
`limits.event_streams_per_key` (4) and one tenant's keys `limits.event_streams_per_tenant` (16):
past its share a caller gets `429` naming the setting, and other tenants still open theirs.
"""

from __future__ import annotations

import contextlib

import httpx

from support.api import AppFactory
from support.serving import serve_asgi


async def test_a_key_and_a_tenant_hold_only_their_share_of_event_streams(sqlite_app: AppFactory) -> None:
    api = await sqlite_app({}, require_auth=True)
    mallory = [await api.key("mallory", "tools:read") for _ in range(6)]
    bob = await api.key("bob", "tools:read")
    statuses: dict[str, list[int]] = {}
    async with (
        serve_asgi(api.app, lifespan="off") as base,
        httpx.AsyncClient(base_url=base, timeout=10, limits=httpx.Limits(max_connections=200)) as http,
        contextlib.AsyncExitStack() as streams,
    ):

        async def open_stream(key: str) -> httpx.Response:
            return await streams.enter_async_context(
                http.stream("GET", "/api/v1/events", headers={"Authorization": f"Bearer {key}"})
            )

        first = [await open_stream(mallory[0]) for _ in range(100)]
        statuses["one key"] = [r.status_code for r in first]
        more = [await open_stream(key) for key in mallory[1:] for _ in range(4)]
        statuses["its tenant"] = [r.status_code for r in more]
        statuses["another tenant"] = [(await open_stream(bob)).status_code]
        refused = next(r for r in first if r.status_code != 200)
        body = (await refused.aread()).decode()
    assert statuses["one key"].count(200) == 4, statuses
    assert refused.status_code == 429 and "limits.event_streams_per_key" in body, body
    assert statuses["its tenant"].count(200) == 12, statuses  # 4 + 12 = the tenant's 16
    assert statuses["another tenant"] == [200], statuses
