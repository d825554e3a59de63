"""Finding 10 of hardening II: wrong API keys at the UI's login are throttled.

As found: 300 wrong keys at 243 a second against `POST /login`, never a 429. Now each client
address and each key prefix has a burst of wrong keys (10) refilling slowly; past it the login is
`429` with `Retry-After`, before the key is looked at, and another client still logs in.
"""

from __future__ import annotations

import re

import httpx

from support.api import AppFactory
from toolweave.server.ui import throttle


async def _form(client: httpx.AsyncClient) -> str:
    page = await client.get("/login")
    found = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert found is not None, page.text[:300]
    return found.group(1)


async def test_wrong_keys_are_throttled_per_client_with_retry_after(sqlite_app: AppFactory) -> None:
    api = await sqlite_app({}, require_auth=True)
    good = await api.key("alice", "tools:read")
    statuses = []
    async with api.client() as guesser:
        csrf = await _form(guesser)
        for number in range(30):
            wrong = f"tw_{number:08d}{'x' * 30}"
            answer = await guesser.post("/login", data={"key": wrong, "csrf": csrf, "next": "/"})
            statuses.append(answer.status_code)
        assert statuses[: throttle.BURST] == [401] * throttle.BURST, statuses
        assert set(statuses[throttle.BURST :]) == {429}, statuses
        assert int(answer.headers["Retry-After"]) >= 1 and "Too many wrong API keys" in answer.text
        held = await guesser.post("/login", data={"key": good, "csrf": csrf, "next": "/"})
        assert held.status_code == 429  # even the right key waits: the guesser learns nothing
    transport = httpx.ASGITransport(app=api.app, client=("127.0.0.2", 50001))
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as other:
        csrf = await _form(other)
        answer = await other.post("/login", data={"key": good, "csrf": csrf, "next": "/"})
        assert answer.status_code == 303, answer.text[:300]


async def test_guesses_at_one_key_prefix_from_many_addresses_are_throttled(sqlite_app: AppFactory) -> None:
    api = await sqlite_app({}, require_auth=True)
    statuses = []
    for number in range(throttle.BURST + 3):
        transport = httpx.ASGITransport(app=api.app, client=(f"10.0.0.{number + 1}", 50000))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            csrf = await _form(client)
            answer = await client.post(
                "/login", data={"key": f"tw_abcdefgh{number:030d}", "csrf": csrf, "next": "/"}
            )
            statuses.append(answer.status_code)
    assert statuses[-1] == 429, statuses
