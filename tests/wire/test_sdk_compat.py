"""Contract tests for `toolweave.wire.sdk_compat`, the one home of every reach into the mcp SDK's private or
provisional API: each reach is checked against the installed SDK, with real objects, so a release that
moves or reshapes one fails here by name. `pyproject.toml` bounds `mcp` to the minor version these ran on.
"""

from __future__ import annotations

import asyncio
import inspect
from importlib.metadata import version
from typing import Any

import mcp_types as types
import pytest
from mcp import Client
from mcp.server import Server
from mcp.server.connection import Connection
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.session import ServerSession
from mcp_types import CLIENT_CAPABILITIES_META_KEY, CLIENT_INFO_META_KEY, PROTOCOL_VERSION_META_KEY

from toolweave.wire import sdk_compat

KEYS = (PROTOCOL_VERSION_META_KEY, CLIENT_INFO_META_KEY, CLIENT_CAPABILITIES_META_KEY)


def test_the_installed_sdk_is_the_tested_minor() -> None:
    assert version("mcp").startswith(sdk_compat.TESTED_MINOR + "."), (
        f"mcp {version('mcp')} is not the minor version sdk_compat was tested on ({sdk_compat.TESTED_MINOR}): "
        "run these tests, then move TESTED_MINOR and the bound in pyproject.toml together"
    )


def test_a_server_session_keeps_its_connection_and_request_channel() -> None:
    source = inspect.getsource(ServerSession)
    assert "self._connection" in source and "self._request_outbound" in source


server = MCPServer("compat")


@server.tool()
async def ask(ctx: Context) -> str:
    """Ask the client a question through the request's own channel, the way the gateway relays one."""
    session = ctx.request_context.session
    assert sdk_compat.connection_of(session) is not None
    answer = await sdk_compat.send_raw_request(
        session,
        "elicitation/create",
        {"message": "name?", "requestedSchema": {"type": "object", "properties": {"n": {"type": "string"}}}},
    )
    return f"{answer['action']}:{answer['content']['n']}"


async def test_send_raw_request_reaches_the_client_on_the_calls_stream() -> None:
    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="accept", content={"n": "Ada"})

    async with Client(server, mode="legacy", elicitation_callback=answer) as client:
        result = await client.call_tool("ask", {})
    assert not result.is_error, result
    assert result.content[0].text == "accept:Ada"  # type: ignore[union-attr]


@server.tool()
async def ask_with_progress(ctx: Context) -> str:
    """A relayed request whose client reports progress: it arrives under the SDK's token, at `on_progress`."""
    seen: list[tuple[float, float | None, str | None]] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        seen.append((progress, total, message))

    params = {"message": "name?", "requestedSchema": {"type": "object", "properties": {}}}
    params["_meta"] = {"progressToken": "the-backends-token"}
    await sdk_compat.send_raw_request(
        ctx.request_context.session, "elicitation/create", params, on_progress=on_progress
    )
    return repr(seen)


async def test_send_raw_request_passes_the_clients_progress_on() -> None:
    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        token = (params.meta or {}).get("progress_token")
        assert token is not None and token != "the-backends-token"  # the SDK's own token replaces it
        await context.session.send_progress_notification(token, 1.0, 2.0, "half")
        await asyncio.sleep(0.2)
        return types.ElicitResult(action="decline")

    async with Client(server, mode="legacy", elicitation_callback=answer) as client:
        result = await client.call_tool("ask_with_progress", {})
    assert result.content[0].text == "[(1.0, 2.0, 'half')]"  # type: ignore[union-attr]


async def test_the_client_envelope_and_input_required_driver() -> None:
    async def answer(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    async with Client(server, elicitation_callback=answer) as client:
        envelope = sdk_compat.client_envelope(client, "2026-07-28", KEYS)
        assert envelope[PROTOCOL_VERSION_META_KEY] == "2026-07-28"
        assert envelope[CLIENT_INFO_META_KEY]["name"]
        assert "elicitation" in envelope[CLIENT_CAPABILITIES_META_KEY]
        assert inspect.iscoroutinefunction(client._drive_input_required)
        assert list(inspect.signature(client._drive_input_required).parameters)[:2] == ["first", "retry"]


async def test_create_http_client() -> None:
    async with sdk_compat.create_http_client({"x-test": "1"}) as http:
        assert http.headers["x-test"] == "1"


@pytest.mark.parametrize(
    "raw",
    [
        {},
        {"elicitation": {}},
        {"sampling": {}, "roots": {"listChanged": True}, "experimental": {"x": {}}},
        {"elicitation": 5},
        "not an object",
        None,
    ],
)
def test_envelope_capabilities_types_them_as_a_connection_from_the_envelope_does(raw: Any) -> None:
    info = {"name": "c", "version": "1"}
    connection = Connection.from_envelope("2026-07-28", info, raw)
    typed = sdk_compat.envelope_capabilities(raw)
    assert typed == connection.client_capabilities
    assert (typed is None) == (raw in (None, "not an object") or raw == {"elicitation": 5})


def test_serialize_server_result_and_the_middleware_seam() -> None:
    shaped = sdk_compat.serialize_server_result("tools/list", "2025-11-25", {"tools": []})
    assert shaped == {"tools": []}

    async def middleware(ctx: Any, call_next: Any) -> Any:
        return await call_next(ctx)

    lowlevel = Server("seam")
    assert hasattr(lowlevel, "middleware")
    sdk_compat.set_fast_path(lowlevel, middleware)
    assert lowlevel.middleware == [middleware]


@pytest.mark.parametrize("name", ["cache_hints", "server_info_stamp"])
def test_the_server_attributes_the_fast_path_reads(name: str) -> None:
    assert hasattr(Server("seam"), name)


async def test_end_session_forgets_and_terminates_a_managers_session_and_holds_session_sees_it() -> None:
    from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

    manager = StreamableHTTPSessionManager(app=Server("compat-end"))
    assert isinstance(manager._server_instances, dict)
    parameters = list(inspect.signature(manager._discard_session).parameters)
    assert parameters == ["session_id", "transport"], parameters
    async with manager.run():
        transport = manager._admit_session(None)
        assert transport is not None and transport.mcp_session_id is not None
        assert sdk_compat.holds_session(manager, transport.mcp_session_id)
        assert await sdk_compat.end_session(manager, transport.mcp_session_id)
        assert not sdk_compat.holds_session(manager, transport.mcp_session_id)
        assert transport.is_terminated and transport.mcp_session_id not in manager._server_instances
        assert not await sdk_compat.end_session(manager, transport.mcp_session_id)


# -- OAuth client ([backends.oauth]) ------------------------------------------------------


class _Storage:
    def __init__(self, tokens: Any = None, client: Any = None) -> None:
        self.tokens, self.client = tokens, client

    async def get_tokens(self) -> Any:
        return self.tokens

    async def set_tokens(self, tokens: Any) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> Any:
        return self.client

    async def set_client_info(self, client: Any) -> None:
        self.client = client


def _client_metadata() -> Any:
    from mcp.shared.auth import OAuthClientMetadata

    return OAuthClientMetadata(redirect_uris=["http://127.0.0.1:1/callback"])  # type: ignore[list-item]


async def test_refreshing_keeps_the_expiry_of_stored_tokens() -> None:
    """The SDK's private `_initialize` loads tokens without an expiry; ours sets it from `expires_in`."""
    from mcp.client.auth import OAuthClientProvider
    from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

    client = OAuthClientInformationFull(client_id="c", redirect_uris=["http://127.0.0.1:1/callback"])  # type: ignore[list-item]
    stored = OAuthToken(access_token="old", refresh_token="r", expires_in=0)
    plain = OAuthClientProvider("http://x/mcp", _client_metadata(), _Storage(stored, client))
    await plain._initialize()
    assert plain.context.is_token_valid(), "the SDK now keeps stored expiry: sdk_compat.refreshing can go"
    ours = sdk_compat.refreshing(OAuthClientProvider)(
        "http://x/mcp", _client_metadata(), _Storage(stored, client)
    )
    await ours._initialize()
    assert not ours.context.is_token_valid() and ours.context.can_refresh_token()


async def test_scoped_provider_asks_for_the_configured_scopes_and_adds_a_step_up() -> None:
    from urllib.parse import parse_qs, urlsplit

    from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthMetadata, OAuthToken

    asked: list[str] = []
    revocation: list[str] = []

    async def redirect(url: str) -> None:
        asked.append(url)

    async def callback() -> AuthorizationCodeResult:
        state = parse_qs(urlsplit(asked[-1]).query)["state"][0]
        return AuthorizationCodeResult(code="code", state=state)

    provider = sdk_compat.ScopedOAuthProvider(
        "http://x/mcp",
        _client_metadata(),
        _Storage(),
        redirect,
        callback,
        client_metadata_url=None,
        configured_scope="repo",
        on_metadata=revocation.append,
    )
    provider.context.client_info = OAuthClientInformationFull(
        client_id="c",
        redirect_uris=["http://127.0.0.1:1/callback"],  # type: ignore[list-item]
    )
    provider.context.oauth_metadata = OAuthMetadata.model_validate(
        {
            "issuer": "http://as",
            "authorization_endpoint": "http://as/authorize",
            "token_endpoint": "http://as/token",
            "revocation_endpoint": "http://as/revoke",
        }
    )
    provider.context.client_metadata.scope = "everything the server lists"
    request = await provider._perform_authorization()
    assert request.url.path == "/token"
    assert parse_qs(urlsplit(asked[-1]).query)["scope"] == ["repo"]
    assert revocation == ["http://as/revoke"]
    provider.context.current_tokens = OAuthToken(access_token="a", scope="repo")
    provider.context.client_metadata.scope = "repo admin:org"  # what the SDK chose on a step-up
    await provider._perform_authorization()
    assert parse_qs(urlsplit(asked[-1]).query)["scope"] == ["repo admin:org"]


async def test_create_http_client_takes_an_auth_flow() -> None:
    import httpx2

    class Marker(httpx2.Auth):
        pass

    marker = Marker()
    async with sdk_compat.create_http_client(None, auth=marker) as http:
        assert http.auth is marker


async def test_refreshing_answers_a_401_with_one_refresh_and_the_request_again() -> None:
    """The private `_auth_flow`, `_refresh_token`, `_handle_refresh_response` and `_add_auth_header`
    that `refreshing` drives: a 401 to a token thought valid → one refresh → the request again."""
    import time

    import httpx2
    from mcp.client.auth import OAuthClientProvider
    from mcp.shared.auth import OAuthClientInformationFull, OAuthToken

    client = OAuthClientInformationFull(client_id="c", redirect_uris=["http://127.0.0.1:1/callback"])  # type: ignore[list-item]
    storage = _Storage(OAuthToken(access_token="old", refresh_token="r", expires_in=3600), client)
    provider = sdk_compat.refreshing(OAuthClientProvider)("http://x/mcp", _client_metadata(), storage)
    request = httpx2.Request("POST", "http://x/mcp", content=b"{}")
    flow = provider.async_auth_flow(request)
    sent = await flow.__anext__()
    assert sent is request and request.headers["Authorization"] == "Bearer old"
    refresh = await flow.asend(httpx2.Response(401, request=request))
    assert refresh is not request and b"grant_type=refresh_token" in refresh.content
    fresh = {"access_token": "new", "token_type": "Bearer", "expires_in": 3600}
    again = await flow.asend(httpx2.Response(200, json=fresh, request=refresh))
    assert again is request and request.headers["Authorization"] == "Bearer new"
    with pytest.raises(StopAsyncIteration):
        await flow.asend(httpx2.Response(200, json={}, request=request))
    assert storage.tokens.access_token == "new" and storage.tokens.refresh_token == "r"
    assert provider.context.token_expiry_time is not None and provider.context.token_expiry_time > time.time()


async def _asgi_post(
    app: Any, body: dict[str, Any], session_id: str | None = None
) -> tuple[int, dict[str, str], bytes]:
    """One POST straight into an ASGI app: (status, headers, body)."""
    import orjson

    headers = [
        (b"content-type", b"application/json"),
        (b"accept", b"application/json, text/event-stream"),
        (b"mcp-protocol-version", b"2025-11-25"),
    ]
    if session_id is not None:
        headers.append((b"mcp-session-id", session_id.encode()))
    scope = {
        "type": "http",
        "method": "POST",
        "path": "/mcp",
        "raw_path": b"/mcp",
        "query_string": b"",
        "headers": headers,
        "server": ("127.0.0.1", 1),
        "client": ("127.0.0.1", 2),
        "scheme": "http",
    }
    pending = [{"type": "http.request", "body": orjson.dumps(body), "more_body": False}]
    answer: dict[str, Any] = {"body": b""}

    async def receive() -> Any:
        if pending:
            return pending.pop()
        await asyncio.Event().wait()

    async def send(message: Any) -> None:
        if message["type"] == "http.response.start":
            answer["status"] = message["status"]
            answer["headers"] = {k.decode(): v.decode() for k, v in message.get("headers", [])}
        else:
            answer["body"] += message.get("body", b"")

    await app(scope, receive, send)
    return answer["status"], answer["headers"], answer["body"]


async def test_adopt_session_serves_a_session_another_manager_opened() -> None:
    """Two managers (two replicas): a session initialized on one is served by the other once adopted,
    its connection born ready with the recorded version and client params; DELETE ends it there."""
    import orjson
    from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager

    server = MCPServer("compat-adopt")

    @server.tool()
    def ping(ctx: Context) -> str:
        """Which client, on which version."""
        connection = sdk_compat.connection_of(ctx.session)
        return f"{connection.client_params.client_info.name} {connection.protocol_version}"

    low = server._lowlevel_server
    first = StreamableHTTPSessionManager(app=low, json_response=True)
    second = StreamableHTTPSessionManager(app=low, json_response=True)
    params = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "cc", "version": "1"},
    }
    async with first.run(), second.run():
        status, headers, _body = await _asgi_post(
            StreamableHTTPASGIApp(first),
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params},
        )
        assert status == 200
        session_id = headers["mcp-session-id"]
        call = {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "tools/call",
            "params": {"name": "ping", "arguments": {}},
        }
        status, _headers, _body = await _asgi_post(StreamableHTTPASGIApp(second), call, session_id)
        assert status == 404  # not adopted yet: the SDK's unknown session

        connections: list[Any] = []

        def prepare(connection: Any) -> None:
            sdk_compat.born_ready(connection, "2025-11-25", params)
            connections.append(connection)

        transport = await sdk_compat.adopt_session(second, session_id, prepare)
        assert sdk_compat.open_sessions(second)[session_id] is transport
        assert await sdk_compat.adopt_session(second, session_id, prepare) is transport  # once
        assert connections[0].initialize_accepted and connections[0].session_id == session_id
        status, _headers, body = await _asgi_post(StreamableHTTPASGIApp(second), call, session_id)
        assert status == 200, body
        assert orjson.loads(body)["result"]["content"][0]["text"] == "cc 2025-11-25"
        assert await sdk_compat.end_session(second, session_id)
        assert session_id not in sdk_compat.open_sessions(second) and session_id in sdk_compat.open_sessions(
            first
        )


async def test_known_server_provider_refreshes_once_then_authorizes_at_the_known_server() -> None:
    """`KnownServerOAuthProvider` (an HTTP API's flow) drives the SDK's private `_perform_authorization`,
    `_handle_token_response`, `_refresh_token`, `_handle_refresh_response`: stored token → 401 → one
    refresh → 401 again → a person authorizes at the configured endpoints (no MCP discovery)."""
    from urllib.parse import parse_qs, urlsplit

    import httpx2
    from mcp.shared.auth import AuthorizationCodeResult, OAuthClientInformationFull, OAuthMetadata, OAuthToken

    asked: list[str] = []

    async def redirect(url: str) -> None:
        asked.append(url)

    async def callback() -> AuthorizationCodeResult:
        return AuthorizationCodeResult(code="the-code", state=parse_qs(urlsplit(asked[-1]).query)["state"][0])

    client = OAuthClientInformationFull(client_id="app", redirect_uris=["http://127.0.0.1:1/callback"])  # type: ignore[list-item]
    storage = _Storage(OAuthToken(access_token="old", refresh_token="r", expires_in=3600), client)
    metadata = OAuthMetadata.model_validate(
        {"issuer": "http://as", "authorization_endpoint": "http://as/auth", "token_endpoint": "http://as/tok"}
    )
    provider = sdk_compat.KnownServerOAuthProvider(
        "http://api/v1", _client_metadata(), storage, redirect, callback, metadata=metadata, scope="read"
    )
    request = httpx2.Request("GET", "http://api/v1/me")
    flow = provider.async_auth_flow(request)
    assert await flow.__anext__() is request and request.headers["Authorization"] == "Bearer old"
    refresh = await flow.asend(httpx2.Response(401, request=request))
    assert str(refresh.url) == "http://as/tok" and b"grant_type=refresh_token" in refresh.content
    token = {"access_token": "new", "token_type": "Bearer", "expires_in": 3600}
    assert await flow.asend(httpx2.Response(200, json=token, request=refresh)) is request
    assert request.headers["Authorization"] == "Bearer new"
    exchange = await flow.asend(httpx2.Response(401, request=request))
    query = parse_qs(urlsplit(asked[-1]).query)
    assert asked[-1].startswith("http://as/auth?") and query["scope"] == ["read"] and "resource" not in query
    assert str(exchange.url) == "http://as/tok" and b"code=the-code" in exchange.content
    token = {"access_token": "newest", "token_type": "Bearer", "expires_in": 3600, "refresh_token": "r2"}
    assert await flow.asend(httpx2.Response(200, json=token, request=exchange)) is request
    assert request.headers["Authorization"] == "Bearer newest"
    with pytest.raises(StopAsyncIteration):
        await flow.asend(httpx2.Response(200, json={}, request=request))
    assert storage.tokens.access_token == "newest"


async def test_give_event_stores_gives_each_new_session_its_own_store() -> None:
    """A manager's new session's transport stores its events (the priming event of `initialize`'s
    stream first) in the store made for that session; an adopted one in the store it is given."""
    from mcp.server.streamable_http import EventCallback, EventStore
    from mcp.server.streamable_http_manager import StreamableHTTPASGIApp, StreamableHTTPSessionManager

    class Kept(EventStore):
        def __init__(self, session_id: str) -> None:
            self.session_id = session_id
            self.streams: list[str] = []

        async def store_event(self, stream_id: str, message: Any) -> str:
            self.streams.append(stream_id)
            return f"{self.session_id}-{len(self.streams)}"

        async def replay_events_after(self, last_event_id: str, send_callback: EventCallback) -> str | None:
            return None

    stores: dict[str, Kept] = {}

    def store_of(session_id: str) -> Kept:
        stores[session_id] = Kept(session_id)
        return stores[session_id]

    manager = StreamableHTTPSessionManager(app=MCPServer("compat-events")._lowlevel_server)
    sdk_compat.give_event_stores(manager, store_of)
    params = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "e", "version": "1"},
    }
    async with manager.run():
        status, headers, body = await _asgi_post(
            StreamableHTTPASGIApp(manager),
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params},
        )
        assert status == 200, body
        session_id = headers["mcp-session-id"]
        assert stores[session_id].streams == ["1", "1"]  # the priming event, then the answer
        assert f"id: {session_id}-1".encode() in body
        adopted = Kept("adopted")
        transport = await sdk_compat.adopt_session(manager, "other", lambda _c: None, event_store=adopted)
        assert transport._event_store is adopted
        assert sdk_compat.GET_STREAM_KEY == "_GET_stream"
