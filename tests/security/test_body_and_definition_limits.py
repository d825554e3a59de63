"""Finding 2(c): request bodies and stored definitions have a bounded size.

As found: a 50 MB REST body was accepted and its 50 MB description stored, after which every
`tools/list` took 1.7 s and carried 50 MB. Now a body over `limits.max_body_bytes` (1 MiB) is a
413 on every route before anything reads it, chunked or not, and a definition over its own limits
(size, description, number of steps) is a 422 naming the field and the setting.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from support.api import GREETER, AppFactory, problems
from support.configs import python_backend

API = "/api/v1"
MIB = 1 << 20


def described(description: str) -> dict[str, Any]:
    return {"definition": {**GREETER, "description": description}}


async def chunks(total: int, size: int = 64 << 10) -> AsyncIterator[bytes]:
    """A body sent without a Content-Length (chunked): `{"definition": {"description": "xxxx…"}}`."""
    yield b'{"definition": {"name": "big", "description": "'
    sent = 0
    while sent < total:
        yield b"x" * size
        sent += size
    yield b'"}}'


async def test_a_body_over_the_limit_is_a_413_on_every_route_and_nothing_is_stored(
    sqlite_app: AppFactory,
) -> None:
    api = await sqlite_app({"backends": [python_backend()]})
    async with api.client() as client:
        for path in (f"{API}/composite-tools", f"{API}/tools/py__greet/call", "/mcp"):
            response = await client.post(
                path,
                content=b'{"a": "' + b"x" * (2 * MIB) + b'"}',
                headers={"content-type": "application/json"},
            )
            assert response.status_code == 413, (path, response.status_code, response.text[:200])
            error = response.json()["error"]
            assert error["code"] == "payload_too_large" and "limits.max_body_bytes" in error["message"]
        chunked = await client.post(
            f"{API}/composite-tools", content=chunks(2 * MIB), headers={"content-type": "application/json"}
        )
        assert chunked.status_code == 413, chunked.text[:200]
        listed = await client.get(f"{API}/composite-tools")
        assert listed.json()["compositeTools"] == [], listed.text[:200]
        small_chunked = await client.post(
            f"{API}/tools/py__greet/call",
            content=(part async for part in _once(b'{"name": "chunks"}')),
            headers={"content-type": "application/json"},
        )
        assert small_chunked.json()["content"][0]["text"] == "Hello, chunks.", small_chunked.text


async def _once(body: bytes) -> AsyncIterator[bytes]:
    yield body


async def test_the_body_limit_is_a_setting(sqlite_app: AppFactory) -> None:
    api = await sqlite_app({"backends": [python_backend()], "limits": {"max_body_bytes": 4096}})
    async with api.client() as client:
        refused = await client.post(f"{API}/composite-tools", json=described("d" * 5000))
        assert refused.status_code == 413 and "4096" in refused.text, refused.text
        accepted = await client.post(f"{API}/composite-tools", json=described("d" * 100))
        assert accepted.status_code == 201, accepted.text


async def test_a_definition_over_its_limits_is_a_422_naming_the_field(sqlite_app: AppFactory) -> None:
    api = await sqlite_app({"backends": [python_backend()]})
    async with api.client() as client:
        long_description = await client.post(f"{API}/composite-tools", json=described("d" * 20_000))
        assert long_description.status_code == 422, long_description.text[:200]
        assert [path for path, _ in problems(long_description)] == ["definition.description"]
        assert "limits.max_description_chars" in long_description.text
        many = {
            **GREETER,
            "name": "many",
            "operations": [{"slug": f"op{i}", "tool": "py/greet"} for i in range(300)],
        }
        too_many = await client.post(f"{API}/composite-tools", json={"definition": many})
        assert too_many.status_code == 422 and "limits.max_definition_items" in too_many.text
        bulky = {**GREETER, "name": "bulky", "input_schema": {"type": "object", "x-pad": "p" * 300_000}}
        too_big = await client.post(f"{API}/composite-tools", json={"definition": bulky})
        assert too_big.status_code == 422 and "limits.max_definition_bytes" in too_big.text
        fine = await client.post(f"{API}/composite-tools", json=described("A greeter."))
        assert fine.status_code == 201, fine.text


async def test_a_definition_with_an_integer_past_64_bits_is_measured_not_a_500(
    sqlite_app: AppFactory,
) -> None:
    """Found by the API fuzz: the size check itself must accept any JSON the request parser accepts."""
    api = await sqlite_app({"backends": [python_backend()]})
    async with api.client() as client:
        huge = await client.post(f"{API}/composite-tools", json={"definition": {**GREETER, "x": 2**70}})
        assert huge.status_code == 422, huge.text


async def test_a_path_no_route_takes_is_a_json_404(sqlite_app: AppFactory) -> None:
    """Found by the stateful API fuzz: a newline escapes every route's pattern and got a text/plain 404."""
    api = await sqlite_app({"backends": [python_backend()]})
    async with api.client() as client:
        response = await client.put(f"{API}/connections/a%0Ab", json={"headers": {"X-Token": "t"}})
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found", response.text
