"""What the MCP wire raises: a JSON-RPC error answer (`RpcError`, the one for every peer toolweave
calls over JSON-RPC: HTTP backends and federated clients), a redirect or an authorization the SDK
client takes over, a relayed request the client refused. Backends turn each into an `isError`
result (or hand the call to the SDK client)."""

from __future__ import annotations

from typing import Any

from toolweave.errors import ToolweaveError


class RpcError(ToolweaveError):
    """The backend answered with a JSON-RPC error (or an HTTP error the SDK maps to one)."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


class Redirected(ToolweaveError):
    """The backend answered 3xx: nothing ran; the SDK client (which follows same-origin redirects) takes over."""


class Unauthorized(ToolweaveError):
    """The backend answered 401 or 403 (nothing ran): the SDK client's OAuth flow refreshes or steps up."""


class RelayError(ToolweaveError):
    """The client answered the relayed request with a JSON-RPC error (passed back to the backend as is)."""

    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data
