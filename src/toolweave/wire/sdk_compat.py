"""Every reach into the mcp SDK's private or provisional API, in one place.

toolweave passes MCP through faithfully and fast, which now and then needs something the SDK does not
publish: a session's request-scoped back channel, the envelope its client stamps on 2026-07-28
requests, its input-required driver, its HTTP client factory, the `Server.middleware` seam. Each such
reach is a function here, and `tests/wire/test_sdk_compat.py` checks each against the installed SDK, so a
release that moves one fails there, loudly, by name, rather than somewhere in a call. `pyproject.toml`
bounds `mcp` to the minor versions those tests passed on.
"""

from __future__ import annotations

import functools
import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeVar

import anyio
import mcp_types as types
from mcp.client.auth import OAuthClientProvider
from mcp.client.auth.utils import (
    create_client_registration_request,
    handle_registration_response,
    union_scopes,
)
from mcp.client.session import DEFAULT_CLIENT_INFO
from mcp.server.connection import Connection
from mcp.server.connection import _typed as _typed_envelope_value
from mcp.server.runner import serve_connection
from mcp.server.streamable_http import GET_STREAM_KEY as GET_STREAM_KEY
from mcp.server.streamable_http import StreamableHTTPServerTransport
from mcp.shared._httpx_utils import create_mcp_http_client as _create_mcp_http_client
from mcp.shared.jsonrpc_dispatcher import JSONRPCDispatcher
from mcp_types import methods as _methods

TESTED_MINOR = "2.3"
"""The SDK minor version the contract tests ran on (`pyproject.toml`: `mcp>=2.3,<2.4`)."""


# -- server side ------------------------------------------------------------------------


async def end_session(manager: Any, session_id: str) -> bool:
    """End one open session of a `StreamableHTTPSessionManager` now, as if its client had sent DELETE:
    forgotten at once (its ID answers 404) and its transport terminated, which ends its open streams
    and its server task. The SDK has no public way (private `_server_instances`, `_discard_session`);
    a revoked API key's sessions must end. False when the manager does not hold the session."""
    transport = manager._server_instances.get(session_id)
    if transport is None:
        return False
    await manager._discard_session(session_id, transport)
    return True


def holds_session(manager: Any, session_id: str) -> bool:
    """Whether a `StreamableHTTPSessionManager` still serves the session `session_id` (private
    `_server_instances`): the SDK keeps no public view of its sessions, and one it has ended (closed
    by its client, timed out) must stop counting against its key's session limits."""
    return session_id in manager._server_instances


def open_sessions(manager: Any) -> Mapping[str, Any]:
    """The sessions a `StreamableHTTPSessionManager` serves now, by ID (private `_server_instances`;
    the SDK keeps no public view of them)."""
    sessions: Mapping[str, Any] = manager._server_instances
    return sessions


def born_ready(connection: Any, version: str, client: Mapping[str, Any]) -> None:
    """A loop-mode `Connection` made as its `initialize` (params `client`, negotiated `version`) and
    `notifications/initialized` would have made it: what `ServerRunner` commits, done from a record."""
    connection.client_params = types.InitializeRequestParams.model_validate(client, by_name=False)
    connection.protocol_version = version
    connection.initialized.set()


def distinct_request_ids(connection: Any) -> None:
    """Number the server-to-client requests of this copy of a shared session from a random base.

    Every replica holding a copy of one session has its own dispatcher, whose private `_next_id`
    counts from 0: two replicas asking the client at once (an elicitation on each) would both send
    id 1, and a client's answer, relayed to every copy, would settle the wrong one. A base drawn
    from 2**50 (below 2**53, exact in any client's JSON numbers) makes a clash between copies
    vanishingly unlikely."""
    dispatcher = getattr(connection, "outbound", None)
    if dispatcher is not None and isinstance(getattr(dispatcher, "_next_id", None), int):
        dispatcher._next_id = secrets.randbelow(1 << 50)


def give_event_stores(manager: Any, store_of: Callable[[str], Any]) -> None:
    """Each session the manager opens from now on gets its own `EventStore`, `store_of(session_id)`.

    The SDK gives every transport the manager's one store, and a store is told only a stream's ID
    (a request's JSON-RPC id, or `GET_STREAM_KEY`), which repeats across sessions; bounding and
    finding a session's events needs the session. So the manager's private `_admit_session` (which
    makes a new session's transport) is wrapped, setting the transport's private `_event_store`
    before its first request is read (the priming event of `initialize`'s stream is stored there)."""
    admit = manager._admit_session

    def admitted(requestor: Any) -> Any:
        transport = admit(requestor)
        if transport is not None:
            transport._event_store = store_of(transport.mcp_session_id)
        return transport

    manager._admit_session = admitted


async def adopt_session(
    manager: Any, session_id: str, prepare: Callable[[Any], None], *, event_store: Any = None
) -> Any:
    """Serve a handshake-era session another gateway opened, as if its `initialize` had been answered
    here: a transport under the same ID in the manager's table (private `_server_instances`,
    `_task_group`, `_lifespan_state`, `_discard_session`) and a server task like the manager's own
    (`serve_connection` over a loop-mode dispatcher), whose `Connection` `prepare` makes born-ready
    (protocol version, client params, `initialized`) before the first request is read. The session
    then lives here like any other: the idle timeout, DELETE and `end_session` end it. Returns the
    transport (already in the table when this returns). `event_store`: the session's own (else the
    manager's)."""
    found = manager._server_instances.get(session_id)
    if found is not None:
        return found
    transport = StreamableHTTPServerTransport(
        mcp_session_id=session_id,
        is_json_response_enabled=manager.json_response,
        event_store=event_store if event_store is not None else manager.event_store,
        security_settings=manager.security_settings,
        retry_interval=manager.retry_interval,
        idle_timeout=manager.session_idle_timeout,
    )

    async def run_server(*, task_status: Any = anyio.TASK_STATUS_IGNORED) -> None:
        try:
            async with transport.connect() as (read_stream, write_stream):
                dispatcher: Any = JSONRPCDispatcher(
                    read_stream, write_stream, inline_methods=frozenset({"initialize"})
                )
                connection = Connection.for_loop(dispatcher, session_id=session_id)
                prepare(connection)
                task_status.started()
                idle_scope = transport.idle_scope or anyio.CancelScope()
                with idle_scope:
                    await serve_connection(
                        manager.app, dispatcher, connection=connection, lifespan_state=manager._lifespan_state
                    )
        except Exception:
            logging.getLogger("toolweave.server").exception("adopted session %s crashed", session_id)
        finally:
            await manager._discard_session(session_id, transport)

    manager._server_instances[session_id] = transport
    try:
        await manager._task_group.start(run_server)
    except BaseException:
        await manager._discard_session(session_id, transport)
        raise
    return transport


def connection_of(session: Any) -> Any:
    """The `Connection` behind a `ServerSession` (private `_connection`): a handshake-era client's
    identity for the gateway (its pools, its log level, its subscriptions), None if there is none."""
    return getattr(session, "_connection", None)


async def send_raw_request(
    session: Any,
    method: str,
    params: Mapping[str, Any] | None,
    *,
    on_progress: Callable[[float, float | None, str | None], Awaitable[None]] | None = None,
) -> dict[str, Any]:
    """A server-to-client request on the stream of the request being handled (private `_request_outbound`),
    params and result as wire dicts: a backend's request reaches the client exactly as it was sent.
    `on_progress`: the request gets the SDK's own progress token, and the client's progress on it is
    passed there (the dispatcher's `CallOptions.on_progress`)."""
    outbound = session._request_outbound
    options: Any = {"on_progress": on_progress} if on_progress is not None else None
    answer: dict[str, Any] = await outbound.send_raw_request(
        method, dict(params) if params is not None else None, options
    )
    return answer


def serialize_server_result(method: str, version: str, result: dict[str, Any]) -> dict[str, Any]:
    """A result dict shaped for `version`'s wire, as the SDK's runner shapes it (`mcp_types.methods`)."""
    return _methods.serialize_server_result(method, version, result)


def envelope_capabilities(raw: Any) -> types.ClientCapabilities | None:
    """The client capabilities a 2026-07-28 request's `_meta` envelope declares, typed exactly as
    `Connection.from_envelope` types them (a mis-shaped value reads as not supplied), without building
    the per-request `Connection` (client params, an event, an exit stack) the plain lane never uses."""
    return _typed_envelope_value(types.ClientCapabilities, raw)


def set_fast_path(server: Any, middleware: Callable[[Any, Any], Awaitable[Any]]) -> None:
    """Install the one `Server.middleware` (provisional): it answers what it takes without the SDK's
    per-request params validation and result re-validation, and hands the rest on."""
    server.middleware = [middleware]


# -- client side ------------------------------------------------------------------------


def client_envelope(client: Any, version: str, meta_keys: tuple[str, str, str]) -> dict[str, Any]:
    """The `_meta` envelope the SDK client stamps on its 2026-07-28 requests (private `_client_info`,
    `_build_capabilities`): (protocol version, client info, client capabilities) under `meta_keys`."""
    session = client.session
    info = session._client_info or DEFAULT_CLIENT_INFO
    capabilities: types.ClientCapabilities = session._build_capabilities(version)
    version_key, info_key, capabilities_key = meta_keys
    return {
        version_key: version,
        info_key: info.model_dump(by_alias=True, mode="json", exclude_none=True),
        capabilities_key: capabilities.model_dump(by_alias=True, mode="json", exclude_none=True),
    }


async def drive_input_required(
    client: Any, first: Any, retry: Callable[[Any, str | None], Awaitable[Any]]
) -> Any:
    """The SDK client's input-required loop (private `_drive_input_required`): answers a backend's
    `InputRequiredResult` with the client's callbacks and retries, as its own `call_tool` does."""
    return await client._drive_input_required(first, retry)


def create_http_client(headers: dict[str, str] | None, auth: Any = None) -> Any:
    """The SDK's httpx client factory (private module `mcp.shared._httpx_utils`), with its timeouts;
    `auth`: an OAuth backend's `httpx2.Auth` flow."""
    return _create_mcp_http_client(headers=headers, auth=auth)


# -- OAuth client (backends with [backends.oauth]) ------------------------------------------

_P = TypeVar("_P", bound=OAuthClientProvider)


@functools.cache
def refreshing(provider: type[_P]) -> type[_P]:
    """`provider` that refreshes where the SDK would start a whole new authorization (a person, for
    the authorization-code flow):

    - tokens loaded from storage keep their expiry (private `_initialize`): the SDK loads them with
      no expiry, so an old token is sent and meets a 401. Storage gives `expires_in` counted from now;
    - a 401 to a token the client thought valid (revoked, or expired early, server-side) is answered
      by one refresh and the request sent again (private `_refresh_token`, `_handle_refresh_response`,
      `_add_auth_header`); only when the refresh is refused, or the retry meets a 401 too, does the
      SDK's flow go on to authorize anew.
    """

    class Refreshing(provider):  # type: ignore[valid-type,misc]
        async def _initialize(self) -> None:
            await super()._initialize()
            tokens = self.context.current_tokens
            if tokens is not None and tokens.expires_in is not None:
                self.context.update_token_expiry(tokens)

        async def _auth_flow(self, request: Any) -> Any:
            flow = super()._auth_flow(request)
            refreshed = sent = False
            try:
                outgoing = await flow.__anext__()
                while True:
                    refreshed = refreshed or (outgoing is not request and not sent)  # the SDK's own
                    sent = sent or outgoing is request
                    response = yield outgoing
                    if outgoing is request and response.status_code == 401 and not refreshed:
                        refreshed = True
                        if self.context.can_refresh_token():
                            answer = yield await self._refresh_token()
                            if await self._handle_refresh_response(answer):
                                self._add_auth_header(request)
                                response = yield request
                    outgoing = await flow.asend(response)
            except StopAsyncIteration:
                return
            finally:
                await flow.aclose()

    Refreshing.__name__ = Refreshing.__qualname__ = f"Refreshing{provider.__name__}"
    return Refreshing


class ScopedOAuthProvider(refreshing(OAuthClientProvider)):  # type: ignore[misc]
    """The authorization-code flow with the config's `scopes` (private `_perform_authorization`, whose
    scope the SDK takes only from the server): the configured scopes on a first authorization, with
    what a step-up asks for added to them; and the server's revocation endpoint told to `on_metadata`."""

    def __init__(
        self,
        server_url: str,
        client_metadata: Any,
        storage: Any,
        redirect_handler: Callable[[str], Awaitable[None]],
        callback_handler: Callable[[], Awaitable[Any]],
        *,
        client_metadata_url: str | None,
        configured_scope: str | None,
        on_metadata: Callable[[str], None],
    ) -> None:
        super().__init__(
            server_url,
            client_metadata,
            storage,
            redirect_handler,
            callback_handler,
            client_metadata_url=client_metadata_url,
        )
        self._configured_scope = configured_scope
        self._on_metadata = on_metadata

    async def _perform_authorization(self) -> Any:
        context = self.context
        if self._configured_scope:
            first = context.current_tokens is None
            chosen = context.client_metadata.scope
            context.client_metadata.scope = (
                self._configured_scope if first else union_scopes(self._configured_scope, chosen)
            )
        metadata = context.oauth_metadata
        if metadata is not None and metadata.revocation_endpoint is not None:
            self._on_metadata(str(metadata.revocation_endpoint))
        return await super()._perform_authorization()


class KnownServerOAuthProvider(refreshing(OAuthClientProvider)):  # type: ignore[misc]
    """The authorization-code flow for an HTTP API whose authorization server is known beforehand
    (its OpenAPI security scheme, or a configured issuer) rather than discovered from an MCP 401: the
    SDK's PKCE authorization, code exchange and refresh (private `_perform_authorization`,
    `_handle_token_response`, `_refresh_token`, `_handle_refresh_response`, `_add_auth_header`,
    `_initialize`), without the MCP discovery steps its own `_auth_flow` runs on a 401.

    A request goes out with the stored token (refreshed first when it expired); a 401 gets one
    refresh and the request again; a 401 after that, or no token at all, means a person authorizes
    (the `redirect_handler`: a served gateway's raises, so the call says where to go).
    """

    def __init__(
        self,
        server_url: str,
        client_metadata: Any,
        storage: Any,
        redirect_handler: Callable[[str], Awaitable[None]],
        callback_handler: Callable[[], Awaitable[Any]],
        *,
        metadata: Any,
        scope: str | None,
    ) -> None:
        super().__init__(server_url, client_metadata, storage, redirect_handler, callback_handler)
        self.context.oauth_metadata = metadata
        self.context.auth_server_url = str(metadata.issuer)
        self.context.client_metadata.scope = scope

    async def authorize_now(self, http: Any) -> None:
        """Authorize (a person, through the redirect and callback handlers) and store the tokens."""
        async with self.context.lock:
            if not self._initialized:
                await self._initialize()
            await self._register(http)
            response = await http.send(await self._perform_authorization())
            await response.aread()
            await self._handle_token_response(response)

    async def _register(self, http: Any) -> None:
        """Dynamic client registration (RFC 7591) where no client is configured and the server offers it."""
        if self.context.client_info is not None:
            return
        metadata = self.context.oauth_metadata
        if metadata is None or metadata.registration_endpoint is None:
            from mcp.client.auth import OAuthFlowError

            raise OAuthFlowError(
                "the authorization server offers no client registration: set client_id (and client_secret) "
                "in [backends.oauth]"
            )
        request = create_client_registration_request(metadata, self.context.client_metadata, "")
        response = await http.send(request)
        await response.aread()
        client = await handle_registration_response(response)
        self.context.client_info = client
        await self.context.storage.set_client_info(client)

    async def _auth_flow(self, request: Any) -> Any:
        async with self.context.lock:
            if not self._initialized:
                await self._initialize()
            refreshed = False
            if not self.context.is_token_valid() and self.context.can_refresh_token():
                refreshed = True
                await self._handle_refresh_response((yield await self._refresh_token()))
            for _attempt in range(2):  # the token as it is, then once refreshed after a 401
                if not self.context.is_token_valid():
                    break
                self._add_auth_header(request)
                response = yield request
                if response.status_code != 401:
                    return
                if refreshed or not self.context.can_refresh_token():
                    break
                refreshed = True
                await self._handle_refresh_response((yield await self._refresh_token()))
            # no usable token: a person authorizes (a served gateway's handler raises instead)
            if self.context.client_info is None:
                from mcp.client.auth import OAuthFlowError

                raise OAuthFlowError(
                    "no OAuth client for this API yet: authorize it first (toolweave login, or the UI's Connect)"
                )
            token_response = yield await self._perform_authorization()
            await self._handle_token_response(token_response)
            self._add_auth_header(request)
            yield request
