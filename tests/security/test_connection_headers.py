"""Finding 11: a non-ASCII connection header value is refused when it is stored.

As found: `PUT /connections/{backend}` accepted `{"X-Token": "clé"}`; the failure came only later,
when a call tried to connect with it (HTTP header values are bytes, and httpx refuses non-ASCII).
Now it is a 422 naming the header (never its value), and nothing is stored.
(The other half of finding 11, an HTTP backend's reply with a wrong JSON-RPC id, belongs to the
HTTP caller, `wire/http_caller.py`.)
"""

from __future__ import annotations

from support.api import AppFactory, problems

API = "/api/v1"
VALUE = "clé-secrète"


async def test_a_non_ascii_header_value_is_a_422_naming_the_header(sqlite_app: AppFactory) -> None:
    api = await sqlite_app(
        {"backends": [{"name": "hdr", "url": "http://127.0.0.1:9/mcp"}]}, require_auth=True
    )
    key = await api.key("alice")
    async with api.client(key) as client:
        refused = await client.put(f"{API}/connections/hdr", json={"headers": {"X-Token": VALUE}})
        assert refused.status_code == 422, refused.text
        assert [path for path, _ in problems(refused)] == ["body.headers.X-Token"]
        assert "ASCII" in refused.text and VALUE not in refused.text
        listed = await client.get(f"{API}/connections")
        assert listed.json()["connections"] == [], listed.text
        accepted = await client.put(f"{API}/connections/hdr", json={"headers": {"X-Token": "plain-ascii"}})
        assert accepted.status_code == 200, accepted.text
