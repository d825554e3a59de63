"""Helpers for executor tests: test-server configs, a signalling run store, span relations."""

from __future__ import annotations

import asyncio
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import mcp_types as types

from support.configs import stdio_backend, toml_table
from toolweave import Gateway
from toolweave.runs import MemoryRunStore, RunRecord


def backend(name: str = "t", extra: str = "") -> str:
    """A `[[backends]]` table running the test server; `extra` (TOML lines) go inside the table."""
    return toml_table("backends", stdio_backend(name)) + f"{extra}\n"


class SignallingRunStore(MemoryRunStore):
    """A run store that tells a test when a call has been admitted and started (needs record_direct_calls)."""

    def __init__(self) -> None:
        super().__init__()
        self.started: defaultdict[str, asyncio.Event] = defaultdict(asyncio.Event)

    async def start_run(self, record: RunRecord) -> None:
        await super().start_run(record)
        self.started[record.tool].set()


MakeGateway = Callable[..., Awaitable[Gateway]]


@dataclass(frozen=True, slots=True)
class Span:
    label: str
    start: float
    end: float


def span(result: types.CallToolResult) -> Span:
    """The server-side start/end of a `sleep` or `slow_write` call."""
    assert not result.is_error, result
    data = result.structured_content
    assert data is not None
    return Span(data["label"], data["start"], data["end"])


def overlap(a: Span, b: Span) -> bool:
    """Both were running at some moment (each started before the other ended)."""
    return a.start < b.end and b.start < a.end


def after(later: Span, earlier: Span) -> bool:
    """`later` started only once `earlier` had ended."""
    return later.start >= earlier.end


def sleep(label: str, seconds: float = 0.3) -> dict[str, Any]:
    return {"id": label, "name": "t__sleep", "arguments": {"seconds": seconds, "label": label}}


def write(label: str, seconds: float = 0.3) -> dict[str, Any]:
    return {"id": label, "name": "t__slow_write", "arguments": {"seconds": seconds, "label": label}}
