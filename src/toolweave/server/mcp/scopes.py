"""Which API-key scope each MCP method needs: the one table, and the one check every entry uses.

Reading what the gateway offers (tools, resources, prompts, change notifications)
needs `tools:read`; anything that runs a backend's handler (a tool call, reading a
resource, rendering a prompt) needs `tools:call`, exactly as a REST `GET` needs
`tools:read` and a REST call `tools:call` (docs/api.md). Methods that only set up
the conversation need nothing. A method the gateway answers must be in one of the
two sets: `tests/security/test_scopes.py` checks every registered handler.
"""

from __future__ import annotations

from mcp.shared.exceptions import MCPError

from toolweave.executor.session import CALL_SCOPE, Session

READ_SCOPE = "tools:read"
METHOD_SCOPES: dict[str, str] = {
    "tools/list": READ_SCOPE,
    "resources/list": READ_SCOPE,
    "resources/templates/list": READ_SCOPE,
    "prompts/list": READ_SCOPE,
    "subscriptions/listen": READ_SCOPE,
    "resources/subscribe": READ_SCOPE,
    "resources/unsubscribe": READ_SCOPE,
    "completion/complete": READ_SCOPE,
    "tools/call": CALL_SCOPE,
    "resources/read": CALL_SCOPE,
    "prompts/get": CALL_SCOPE,
}
"""MCP method → the scope a caller needs for it."""
UNSCOPED_METHODS = frozenset({"initialize", "ping", "server/discover", "logging/setLevel"})
"""Methods that reveal and run nothing: every caller may send them."""
SCOPE_ERROR_CODE = -32001


def missing_scope(session: Session, method: str) -> str | None:
    """The scope `session` lacks for `method`, or None. A method in neither set needs `tools:read`
    (a handler added later is closed until someone decides otherwise)."""
    if method in UNSCOPED_METHODS or method.startswith("notifications/"):
        return None
    needed = METHOD_SCOPES.get(method, READ_SCOPE)
    return None if needed in session.scopes else needed


def scope_error(method: str, scope: str) -> str:
    return f"this API key lacks the {scope} scope, which {method} needs"


def require_scope(session: Session, method: str) -> None:
    """The MCP protocol error for a caller whose key lacks the scope of `method` (before anything runs)."""
    scope = missing_scope(session, method)
    if scope is not None:
        raise MCPError(code=SCOPE_ERROR_CODE, message=scope_error(method, scope))
