"""The lean `tools/call` caller against a scripted HTTP/1.1 server on loopback: the wire it writes
(headers, envelope, `Mcp-Param-*`, session id), JSON, chunked and SSE answers with progress, keep-alive
reuse, the once-only retry on a stale connection, errors the way the SDK transport reports them, and
cancellation closing the connection, priming events, streams resumed with `Last-Event-ID`, answers with
another request's id."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
import pytest
from mcp_types import INTERNAL_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, PARSE_ERROR

from toolweave.wire.errors import Redirected, RpcError
from toolweave.wire.http_caller import FIRST_REQUEST_ID, HttpToolCaller, proxied

ENVELOPE = {
    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
    "io.modelcontextprotocol/clientInfo": {"name": "mcp", "version": "0.1.0"},
    "io.modelcontextprotocol/clientCapabilities": {},
}


@dataclass
class Request:
    head: dict[str, str]
    body: dict[str, Any]
    connection: int
    reader: asyncio.StreamReader
    line: str = ""
    """The request line, e.g. `GET /mcp HTTP/1.1` (a resumption)."""


@dataclass
class Script:
    """What the server answers: `answer(request) -> list of raw byte pieces` (None: close without a word)."""

    answer: Callable[[Request], Awaitable[list[bytes] | None]]
    requests: list[Request] = field(default_factory=list)
    connections: int = 0
    writers: list[asyncio.StreamWriter] = field(default_factory=list)
    closed: asyncio.Event = field(default_factory=asyncio.Event)


async def _serve(script: Script, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    script.connections += 1
    number = script.connections
    script.writers.append(writer)
    try:
        while True:
            try:
                raw = await reader.readuntil(b"\r\n\r\n")
            except (asyncio.IncompleteReadError, ConnectionError):
                return
            lines = raw.decode("latin-1").split("\r\n")
            head = {}
            for line in lines[1:]:
                if line:
                    name, _, value = line.partition(":")
                    head[name.strip().lower()] = value.strip()
            length = int(head.get("content-length", "0"))
            body = orjson.loads(await reader.readexactly(length)) if length else {}
            request = Request(head, body, number, reader, lines[0])
            script.requests.append(request)
            pieces = await script.answer(request)
            if pieces is None:
                return
            for piece in pieces:
                writer.write(piece)
                await writer.drain()
    finally:
        writer.close()
        script.closed.set()


@pytest.fixture
async def server() -> AsyncIterator[Callable[..., Awaitable[tuple[str, Script]]]]:
    servers: list[asyncio.Server] = []

    async def start(answer: Callable[[Request], Awaitable[list[bytes] | None]]) -> tuple[str, Script]:
        script = Script(answer)
        srv = await asyncio.start_server(lambda r, w: _serve(script, r, w), "127.0.0.1", 0)
        servers.append(srv)
        port = srv.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}/mcp", script

    yield start
    for srv in servers:
        srv.close()


def json_answer(message: dict[str, Any], status: str = "200 OK", extra: str = "") -> list[bytes]:
    body = orjson.dumps(message)
    head = (
        f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n{extra}\r\n"
    )
    return [head.encode(), body]


def result_of(request: Request, text: str = "ok") -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": request.body["id"],
        "result": {"content": [{"type": "text", "text": text}], "resultType": "complete"},
    }


def chunked(*chunks: bytes) -> list[bytes]:
    return [b"%x\r\n%s\r\n" % (len(chunk), chunk) for chunk in chunks] + [b"0\r\n\r\n"]


def sse_event(message: dict[str, Any]) -> bytes:
    return b"event: message\r\ndata: " + orjson.dumps(message) + b"\r\n\r\n"


async def echo_json(request: Request) -> list[bytes]:
    return json_answer(result_of(request, request.body["params"]["arguments"].get("text", "")))


async def test_modern_wire_and_json_answer(server: Any) -> None:
    url, script = await server(echo_json)
    header_maps = {"lookup": {("region",): "Region"}}
    caller = HttpToolCaller(
        url,
        protocol_version="2026-07-28",
        headers={"Authorization": "Bearer s3cret", "Host": "ignored"},
        envelope=ENVELOPE,
        header_maps=header_maps,
    )
    result = await caller.call("lookup", {"text": "hi", "region": "eu west"})
    assert result == {"content": [{"type": "text", "text": "hi"}], "resultType": "complete"}
    (request,) = script.requests
    assert request.head["mcp-protocol-version"] == "2026-07-28"
    assert request.head["mcp-method"] == "tools/call"
    assert request.head["mcp-name"] == "lookup"
    assert request.head["mcp-param-region"] == "eu west"
    assert request.head["authorization"] == "Bearer s3cret"
    assert request.head["host"].startswith("127.0.0.1:")
    assert request.head["accept"] == "application/json, text/event-stream"
    assert "mcp-session-id" not in request.head
    body = request.body
    assert body["method"] == "tools/call" and body["params"]["name"] == "lookup"
    assert body["params"]["_meta"] == ENVELOPE  # no progress token unless progress is wanted
    await caller.close()


async def test_handshake_era_wire(server: Any) -> None:
    url, script = await server(echo_json)
    caller = HttpToolCaller(url, protocol_version="2025-11-25", session_id="abc123")
    await caller.call("echo", {"text": "x"}, progress=lambda *_: None)
    (request,) = script.requests
    assert request.head["mcp-session-id"] == "abc123"
    assert request.head["mcp-protocol-version"] == "2025-11-25"
    assert "mcp-method" not in request.head
    assert request.body["params"]["_meta"] == {"progressToken": request.body["id"]}
    await caller.close()


async def test_names_that_are_not_header_safe_are_encoded(server: Any) -> None:
    url, script = await server(echo_json)
    caller = HttpToolCaller(url, protocol_version="2026-07-28", envelope=ENVELOPE)
    await caller.call("héllo", {})
    assert script.requests[0].head["mcp-name"].startswith("=?base64?")
    await caller.close()


async def test_connections_are_kept_alive_and_reused(server: Any) -> None:
    url, script = await server(echo_json)
    caller = HttpToolCaller(url, protocol_version="2026-07-28", envelope=ENVELOPE)
    for index in range(5):
        assert (await caller.call("echo", {"text": str(index)}))["content"][0]["text"] == str(index)
    assert script.connections == 1
    results = await asyncio.gather(*(caller.call("echo", {"text": str(i)}) for i in range(4)))
    assert [r["content"][0]["text"] for r in results] == ["0", "1", "2", "3"]
    assert script.connections == 4  # one connection per call in flight, then pooled
    await caller.close()


async def test_chunked_json(server: Any) -> None:
    async def answer(request: Request) -> list[bytes]:
        body = orjson.dumps(result_of(request, "chunked"))
        head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n"
        return [head, *chunked(body[:10], body[10:])]

    url, script = await server(answer)
    caller = HttpToolCaller(url, protocol_version="2026-07-28", envelope=ENVELOPE)
    assert (await caller.call("echo", {}))["content"][0]["text"] == "chunked"
    assert (await caller.call("echo", {}))["content"][0]["text"] == "chunked"
    assert script.connections == 1
    await caller.close()


async def test_sse_answer_with_progress_and_notifications(server: Any) -> None:
    async def answer(request: Request) -> list[bytes]:
        token = request.body["params"]["_meta"]["progressToken"]
        events = [
            b": ping\r\n\r\n",
            sse_event(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/progress",
                    "params": {"progressToken": token, "progress": 1, "total": 2, "message": "half"},
                }
            ),
            sse_event(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/progress",
                    "params": {"progressToken": "other", "progress": 9},
                }
            ),
            sse_event({"jsonrpc": "2.0", "method": "notifications/tools/list_changed"}),
            sse_event(
                {
                    "jsonrpc": "2.0",
                    "method": "notifications/progress",
                    "params": {"progressToken": token, "progress": 2, "total": 2},
                }
            ),
            sse_event(result_of(request, "done")),
        ]
        stream = b"".join(events)
        head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
        # split across chunk boundaries, including inside a \r\n
        return [head, *chunked(stream[:7], stream[7:61], stream[61:62], stream[62:])]

    url, script = await server(answer)
    changes: list[str] = []
    caller = HttpToolCaller(
        url,
        protocol_version="2026-07-28",
        envelope=ENVELOPE,
        on_notification=lambda method, _params: changes.append(method),
    )
    seen: list[tuple[Any, ...]] = []

    async def progress(value: float, total: float | None, message: str | None) -> None:
        seen.append((value, total, message))

    result = await caller.call("work", {}, progress=progress)
    assert result["content"][0]["text"] == "done"
    assert seen == [(1, 2, "half"), (2, 2, None)]
    assert changes == ["notifications/tools/list_changed"]
    await caller.call("work", {}, progress=progress)
    assert script.connections == 1  # the stream ended cleanly: the connection is reused
    await caller.close()


async def test_a_stale_reused_connection_is_retried_once(server: Any) -> None:
    calls = {"n": 0}

    async def answer(request: Request) -> list[bytes] | None:
        calls["n"] += 1
        if calls["n"] == 2:
            return None  # the server drops the kept-alive connection without a word
        return json_answer(result_of(request))

    url, script = await server(answer)
    caller = HttpToolCaller(url, protocol_version="2026-07-28", envelope=ENVELOPE)
    await caller.call("echo", {})
    assert (await caller.call("echo", {}))["content"][0]["text"] == "ok"
    assert script.connections == 2 and len(script.requests) == 3
    await caller.close()


async def test_no_retry_on_a_fresh_connection_or_after_bytes(server: Any) -> None:
    async def silent(request: Request) -> list[bytes] | None:
        return None

    url, script = await server(silent)
    caller = HttpToolCaller(url, protocol_version="2026-07-28", envelope=ENVELOPE)
    with pytest.raises((EOFError, ConnectionError)):
        await caller.call("echo", {})
    assert len(script.requests) == 1

    async def half(request: Request) -> list[bytes] | None:
        if len(script2.requests) == 1:
            return json_answer(result_of(request))
        return [b'HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 500\r\n\r\n{"jsonrpc"']

    url2, script2 = await server(half)
    caller2 = HttpToolCaller(url2, protocol_version="2026-07-28", envelope=ENVELOPE)
    await caller2.call("echo", {})

    async def close_soon() -> None:
        await asyncio.sleep(0.2)
        for writer in script2.writers:
            writer.close()

    closer = asyncio.create_task(close_soon())
    with pytest.raises((EOFError, ConnectionError)):
        await caller2.call("echo", {})
    await closer
    assert len(script2.requests) == 2  # bytes had arrived: never sent again
    await caller.close()
    await caller2.close()


@pytest.mark.parametrize(
    ("status", "content_type", "body", "modern", "code", "message"),
    [
        (
            "400 Bad Request",
            "application/json",
            {"jsonrpc": "2.0", "id": 1, "error": {"code": -32020, "message": "header mismatch"}},
            True,
            -32020,
            "header mismatch",
        ),
        ("404 Not Found", "text/plain", "nope", True, METHOD_NOT_FOUND, "Not Found"),
        ("404 Not Found", "text/plain", "nope", False, INVALID_REQUEST, "Session terminated"),
        (
            "500 Internal Server Error",
            "text/plain",
            "boom",
            True,
            INTERNAL_ERROR,
            "Server returned an error response",
        ),
        (
            "202 Accepted",
            "text/plain",
            "",
            True,
            INVALID_REQUEST,
            "server answered a request with 202 Accepted",
        ),
        ("200 OK", "text/html", "<html>", True, INVALID_REQUEST, "Unexpected content type: text/html"),
        ("200 OK", "application/json", "{not json", True, PARSE_ERROR, "Failed to parse JSON response"),
    ],
)
async def test_errors_as_the_sdk_transport_reports_them(
    server: Any, status: str, content_type: str, body: Any, modern: bool, code: int, message: str
) -> None:
    payload = body.encode() if isinstance(body, str) else orjson.dumps(body)

    async def answer(request: Request) -> list[bytes]:
        head = f"HTTP/1.1 {status}\r\ncontent-type: {content_type}\r\ncontent-length: {len(payload)}\r\n\r\n"
        return [head.encode(), payload]

    url, _script = await server(answer)
    caller = HttpToolCaller(
        url, protocol_version="2026-07-28" if modern else "2025-11-25", envelope=ENVELOPE if modern else None
    )
    with pytest.raises(RpcError) as raised:
        await caller.call("echo", {})
    assert raised.value.code == code and raised.value.message.startswith(message)
    await caller.close()


async def test_a_json_rpc_error_answer(server: Any) -> None:
    async def answer(request: Request) -> list[bytes]:
        error = {
            "jsonrpc": "2.0",
            "id": request.body["id"],
            "error": {"code": -32602, "message": "unknown tool"},
        }
        return json_answer(error)

    url, _ = await server(answer)
    caller = HttpToolCaller(url, protocol_version="2026-07-28", envelope=ENVELOPE)
    with pytest.raises(RpcError, match="unknown tool"):
        await caller.call("nope", {})
    await caller.close()


async def test_a_redirect_hands_the_call_to_the_sdk(server: Any) -> None:
    async def answer(request: Request) -> list[bytes]:
        return [b"HTTP/1.1 307 Temporary Redirect\r\nlocation: /other\r\ncontent-length: 0\r\n\r\n"]

    url, _ = await server(answer)
    caller = HttpToolCaller(url, protocol_version="2026-07-28", envelope=ENVELOPE)
    with pytest.raises(Redirected):
        await caller.call("echo", {})
    await caller.close()


async def test_cancelling_a_call_closes_its_connection(server: Any) -> None:
    started = asyncio.Event()
    gone = asyncio.Event()

    async def answer(request: Request) -> list[bytes] | None:
        started.set()
        if await request.reader.read() == b"":  # waits until the client closes the connection
            gone.set()
        return None

    url, _script = await server(answer)
    caller = HttpToolCaller(url, protocol_version="2026-07-28", envelope=ENVELOPE)
    call = asyncio.create_task(caller.call("slow", {}))
    await started.wait()
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    async with asyncio.timeout(5):
        await gone.wait()  # the server saw the connection go: the 2026-07-28 cancellation
    await caller.close()


async def test_a_cancelled_handshake_era_call_is_announced(server: Any) -> None:
    started = asyncio.Event()
    announced: asyncio.Future[dict[str, Any]] = asyncio.get_running_loop().create_future()

    async def answer(request: Request) -> list[bytes] | None:
        if request.body.get("method") == "notifications/cancelled":
            announced.set_result(request.body["params"])
            return [b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n"]
        started.set()
        await request.reader.read()
        return None

    url, script = await server(answer)
    caller = HttpToolCaller(url, protocol_version="2025-11-25", session_id="s")
    call = asyncio.create_task(caller.call("slow", {}))
    await started.wait()
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    async with asyncio.timeout(5):
        params = await announced
    assert params["requestId"] == script.requests[0].body["id"]
    assert script.requests[-1].head["mcp-session-id"] == "s"
    await caller.close()


async def test_server_requests_on_the_stream_are_answered_like_the_sdk_client(server: Any) -> None:
    replies: list[dict[str, Any]] = []

    async def answer(request: Request) -> list[bytes]:
        if request.body.get("method") != "tools/call":
            replies.append(request.body)
            return [b"HTTP/1.1 202 Accepted\r\ncontent-length: 0\r\n\r\n"]
        ask = {"jsonrpc": "2.0", "id": 77, "method": "elicitation/create", "params": {"message": "?"}}
        stream = sse_event(ask) + sse_event(result_of(request))
        head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
        return [head, *chunked(stream)]

    url, _ = await server(answer)
    caller = HttpToolCaller(url, protocol_version="2025-11-25", session_id="s1")
    await caller.call("asks", {})
    async with asyncio.timeout(5):
        while not replies:  # noqa: ASYNC110 - the refusal is posted in the background
            await asyncio.sleep(0.01)
    assert replies == [
        {
            "jsonrpc": "2.0",
            "id": 77,
            "error": {"code": INVALID_REQUEST, "message": "Elicitation not supported"},
        }
    ]
    await caller.close()


def test_proxies_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in (
        "http_proxy",
        "HTTP_PROXY",
        "https_proxy",
        "HTTPS_PROXY",
        "all_proxy",
        "ALL_PROXY",
        "no_proxy",
        "NO_PROXY",
    ):
        monkeypatch.delenv(name, raising=False)
    assert not proxied("http://backend.example/mcp")
    monkeypatch.setenv("HTTP_PROXY", "http://proxy.example:3128")
    assert proxied("http://backend.example/mcp")
    monkeypatch.setenv("NO_PROXY", "backend.example")
    assert not proxied("http://backend.example/mcp")


def sse_head() -> bytes:
    return b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


def priming(event_id: str, retry_ms: int = 10) -> bytes:
    """What a resumable server (one with an event store) sends first: an id, a retry delay, no data."""
    return f"id: {event_id}\nretry: {retry_ms}\ndata: \n\n".encode()


async def test_priming_events_carry_no_message(server: Any) -> None:
    async def primed(request: Request) -> list[bytes]:
        stream = (
            priming("s1-0")
            + b": a comment line\n\n"
            + b"event: other\ndata: not json\n\n"
            + b"id: s1-1\n"
            + sse_event(result_of(request, "primed"))
        )
        return [sse_head(), *chunked(stream)]

    url, script = await server(primed)
    caller = HttpToolCaller(url, protocol_version="2025-11-25", session_id="s")
    for _ in range(2):
        assert (await caller.call("echo", {}))["content"][0]["text"] == "primed"
    assert script.connections == 1  # the stream ended cleanly: the connection is reused
    await caller.close()


@pytest.mark.parametrize("how", ["clean end", "dropped connection"])
async def test_a_stream_closed_early_is_resumed_with_last_event_id(server: Any, how: str) -> None:
    def progress_event(token: int, value: int) -> bytes:
        params = {"progressToken": token, "progress": value, "total": 2}
        return sse_event({"jsonrpc": "2.0", "method": "notifications/progress", "params": params})

    async def resumable(request: Request) -> list[bytes] | None:
        call = script.requests[0]
        if request.line.startswith("POST"):
            stream = priming("e-1") + b"id: e-2\n" + progress_event(call.body["id"], 1)
            if how == "clean end":
                return [sse_head(), *chunked(stream)]
            script.writers[-1].write(sse_head() + b"%x\r\n%s\r\n" % (len(stream), stream))
            return None  # the connection closes in the middle of the chunked body
        stream = b"id: e-3\n" + progress_event(call.body["id"], 2) + b"id: e-4\n" + sse_event(result_of(call))
        return [sse_head(), *chunked(stream)]

    url, script = await server(resumable)
    caller = HttpToolCaller(url, protocol_version="2025-11-25", session_id="sess")
    seen: list[tuple[float, float | None, str | None]] = []
    result = await caller.call("slow", {}, progress=lambda *args: seen.append(args))
    assert result["content"][0]["text"] == "ok"
    post, get = script.requests  # the tool call was sent once: it already runs on the server
    assert post.line.startswith("POST") and get.line.startswith("GET /mcp ")
    assert get.head["last-event-id"] == "e-2"
    assert get.head["mcp-session-id"] == "sess"
    assert get.head["accept"] == "text/event-stream"
    assert get.head["mcp-protocol-version"] == "2025-11-25"
    assert seen == [(1, 2, None), (2, 2, None)]
    await caller.close()


async def test_a_stream_that_cannot_be_resumed_fails_the_call_only(server: Any) -> None:
    async def early(request: Request) -> list[bytes]:
        if request.line.startswith("GET"):
            return json_answer(
                {"jsonrpc": "2.0", "id": None, "error": {"code": -32000, "message": "no"}},
                "405 Method Not Allowed",
            )
        if request.body["params"]["name"] == "no_id":
            return [sse_head(), *chunked(b"data: \n\n")]
        return [sse_head(), *chunked(priming("p-1", retry_ms=1))]

    url, script = await server(early)
    caller = HttpToolCaller(url, protocol_version="2025-11-25", session_id="s")
    with pytest.raises(RpcError) as raised:
        await caller.call("no_id", {})
    assert raised.value.message == "SSE stream ended without a response"
    with pytest.raises(RpcError) as raised:
        await caller.call("primed", {})
    assert raised.value.message == "SSE stream ended and reconnection attempts were exhausted"
    assert [r.line.split()[0] for r in script.requests] == ["POST", "POST", "GET", "GET"]
    await caller.close()


@pytest.mark.parametrize("shape", ["json", "sse"])
async def test_an_answer_with_another_requests_id_is_rejected(server: Any, shape: str) -> None:
    async def wrong_id(request: Request) -> list[bytes]:
        message = {**result_of(request, "not yours"), "id": request.body["id"] + 41}
        if shape == "json":
            return json_answer(message)
        return [sse_head(), *chunked(sse_event(message))]

    url, _script = await server(wrong_id)
    caller = HttpToolCaller(url, protocol_version="2026-07-28", envelope=ENVELOPE)
    with pytest.raises(
        ValueError, match=rf"the answer is for request id {FIRST_REQUEST_ID + 41}, not {FIRST_REQUEST_ID}"
    ):
        await caller.call("echo", {})
    await caller.close()
