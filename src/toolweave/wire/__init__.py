"""Every place toolweave speaks MCP bytes itself, rather than through the mcp SDK's objects.

The SDK is the protocol's reference: toolweave's MCP front is an SDK `Server`, every backend
connection an SDK `Client`, and whatever either does is what MCP means here. But a gateway pays
the SDK twice per call, once as a server and once as a client, and on the hot path that was most
of its cost (per request, the SDK builds a connection, a session, request and result models and
runs a middleware chain; its HTTP client stack adds more: docs/performance-notes.md §3). So, for
the few exchanges that are most of the traffic, a lean lane runs beside the SDK's:

- inbound, `transport`: plain 2026-07-28 `tools/call` and `tools/list` answered as JSON after the
  SDK's own checks, run with the SDK's own helpers in the SDK's order (`PlainModernLane`), and
  modern requests that cannot receive notifications sent to a JSON-response manager
  (`ModernJsonRouter`); `params`: which requests are plain enough for the lean lanes;
- outbound, `http_caller`: `tools/call` to a streamable-HTTP backend on a pooled keep-alive
  connection, on the wire the SDK client negotiated (`HttpToolCaller`);
- `relay`: where a backend's requests mid-call go (the client whose call is running);
- `sdk_compat`: every reach into the SDK's private or provisional API these lanes (and the
  front, the backends, OAuth) need, each checked by a contract test.

A lean lane only takes what it answers exactly as the SDK would; everything else, and every error
answer, is the SDK's. `tests/wire/` holds the contract tests (`test_sdk_compat.py`) and the
differential ones (`test_front_differential.py`: the same requests through the lean lanes and
through the SDK's handlers give the same bytes). A new SDK release that changes the wire breaks
there, not in a call.

This package is at the bottom of the house: it imports the SDK, Starlette and toolweave's leaf
modules, never `server`, `services`, `backends` or `catalog` (`tests/test_layout.py`). What it needs
from above (the front a lane answers for, the calling client's channel) is passed in as a
`Protocol`. `server_compat.py` (uvicorn's and Starlette's private API for dropping a WebSocket)
stays outside: it is about the ASGI server, not MCP. So does the federated tools' wire
(`backends/federated/protocol.py`, `peer.py`): JSON-RPC over a WebSocket that toolweave's own client
opens, with no SDK side to stand beside, kept with the one backend kind that uses it.
"""
