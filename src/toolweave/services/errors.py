"""What the served gateway's services raise: a definition refused (with its HTTP status), a change
feed that cannot work, a tenant's connection that cannot be opened, event streams over their
share, an LLM answer too large. The REST API turns them into problem answers."""

from __future__ import annotations

from toolweave.errors import ToolweaveError
from toolweave.problems import Problem


class DefinitionError(ToolweaveError):
    """A definition was rejected; `status` is the HTTP status (409 clash, 422 invalid)."""

    def __init__(self, status: int, code: str, message: str, problems: list[Problem] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.problems = problems or []


class SyncError(ToolweaveError, ValueError):
    """The change feed is configured but cannot work (the `redis` package is missing): a startup error."""


class ConnectionUnavailable(ToolweaveError):
    """The tenant's connection exists but its backend session could not be opened (message has no secret)."""


class StreamsBusy(ToolweaveError, OverflowError):
    """No stream now: `status` 429 when the caller's own share is used up, 503 when the gateway's is."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class AnswerTooLarge(ToolweaveError, ValueError):
    """The endpoint answered more than `MAX_ANSWER_BYTES`."""
