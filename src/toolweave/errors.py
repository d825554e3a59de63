"""The root of toolweave's exceptions: every error toolweave raises on purpose is a `ToolweaveError`.

Errors are values for agents and exceptions for programmers. A tool call that fails answers a
`CallToolResult` with `isError` and a message an agent can act on (`toolweave.results`); it never
raises to the client. Exceptions are for code: a misuse of the Python API, a definition that cannot
be built, a backend that refused, a store conflict. Each layer keeps its own in its `errors.py`
(`backends.errors`, `composite.errors`, `identity.errors`, `services.errors`, `store.errors`,
`wire.errors`, `server.api.errors`, ...), all deriving from this one, and the layer that owns a
boundary turns them into what its caller understands: the executor and the backends into `isError`
results, the REST API into problem answers, the CLI into messages and exit codes. See
docs/architecture.md, "Errors".

Private control-flow signals (`_Stop`, `_FirstSuccess`, ...) never leave their module and are
not errors: they stay plain exceptions.
"""

from __future__ import annotations


class ToolweaveError(Exception):
    """Base of every exception toolweave raises on purpose (catch this to catch any of them)."""
