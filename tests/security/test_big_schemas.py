"""Finding 2 of hardening II: big but legal JSON Schemas no longer stall everyone.

As found: `schemas.schema_error` cost ~0.4 ms per property (jsonschema evaluating the 2020-12
metaschema), so a 20,000-property schema held the event loop 8.4 s, and every catalog rebuild
checked every stored definition's schemas again. Now the metaschema is checked in one linear walk
(jsonschema only re-checks a keyword found wrong, for its message), a schema holds at most
`MAX_SCHEMA_NODES` subschemas, checks are remembered by content, and a federation manifest and a
stored definition are read and checked on a thread beside the event loop (`schemas.off_loop`).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import jsonschema
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from support.api import AppFactory
from support.configs import python_backend
from toolweave.backends.federated import session
from toolweave.backends.federated.federation import Federation
from toolweave.config.models import Config
from toolweave.schemas import check as schemas
from toolweave.services import definitions

API = "/api/v1"


def wide(count: int, kind: str = "string") -> dict[str, Any]:
    return {"type": "object", "properties": {f"p{i}": {"type": kind, "maxLength": 9} for i in range(count)}}


def test_a_legal_schema_is_checked_without_evaluating_the_metaschema(monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[Any] = []
    original = jsonschema.Draft202012Validator.check_schema
    monkeypatch.setattr(
        jsonschema.Draft202012Validator,
        "check_schema",
        classmethod(lambda cls, schema, *a, **k: (calls.append(schema), original(schema, *a, **k))[1]),
    )
    assert schemas.schema_error(wide(3000)) is None
    assert calls == []  # linear: no metaschema evaluation for a valid schema
    error = schemas.schema_error({**wide(3000), "required": "p1"})
    assert error is not None and list(error.absolute_path) == ["required"]
    assert all(len(str(schema)) < 100 for schema in calls), "only the wrong keyword is re-checked"


def test_a_schema_past_the_subschema_cap_is_refused_naming_it() -> None:
    error = schemas.schema_error(wide(schemas.MAX_SCHEMA_NODES + 1))
    assert error is not None and "more than 5000 subschemas" in error.message


@st.composite
def schema_like(draw: st.DrawFn, depth: int = 0) -> Any:
    keywords = st.sampled_from(
        [
            "type",
            "properties",
            "items",
            "required",
            "minLength",
            "enum",
            "pattern",
            "patternProperties",
            "anyOf",
            "not",
            "$defs",
            "$anchor",
            "$id",
            "dependencies",
            "prefixItems",
            "multipleOf",
            "x",
        ]
    )
    leaf = st.one_of(
        st.sampled_from(["string", "nonsense", "(", "#a", "a", 0, -1, 1.5, True, None]),
        st.lists(st.sampled_from(["string", "null", "a", 1]), max_size=3),
    )
    if depth > 2:
        return draw(st.one_of(st.booleans(), leaf))
    value = st.one_of(
        leaf,
        schema_like(depth + 1),
        st.dictionaries(st.sampled_from(["a", "("]), schema_like(depth + 1), max_size=2),
        st.lists(schema_like(depth + 1), max_size=2),
    )
    return draw(st.dictionaries(keywords, value, max_size=4))


# too_slow times input generation, which a loaded machine stalls (tests/security/test_config_files.py)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(schema_like())
def test_the_linear_check_agrees_with_jsonschema(schema: Any) -> None:
    try:
        jsonschema.Draft202012Validator.check_schema(schema)
        expected = None
    except jsonschema.SchemaError as error:
        expected = error
    found = schemas._metaschema_error(schema)
    assert (found is None) == (expected is None), (schema, found, expected)


def workflow(name: str, parameters: dict[str, Any]) -> dict[str, Any]:
    return {
        "name": name,
        "description": "Greets.",
        "parameters": parameters,
        "steps": [{"id": "a", "tool": "py/greet", "arguments": {"name": "x"}}],
    }


async def test_a_rebuild_does_not_check_unchanged_schemas_again(
    sqlite_app: AppFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    api = await sqlite_app({"backends": [python_backend()]})
    async with api.client() as client:
        created = await client.post(
            f"{API}/composite-tools", json={"definition": workflow("big", wide(3000))}
        )
        assert created.status_code == 201, created.text[:300]
        checked: list[int] = []
        original = schemas._depth_exceeds
        monkeypatch.setattr(
            schemas,
            "_depth_exceeds",
            lambda value, limit: (checked.append(len(str(value))), original(value, limit))[1],
        )
        other = await client.post(f"{API}/composite-tools", json={"definition": workflow("small", wide(2))})
        assert other.status_code == 201, other.text[:300]
        await asyncio.sleep(0.1)
    assert api.gateway.catalog.get("big") is not None and api.gateway.catalog.get("small") is not None
    assert not [size for size in checked if size > 50_000], "the rebuild checked the big schema again"


class _Client:
    """An in-process federated client: answers `initialize` and `tools/list` with `tools`."""

    def __init__(self, tools: list[dict[str, Any]]) -> None:
        self.tools = tools
        self.frames: asyncio.Queue[str | None] = asyncio.Queue()
        self.registration: dict[str, Any] | None = None
        self.registered = asyncio.Event()

    async def send(self, text: str) -> None:
        message = orjson.loads(text)
        method = message.get("method")
        if method == "notifications/toolweave/registration":
            self.registration = message["params"]
            self.registered.set()
        elif method == "initialize":
            result = {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "serverInfo": {"name": "c", "version": "1"},
            }
            await self.frames.put(
                orjson.dumps({"jsonrpc": "2.0", "id": message["id"], "result": result}).decode()
            )
        elif method == "tools/list":
            answer = {"jsonrpc": "2.0", "id": message["id"], "result": {"tools": self.tools}}
            await self.frames.put(orjson.dumps(answer).decode())

    async def close(self, code: int, reason: str) -> None:
        await self.frames.put(None)

    async def receive(self) -> str | None:
        return await self.frames.get()


async def test_a_manifest_is_read_beside_the_event_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Three 4,900-property schemas take the check a while: none of it on the loop every tenant shares."""
    threads: list[threading.Thread] = []
    original = session.read_manifest

    def recording(*args: Any) -> Any:
        threads.append(threading.current_thread())
        return original(*args)

    monkeypatch.setattr(session, "read_manifest", recording)
    federation = Federation(Config(), lookup=lambda _name: None, changed=lambda: None)
    client = _Client([{"name": f"t{i}", "inputSchema": wide(4900 - i)} for i in range(3)])
    serving = asyncio.create_task(
        session.serve_client(
            federation, client, client.receive, namespace="wide", tenant="a", key_id="k", origin="test"
        )
    )
    try:
        async with asyncio.timeout(60):
            await client.registered.wait()
    finally:
        serving.cancel()
        await asyncio.gather(serving, return_exceptions=True)
    assert client.registration is not None and client.registration["accepted"], client.registration
    assert threads and threading.main_thread() not in threads


async def test_a_stored_definitions_schemas_are_checked_beside_the_event_loop(
    sqlite_app: AppFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    threads: list[threading.Thread] = []
    original = definitions.parse_definition

    def recording(*args: Any, **kwargs: Any) -> Any:
        threads.append(threading.current_thread())
        return original(*args, **kwargs)

    monkeypatch.setattr(definitions, "parse_definition", recording)
    api = await sqlite_app({"backends": [python_backend()]})
    async with api.client() as client:
        created = await client.post(f"{API}/composite-tools", json={"definition": workflow("w", wide(4000))})
    assert created.status_code == 201, created.text[:300]
    assert threads and threading.main_thread() not in threads
