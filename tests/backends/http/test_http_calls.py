"""OpenAPI backends against a real REST API on loopback: wire encoding, results, failures, the client.

The API echoes each request as it arrived (raw path, raw query string, headers,
body), so these tests check exactly what went over the wire.
"""

from __future__ import annotations

import asyncio
import base64
import time
from typing import Any

import httpx2
import mcp_types as types
import pytest

from support.configs import config, openapi_backend
from support.fixtures import OpenGateway
from support.processes import free_port
from support.results import text
from toolweave import Gateway
from toolweave.backends.http.backend import HttpApiBackend


async def api_gateway(open_gateway: OpenGateway, api_url: str, **extra: Any) -> Gateway:
    gateway = await open_gateway(config(openapi_backend("api", api_url, **extra)))
    backend = gateway.backends["api"]
    assert backend.status == "connected", backend.last_error
    return gateway


async def echo(gateway: Gateway, tool: str, arguments: dict[str, Any]) -> dict[str, Any]:
    result = await gateway.call(f"api__{tool}", arguments)
    assert not result.is_error, text(result)
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def test_path_parameters_follow_style_and_are_percent_encoded(
    open_gateway: OpenGateway, api_url: str
) -> None:
    gw = await api_gateway(open_gateway, api_url)
    assert (await echo(gw, "pathSimple", {"ids": [1, 2, 3]}))["path"] == "/echo/simple/1,2,3"
    assert (await echo(gw, "pathLabel", {"ids": ["a", "b"]}))["path"] == "/echo/label/.a,b"
    assert (await echo(gw, "pathMatrix", {"point": {"x": 1, "y": 2}}))["path"] == "/echo/matrix/;x=1;y=2"
    # a slash, a space, a question mark: one segment, never a new path or query
    assert (await echo(gw, "pathEncoded", {"name": "a b/c?d#e"}))["path"] == "/echo/item/a%20b%2Fc%3Fd%23e"


async def test_a_path_argument_never_makes_a_dot_segment(open_gateway: OpenGateway, api_url: str) -> None:
    """`.` and `..` are unreserved, so percent-encoding leaves them, and the HTTP client (or any proxy
    or server after it) resolves them: `/echo/item/..` became `GET /echo/` with the operator's
    credentials. Such a segment (or an empty one) is refused before anything is sent."""
    gw = await api_gateway(open_gateway, api_url)
    for name in ("..", "."):
        refused = await gw.call("api__pathEncoded", {"name": name})
        assert refused.is_error and "Nothing was called" in text(refused), text(refused)
        assert "path segment" in text(refused)
    label = await gw.call("api__pathLabel", {"ids": ["."]})  # label style: "." + "." is ".."
    assert label.is_error and "path segment" in text(label), text(label)
    # dots that do not make a whole segment are sent as they are, one segment
    assert (await echo(gw, "pathEncoded", {"name": "..."}))["path"] == "/echo/item/..."
    assert (await echo(gw, "pathEncoded", {"name": "a/../.."}))["path"] == "/echo/item/a%2F..%2F.."
    assert (await echo(gw, "pathEncoded", {"name": "%2e%2e"}))["path"] == "/echo/item/%252e%252e"


async def test_query_parameters_of_every_style(open_gateway: OpenGateway, api_url: str) -> None:
    gw = await api_gateway(open_gateway, api_url)
    got = await echo(
        gw,
        "queryForm",
        {
            "status": "sold",
            "tags": ["a b", "c&d"],
            "ids": [1, 2],
            "filter": {"color": "red", "size": 3},
            "point": {"x": 1, "y": 2},
            "q": "x=y",
            "flag": True,
            "filter_name_": "z",
        },
    )
    assert got["query"] == (
        "tags=a%20b&tags=c%26d&ids=1,2&filter[color]=red&filter[size]=3&x=1&y=2&q=x%3Dy&flag=true"
        "&status=sold&filter[name]=z"
    )
    delimited = await echo(gw, "queryDelimited", {"a": ["x", "y"], "b": ["p", "q"]})
    assert delimited["query"] == "a=x%20y&b=p|q"


async def test_absent_arguments_are_not_sent_and_defaults_stay_with_the_api(
    open_gateway: OpenGateway, api_url: str
) -> None:
    gw = await api_gateway(open_gateway, api_url)
    got = await echo(gw, "queryForm", {"status": "pending"})
    assert got["query"] == "status=pending"  # no limit=10: the API applies its own default


async def test_headers_and_cookies(open_gateway: OpenGateway, api_url: str) -> None:
    gw = await api_gateway(open_gateway, api_url)
    got = await echo(gw, "headerParams", {"X-Trace-Id": "t-1", "X-List": ["a", "b"], "session": "s 1"})
    assert got["headers"]["x-trace-id"] == "t-1"
    assert got["headers"]["x-list"] == "a,b"
    assert got["headers"]["cookie"] == "session=s%201"
    broken = await gw.call("api__headerParams", {"X-Trace-Id": "a\r\nX-Evil: 1"})
    assert broken.is_error and "line break" in text(broken) and "Nothing was called" in text(broken)


async def test_json_bodies_flattened_whole_and_nullable(open_gateway: OpenGateway, api_url: str) -> None:
    gw = await api_gateway(open_gateway, api_url)
    created = await echo(gw, "createPet", {"name": "Rex", "tag": None, "status": "sold", "dryRun": True})
    assert created["method"] == "POST" and created["query"] == "dryRun=true"
    assert created["headers"]["content-type"] == "application/json"
    assert created["body"] == '{"name":"Rex","tag":null,"status":"sold"}'  # an explicit null is sent
    # the optional body with required fields stays one `body` argument, its own `required` intact
    updated = await echo(gw, "updatePet", {"id": 5, "body": {"name": "Tom"}})
    assert (
        updated["path"] == "/echo/pets/5"
        and updated["method"] == "PUT"
        and updated["body"] == '{"name":"Tom"}'
    )
    missing = await gw.call("api__updatePet", {"id": 5, "body": {"tag": "x"}})
    assert missing.is_error and "name" in text(missing)
    collided = await echo(gw, "collide", {"id": 9, "id_query": "q", "id_body": "b", "note": "n"})
    assert collided["path"] == "/echo/collide/9" and collided["query"] == "id=q"
    assert collided["body"] == '{"id":"b","note":"n"}'
    tree = {"name": "root", "children": [{"name": "leaf", "children": []}]}
    assert (await echo(gw, "postTree", tree))[
        "body"
    ] == '{"name":"root","children":[{"name":"leaf","children":[]}]}'


async def test_form_multipart_and_text_bodies(open_gateway: OpenGateway, api_url: str) -> None:
    gw = await api_gateway(open_gateway, api_url)
    form = await echo(gw, "submitForm", {"a": "x y", "tags": ["1", "2"], "meta": {"k": "v&w"}})
    assert form["headers"]["content-type"] == "application/x-www-form-urlencoded"
    assert form["body"] == "a=x%20y&tags=1&tags=2&meta[k]=v%26w"
    multipart = await echo(gw, "submitMultipart", {"title": "T", "count": 3})
    assert multipart["headers"]["content-type"].startswith("multipart/form-data; boundary=")
    assert (
        'name="title"\r\n\r\nT\r\n' in multipart["body"] and 'name="count"\r\n\r\n3\r\n' in multipart["body"]
    )
    plain = await echo(gw, "postText", {"body": "hello there"})
    assert plain["headers"]["content-type"] == "text/plain; charset=utf-8" and plain["body"] == "hello there"


async def test_results_json_arrays_images_blobs_and_text(open_gateway: OpenGateway, api_url: str) -> None:
    gw = await api_gateway(open_gateway, api_url)
    pet = await gw.call("api__getPet", {"id": 3})
    assert pet.structured_content == {"id": 3, "name": "Rex", "tag": None}
    assert '"name":"Rex"' in text(pet)
    listed = await gw.call("api__listPets", {"limit": 1})
    assert listed.structured_content == {"result": [{"id": 1, "name": "Rex"}]}
    image = await gw.call("api__getBinary", {})
    assert isinstance(image.content[0], types.ImageContent) and image.content[0].mime_type == "image/png"
    assert base64.b64decode(image.content[0].data).startswith(b"\x89PNG")
    pdf = await gw.call("api__getPdf", {})
    resource = pdf.content[0]
    assert isinstance(resource, types.EmbeddedResource)
    assert isinstance(resource.resource, types.BlobResourceContents)
    assert resource.resource.mime_type == "application/pdf"
    assert base64.b64decode(resource.resource.blob) == b"%PDF-1.4 fake"
    words = await gw.call("api__getText", {})
    assert not words.is_error and text(words) == "plain words" and words.structured_content is None


async def test_tools_carry_schemas_and_annotations_from_the_document(
    open_gateway: OpenGateway, api_url: str
) -> None:
    gw = await api_gateway(open_gateway, api_url)
    tools = {tool.name: tool for tool in gw.list_tools()}
    create = tools["api__createPet"]
    assert create.description == "Create a pet from a JSON body."  # the summary it repeats is not doubled
    props = create.input_schema["properties"]
    assert "id" not in props  # readOnly: the API sets it
    assert props["status"] == {
        "type": "string",
        "enum": ["available", "pending", "sold"],
        "default": "available",
    }
    assert props["tag"]["type"] == ["string", "null"]
    assert props["secret"]["format"] == "password"
    assert create.input_schema["required"] == ["name"]
    assert props["dryRun"] == {"type": "boolean", "default": False}
    assert create.annotations is not None and not create.annotations.read_only_hint
    get_pet = tools["api__getPet"]
    assert get_pet.annotations is not None and get_pet.annotations.read_only_hint is True
    assert get_pet.input_schema["properties"]["id"] == {
        "type": "integer",
        "format": "int64",
        "description": "The pet's id",
    }
    assert (
        get_pet.output_schema is not None and "secret" not in get_pet.output_schema["properties"]
    )  # writeOnly
    delete = tools["api__deletePet"].annotations
    assert delete is not None and delete.destructive_hint is True and delete.idempotent_hint is True
    assert tools["api__updatePet"].annotations.idempotent_hint is True  # type: ignore[union-attr]
    assert tools["api__listPets"].output_schema is None  # an array: no object schema to advertise
    query = tools["api__queryForm"].input_schema
    assert query["properties"]["limit"] == {"type": "integer", "default": 10, "minimum": 1, "maximum": 100}
    assert query["properties"]["q"]["description"] == "Free text"
    assert "Accept" not in tools["api__headerParams"].input_schema["properties"]  # set by the gateway
    tree = tools["api__postTree"].input_schema
    assert tree["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
    assert tree["$defs"]["Node"]["properties"]["children"]["items"] == {"$ref": "#/$defs/Node"}
    assert "api__uploadFile" not in tools and "api__xmlOnly" not in tools  # skipped, with reasons
    backend = gw.backends["api"]
    assert isinstance(backend, HttpApiBackend)
    reasons = {problem.operation: problem.message for problem in backend.skipped}
    assert "file upload" in reasons["uploadFile (POST /echo/upload)"]
    assert "application/xml" in reasons["xmlOnly (POST /echo/xml)"]
    assert all(len(name) <= 64 for name in tools)
    assert "api__dup_name" in tools and "api__dup_name_2" in tools and "api__get_echo_noid" in tools


async def test_invalid_arguments_never_reach_the_api(open_gateway: OpenGateway, api_url: str) -> None:
    gw = await api_gateway(open_gateway, api_url)
    bad = await gw.call("api__queryForm", {"status": "lost"})
    assert bad.is_error and "status" in text(bad) and "Nothing was called" in text(bad)
    extra = await gw.call("api__getPet", {"id": 1, "nope": 2})
    assert extra.is_error and "nope" in text(extra)


async def test_a_500_is_an_error_with_status_reason_and_a_bounded_excerpt(
    open_gateway: OpenGateway, api_url: str
) -> None:
    gw = await api_gateway(open_gateway, api_url)
    result = await gw.call("api__getStatus", {"code": 500})
    assert result.is_error
    message = text(result)
    assert message.startswith("GET /status/{code} failed: HTTP 500 Internal Server Error")
    assert "status 500 as asked" in message
    assert result.meta == {"toolweave": {"http_status": 500}}
    big = await gw.call("api__getBig", {"bytes": 50_000})
    assert not big.is_error
    gone = await gw.call("api__getStatus", {"code": 404})
    assert "HTTP 404 Not Found" in text(gone) and "identifiers" in text(gone)


async def test_a_slow_api_times_out_and_others_keep_going(open_gateway: OpenGateway, api_url: str) -> None:
    gw = await api_gateway(open_gateway, api_url, timeout="0.5s")
    started = time.perf_counter()
    slow, fast = await asyncio.gather(gw.call("api__slow", {"seconds": 5}), gw.call("api__getPet", {"id": 1}))
    assert slow.is_error and "timed out after 0.5s" in text(slow)
    assert not fast.is_error
    assert time.perf_counter() - started < 3


async def test_responses_that_are_not_the_declared_json(open_gateway: OpenGateway, api_url: str) -> None:
    gw = await api_gateway(open_gateway, api_url)
    html = await gw.call("api__notJson", {})
    assert (
        html.is_error
        and "declares a JSON object response but answered HTTP 200 with a text/html body" in text(html)
    )
    assert "Gateway error page" in text(html)
    broken = await gw.call("api__brokenJson", {})
    assert broken.is_error and "not valid JSON" in text(broken)
    shape = await gw.call("api__wrongShape", {})
    assert shape.is_error and "at id" in text(shape) and "not of type 'integer'" in text(shape)
    # output_schema = false: the same responses pass through as they are
    lenient = await open_gateway(config(openapi_backend("lax", api_url, output_schema=False)))
    passed = await lenient.call("lax__wrongShape", {})
    assert not passed.is_error and passed.structured_content == {"id": "not-a-number", "name": "x"}
    page = await lenient.call("lax__notJson", {})
    assert not page.is_error and "Gateway error page" in text(page)


async def test_responses_are_bounded(open_gateway: OpenGateway, api_url: str) -> None:
    gw = await api_gateway(open_gateway, api_url, max_response_bytes=10_000)
    big = await gw.call("api__getBig", {"bytes": 50_000})
    assert big.is_error and "larger than 10000 bytes" in text(big)
    small = await gw.call("api__getBig", {"bytes": 100})
    assert not small.is_error


async def test_retries_only_idempotent_methods(open_gateway: OpenGateway, api_url: str) -> None:
    gw = await api_gateway(open_gateway, api_url, retries=2)
    key = f"k{time.monotonic_ns()}"
    retried = await gw.call("api__flaky", {"key": key, "fail": 2})
    assert not retried.is_error and retried.structured_content == {"attempts": 3}
    post = await gw.call("api__flakyPost", {"key": key})
    assert post.is_error and "HTTP 503" in text(post)
    async with httpx2.AsyncClient() as client:
        stats = (await client.get(f"{api_url}/stats")).json()
    assert stats[f"flaky-post:{key}"] == 1  # a POST is never sent twice
    exhausted = await gw.call("api__flaky", {"key": key + "x", "fail": 5})
    assert exhausted.is_error and "HTTP 503" in text(exhausted)


async def test_redirects_stay_on_the_api_origin(open_gateway: OpenGateway, api_url: str) -> None:
    gw = await api_gateway(open_gateway, api_url)
    same = await gw.call("api__redirectSame", {})
    assert not same.is_error and same.structured_content == {"id": 7, "name": "Rex", "tag": None}
    other = await gw.call("api__redirectOther", {})
    assert other.is_error and "HTTP 302" in text(other) and "not followed" in text(other)


async def test_one_keep_alive_client_serves_every_call(open_gateway: OpenGateway, api_url: str) -> None:
    gw = await api_gateway(open_gateway, api_url, max_concurrency=2)
    backend = gw.backends["api"]
    assert isinstance(backend, HttpApiBackend)
    client = backend._client
    ports = set()
    for _ in range(10):
        ports.add((await echo(gw, "publicPing", {}))["client_port"])
    assert len(ports) == 1  # sequential calls reuse one connection
    results = await asyncio.gather(*(echo(gw, "publicPing", {}) for _ in range(20)))
    ports |= {r["client_port"] for r in results}
    assert len(ports) <= 2  # max_concurrency caps the connections too
    assert backend._client is client


async def test_an_unreachable_api_is_an_error_result(open_gateway: OpenGateway, api_url: str) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    gw = await api_gateway(open_gateway, api_url, base_url=dead, retries=1)
    result = await gw.call("api__getPet", {"id": 1})
    assert result.is_error and "cannot reach the API" in text(result) and "ConnectError" in text(result)


async def test_an_unreachable_document_fails_the_backend_then_recovers(
    open_gateway: OpenGateway, api_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from toolweave.backends.http import backend as http_backend

    monkeypatch.setattr(http_backend, "INITIAL_BACKOFF", 0.1)
    port = free_port()
    gw = await open_gateway(
        config({"name": "later", "openapi": f"http://127.0.0.1:{port}/openapi.json", "connect_timeout": 0.5}),
        runs=None,
    )
    backend = gw.backends["later"]
    assert backend.status == "failed"
    assert f"cannot fetch the OpenAPI document http://127.0.0.1:{port}/openapi.json" in (
        backend.last_error or ""
    )
    result = await gw.call("later__getPet", {"id": 1})
    assert result.is_error
    from support.processes import api_testserver, wait_until

    with api_testserver(port):
        await wait_until(lambda: backend.status == "connected", what="the backend to load")
        await wait_until(lambda: gw.catalog.get("later__getPet") is not None)
        pet = await gw.call("later__getPet", {"id": 2})
        assert not pet.is_error and pet.structured_content is not None


async def test_a_broken_or_missing_document_is_a_failed_backend_not_a_crash(
    open_gateway: OpenGateway, tmp_path: Any
) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"openapi": "3.0.0", "paths": {')
    not_openapi = tmp_path / "other.yaml"
    not_openapi.write_text("name: just some yaml\n")
    gw = await open_gateway(
        config(
            {"name": "broken", "openapi": str(broken)},
            {"name": "other", "openapi": str(not_openapi)},
            {"name": "missing", "openapi": str(tmp_path / "nope.yaml")},
            {"name": "py", "python": "tw_pytools"},
        )
    )
    assert gw.backends["broken"].status == "failed" and "not valid JSON" in (
        gw.backends["broken"].last_error or ""
    )
    assert "neither an 'openapi' nor a 'swagger'" in (gw.backends["other"].last_error or "")
    assert "cannot read" in (gw.backends["missing"].last_error or "")
    assert gw.backends["py"].status == "connected"  # the others still serve
