"""What the web UI's handlers raise between their parts: a form field that does not read as the
value it must be, a live call that cannot start. Each becomes a message on the page."""

from __future__ import annotations

from toolweave.errors import ToolweaveError


class Unreadable(ToolweaveError, ValueError):
    """A field holding YAML/JSON that does not read as the value it must be."""


class LiveCallRefused(ToolweaveError):
    """The call could not be started (too many running for this session); the message says why."""
