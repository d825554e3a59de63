"""What the executor's stages raise between themselves, and what resuming a run refuses with.

A stage that refuses a call raises here; `ToolExecutor` turns the refusal into the call's
`isError` result (the agent's value), so none of these reaches an MCP client as an exception.
`ResumeError` is for the REST API and the UI, which answer it with its status and code.
"""

from __future__ import annotations

from collections.abc import Sequence

from toolweave.errors import ToolweaveError
from toolweave.problems import Problem, as_problems


class InvalidArguments(ToolweaveError):
    """The arguments cannot be sent to the tool; the message names every problem and field (never a
    secret's value) and is the `isError` text the agent reads."""


class ResumeError(ToolweaveError):
    """Why a run cannot be resumed. `status` and `code` are the REST API's; `problems` are (path, message)."""

    def __init__(
        self, status: int, code: str, message: str, problems: Sequence[Problem | tuple[str, str]] = ()
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.problems = as_problems(problems)
