"""What one tenant must not learn about another: that a composite exists (a reference to it answers
exactly like an unknown name)."""

from __future__ import annotations

from typing import Any

from support.api import GREETER, AppFactory
from support.configs import python_backend

API = "/api/v1"


def caller_of(tool: str, name: str = "probe") -> dict[str, Any]:
    return {
        "name": name,
        "description": "Calls another tool.",
        "steps": [{"id": "a", "tool": tool, "arguments": {"operation": "greet", "name": "x"}}],
    }


async def test_referencing_another_tenants_composite_answers_like_an_unknown_name(
    sqlite_app: AppFactory,
) -> None:
    api = await sqlite_app({"backends": [python_backend()]}, require_auth=True)
    alice, bob = await api.key("alice"), await api.key("bob")
    async with api.client(alice) as a, api.client(bob) as b:
        assert (await a.post(f"{API}/composite-tools", json={"definition": GREETER})).status_code == 201
        theirs = await b.post(f"{API}/composite-tools", json={"definition": caller_of("greeter")})
        unknown = await b.post(f"{API}/composite-tools", json={"definition": caller_of("greeterx")})
        assert theirs.status_code == unknown.status_code == 422, theirs.text
        assert theirs.text.replace("'greeter'", "'greeterx'") == unknown.text
        mine = await a.post(f"{API}/composite-tools", json={"definition": caller_of("greeter", "own")})
        assert mine.status_code == 201, mine.text
