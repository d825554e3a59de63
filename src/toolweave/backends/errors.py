"""What backends raise between their own parts: credentials that cannot be had, an argument that
cannot be encoded, an OpenAPI document that cannot be used, a federated client that broke the
protocol or went away. A backend's `call` turns each into an `isError` result naming the backend;
none reaches an agent as an exception. `FederationRefused` is the federated client's (raised by
`FederatedClient.run`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from toolweave.errors import ToolweaveError


class AuthorizationRequired(ToolweaveError):
    """An OAuth backend needs a person to authorize (again); `url` is where, when there is one."""

    def __init__(self, message: str, url: str | None = None) -> None:
        super().__init__(message)
        self.url = url


class AuthUnavailable(ToolweaveError):
    """A credential is missing or a token cannot be had; the message is for the agent and holds no secret."""


class ArgumentError(ToolweaveError, ValueError):
    """An argument cannot be sent as the operation needs (the message names it, never a secret)."""


class DocumentUnusable(ToolweaveError):
    """The document cannot be read or is not an OpenAPI / Swagger document at all (the message says why)."""


class RemoteRefRefused(ToolweaveError):
    """Raised by the resolver instead of fetching another file or URL."""


class DocumentError(ToolweaveError):
    """Something in the document stops one operation (or schema) from converting; `pointer` says where."""

    def __init__(self, pointer: str, message: str) -> None:
        super().__init__(message)
        self.pointer = pointer
        self.message = message


class FrameError(ToolweaveError):
    """A frame that breaks the protocol: the connection is closed with `code` and this message."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


class FederationRefused(ToolweaveError):
    """The gateway refused this client for good (bad key, missing scope, refused manifest)."""

    def __init__(self, code: int, reason: str, problems: Sequence[Mapping[str, Any]] = ()) -> None:
        details = "".join(f"\n  {p.get('path') or '(manifest)'}: {p.get('message')}" for p in problems)
        super().__init__(f"the gateway refused the connection ({code}): {reason}{details}")
        self.code = code
        self.reason = reason
        self.problems = list(problems)


class PeerLost(ToolweaveError):
    """The client went away (or was disconnected) while a request waited for its answer."""
