"""Finding 1 and 2(b): user-supplied JSON Schemas never reach outside their own document, and their
`pattern`s run on RE2.

As found: a composite created through the API with `parameters.properties.t.$ref: "file:///…"` (or
`http://…`) made the gateway read the file (or fetch the URL) when the tool was called and echo it in
the validation error; a non-local `$ref` was a 500; `pattern: "^(a+)+$"` froze the event loop for
seconds on 27 characters. Now each is a 422 naming the field at definition time, and nothing is read.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from support.api import AppFactory, problems
from support.configs import python_backend
from support.serving import serve_asgi
from toolweave.schemas.check import schema_error
from toolweave.schemas.validate import ArgumentValidator, compile_validator

API = "/api/v1"
SENTINEL = "the-gateway-host-s-private-file"


def workflow(parameters: dict[str, Any]) -> dict[str, Any]:
    """A one-step workflow over the in-process `py/greet`, with `parameters` as its input schema."""
    return {
        "name": "wf",
        "description": "Greets with a parameter.",
        "parameters": parameters,
        "steps": [{"id": "a", "tool": "py/greet", "arguments": {"name": "{{ params.t }}"}}],
    }


def referring(ref: str) -> dict[str, Any]:
    return {"type": "object", "properties": {"t": {"$ref": ref}}}


def recording_server(hits: list[str]) -> Starlette:
    async def schema(request: Request) -> JSONResponse:
        hits.append(request.url.path)
        return JSONResponse({"type": "integer", "description": SENTINEL})

    return Starlette(routes=[Route("/schema.json", schema)])


async def test_a_file_or_http_ref_is_refused_at_creation_and_nothing_is_read(
    sqlite_app: AppFactory, tmp_path: Path
) -> None:
    secret = tmp_path / "private.json"
    secret.write_text(f'{{"type": "integer", "description": "{SENTINEL}"}}')
    hits: list[str] = []
    api = await sqlite_app({"backends": [python_backend()]})
    async with serve_asgi(recording_server(hits)) as base, api.client() as client:
        for ref in (secret.as_uri(), f"{base}/schema.json", "file:///dev/zero", "other.json#/x"):
            created = await client.post(
                f"{API}/composite-tools", json={"definition": workflow(referring(ref))}
            )
            assert created.status_code == 422, (ref, created.status_code, created.text)
            assert SENTINEL not in created.text
            assert any("$ref" in message and ref in message for _path, message in problems(created)), (
                created.text
            )
            called = await client.post(f"{API}/tools/wf/call", json={"t": "x"})
            assert called.status_code == 404, called.text
    assert hits == []


async def test_a_local_ref_still_works(sqlite_app: AppFactory) -> None:
    parameters = {
        "type": "object",
        "$defs": {"name": {"type": "string", "maxLength": 5}},
        "properties": {"t": {"$ref": "#/$defs/name"}},
    }
    api = await sqlite_app({"backends": [python_backend()]})
    async with api.client() as client:
        created = await client.post(f"{API}/composite-tools", json={"definition": workflow(parameters)})
        assert created.status_code == 201, created.text
        ok = await client.post(f"{API}/tools/wf/call", json={"t": "Ann"})
        assert ok.json()["isError"] is False, ok.text
        long = await client.post(f"{API}/tools/wf/call", json={"t": "Annabelle"})
        assert long.json()["isError"] is True and "too long" in long.text, long.text


def test_a_backend_schema_with_a_remote_ref_is_left_unchecked_rather_than_fetched() -> None:
    """A backend's schema is not the tenant's to fix: nothing is resolved, the call is not refused."""
    validator = ArgumentValidator(referring("http://127.0.0.1:9/never.json"))
    assert validator.problems({"t": "x"}) == []
    assert compile_validator(referring("http://127.0.0.1:9/never.json")) is None


def test_a_ref_into_an_embedded_resource_resolves_without_a_fetch() -> None:
    schema = {
        "type": "object",
        "$defs": {"n": {"$id": "https://example.invalid/n.json", "type": "integer"}},
        "properties": {"t": {"$ref": "https://example.invalid/n.json"}},
    }
    assert schema_error(schema) is None
    validator = compile_validator(schema)
    assert validator is not None
    assert validator.is_valid({"t": 1}) and not validator.is_valid({"t": "x"})


async def test_a_catastrophic_pattern_runs_on_re2_and_does_not_stall(sqlite_app: AppFactory) -> None:
    parameters = {"type": "object", "properties": {"t": {"type": "string", "pattern": "^(a+)+$"}}}
    api = await sqlite_app({"backends": [python_backend()]})
    async with api.client() as client:
        created = await client.post(f"{API}/composite-tools", json={"definition": workflow(parameters)})
        assert created.status_code == 201, created.text
        started = time.perf_counter()
        bad = await client.post(f"{API}/tools/wf/call", json={"t": "a" * 28 + "!"})
        elapsed = time.perf_counter() - started
        assert bad.json()["isError"] is True and "does not match" in bad.text, bad.text
        good = await client.post(f"{API}/tools/wf/call", json={"t": "a" * 40})
        assert good.json()["isError"] is False, good.text
    # Python's `re` backtracks 2**28 times here (tens of seconds, all of it on the event loop); RE2 is
    # linear (microseconds). The bound is generous for a loaded machine.
    assert elapsed < 5


def test_pattern_properties_run_on_re2_too() -> None:
    schema = {"type": "object", "patternProperties": {"^(a+)+$": {"type": "integer"}}}
    validator = compile_validator(schema)
    assert validator is not None
    assert not validator.is_valid({"a" * 40: "x"})
    assert validator.is_valid({"a" * 40 + "!": "x"})


async def test_a_pattern_re2_cannot_compile_is_a_clear_problem(sqlite_app: AppFactory) -> None:
    for pattern in ("(a)\\1", "(?=a)b", "(?<!x)y"):
        parameters = {"type": "object", "properties": {"t": {"type": "string", "pattern": pattern}}}
        api = await sqlite_app({"backends": [python_backend()]})
        async with api.client() as client:
            created = await client.post(f"{API}/composite-tools", json={"definition": workflow(parameters)})
        assert created.status_code == 422, (pattern, created.text)
        assert any("pattern" in message and pattern in message for _p, message in problems(created))
        await sqlite_app.close(api)


def test_a_schema_nested_deeper_than_the_limit_is_a_problem_not_a_recursion_error() -> None:
    schema: dict[str, Any] = {"type": "string"}
    for _ in range(5000):
        schema = {"type": "object", "properties": {"t": schema}}
    error = schema_error(schema)
    assert error is not None and "nested" in error.message
