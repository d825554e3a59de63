"""The calls clients are waiting for right now, for a gateway that is stopping: what it waits for
(said on its terminal), and what it stops when told to stop now (a second Ctrl-C).

A stopped call is not a cancelled one. Its caller gets an `isError` result that says the gateway
is stopping (not a dropped connection or an "Internal Server Error"), and its run record is not
written `cancelled`: it stays `running` until the run store closes, which leaves it `interrupted`,
so `toolweave runs resume` continues it once the gateway is back (docs/workflows.md).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import mcp_types as types

from toolweave.results import error_result


@dataclass(slots=True)
class CallInFlight:
    name: str
    run_id: str | None = None
    """The run record of the call (a composite's, or a recorded direct call's), once it has one."""


class InFlight:
    """The top-level calls running now, by the task that runs each (a composite's inner calls are part
    of their composite's call)."""

    __slots__ = ("_calls", "stopping")

    def __init__(self) -> None:
        self._calls: dict[asyncio.Task[object], CallInFlight] = {}
        self.stopping = False
        """Set by `stop_all`: a cancellation from now on is the gateway stopping, not a caller's."""

    def __contains__(self, task: object) -> bool:
        return task in self._calls

    def enter(self, task: asyncio.Task[object], name: str) -> None:
        self._calls[task] = CallInFlight(name)

    def leave(self, task: asyncio.Task[object]) -> None:
        self._calls.pop(task, None)

    def note_run(self, run_id: str) -> None:
        """The call of the current task has a run record (said when it is stopped: it can be resumed)."""
        task = asyncio.current_task()
        call = self._calls.get(task) if task is not None else None
        if call is not None and call.run_id is None:
            call.run_id = run_id

    def calls(self) -> list[CallInFlight]:
        return list(self._calls.values())

    def stop_all(self) -> int:
        """Stop every call in flight now; each caller gets `stopped_result`. Returns how many."""
        self.stopping = True
        for task in self._calls:
            task.cancel()
        return len(self._calls)

    def stopped_result(self, task: asyncio.Task[object]) -> types.CallToolResult | None:
        """The answer of a call `stop_all` stopped (its cancellation taken back), or None when the
        cancellation is someone else's (a client that went away, a timeout) and must go on."""
        call = self._calls.get(task)
        if call is None or not self.stopping or task.cancelling() != 1:
            return None
        task.uncancel()
        return error_result(stopped_message(call))


def stopped_message(call: CallInFlight) -> str:
    head = f"the gateway is shutting down and stopped {call.name!r} before it finished"
    if call.run_id is None:
        return f"{head}; call it again once the gateway is back."
    return (
        f"{head}; its run {call.run_id} is left interrupted: once the gateway is back, "
        f"`toolweave runs resume {call.run_id}` (or POST /api/v1/runs/{call.run_id}/resume) continues it "
        "without repeating its completed steps."
    )
