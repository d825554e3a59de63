"""An in-process Python backend whose tool waits for the test: `python = "tw_gates"`.

A test that must see a run while it is still running cannot rely on a sleep (on a loaded machine
the browser may take longer than any nap); `wait_for` holds a step until the test calls
`open_gate(name)`. The gateway runs in the test's event loop (support/browser.serve_ui), so an
asyncio event is enough.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Iterator

import toolweave

_GATES: dict[str, asyncio.Event] = {}


@contextlib.contextmanager
def gate(name: str) -> Iterator[None]:
    """A fresh, closed gate `name` for the block (events belong to one event loop: each test makes
    its own), opened when the block ends so a failed test leaves no step waiting."""
    _GATES[name] = asyncio.Event()
    try:
        yield
    finally:
        open_gate(name)


def open_gate(name: str) -> None:
    """Let every `wait_for(name)` return."""
    _GATES.setdefault(name, asyncio.Event()).set()


@toolweave.tool(read_only=True)
async def wait_for(gate: str) -> str:
    """Return once the test opens the gate `gate`."""
    await _GATES.setdefault(gate, asyncio.Event()).wait()
    return f"{gate} opened"
