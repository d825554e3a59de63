"""Admission control (docs/executor.md): a class pool per call, plus optional per-tool caps.

Read-only tools share a wide read pool; mutating tools go through a serial
pool of width 1 per session (so an agent's writes keep their order) unless
promoted to the concurrent-mutation pool; composites are recursive tools:
they run in the concurrent pool of their nesting level, and their inner
calls get pools forked for the next level, so a composite never waits on a
permit that its own caller holds.

The pools belong to the caller's session, wherever it calls from: an MCP
connection keeps one pool set for its lifetime; a principal (an API key, or
the local operator) keeps one across MCP requests, REST requests, the CLI and
the Python API, bounded by `MAX_PRINCIPALS` (least recently used dropped).
"""

from __future__ import annotations

import asyncio
import contextvars
import weakref
from collections import OrderedDict
from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any

from toolweave.catalog.catalog import Entry, ToolClass
from toolweave.executor.session import Session

MAX_PRINCIPALS = 1024
"""Pool sets kept for principals (sessions without an owning connection)."""

on_admitted: contextvars.ContextVar[Callable[[], None] | None] = contextvars.ContextVar(
    "toolweave_on_admitted", default=None
)
"""Set by `execute_batch` for each call's task: told when the call holds its permits and starts."""


@dataclass(slots=True)
class Pools:
    read: asyncio.Semaphore
    serial: asyncio.Semaphore
    concurrent: asyncio.Semaphore
    concurrent_width: int

    @classmethod
    def create(cls, read_width: int, concurrent_width: int) -> Pools:
        return cls(
            read=asyncio.Semaphore(read_width),
            serial=asyncio.Semaphore(1),
            concurrent=asyncio.Semaphore(concurrent_width),
            concurrent_width=concurrent_width,
        )

    def fork(self) -> Pools:
        """Pools for one nesting level deeper: the deadlock-prone concurrent pool is fresh,
        the serial and read pools stay shared so mutations still serialise across the tree."""
        return Pools(
            read=self.read,
            serial=self.serial,
            concurrent=asyncio.Semaphore(self.concurrent_width),
            concurrent_width=self.concurrent_width,
        )

    def for_class(self, tool_class: ToolClass) -> asyncio.Semaphore:
        if tool_class == "read":
            return self.read
        if tool_class == "serial":
            return self.serial
        return self.concurrent


class Admission:
    """The admission state of one gateway: pool sets per session, and per-tool caps shared by all."""

    def __init__(
        self, read_width: int, concurrent_width: int, *, max_principals: int = MAX_PRINCIPALS
    ) -> None:
        self.read_width = read_width
        self.concurrent_width = concurrent_width
        self._max_principals = max_principals
        self._by_owner: weakref.WeakKeyDictionary[Any, Pools] = weakref.WeakKeyDictionary()
        self._by_principal: OrderedDict[Hashable, Pools] = OrderedDict()
        self._caps: dict[str, asyncio.Semaphore] = {}

    def pools_for(self, session: Session) -> Pools:
        """The session's pool set: its owner's (a connection) if it has one, else its principal's."""
        owner = session.owner
        if owner is not None:
            pools = self._by_owner.get(owner)
            if pools is None:
                pools = self._by_owner[owner] = self.new_pools()
            return pools
        key = session.principal
        pools = self._by_principal.get(key)
        if pools is None:
            pools = self._by_principal[key] = self.new_pools()
            if len(self._by_principal) > self._max_principals:
                self._by_principal.popitem(last=False)
        else:
            self._by_principal.move_to_end(key)
        return pools

    def new_pools(self) -> Pools:
        return Pools.create(self.read_width, self.concurrent_width)

    def cap_for(self, entry: Entry) -> asyncio.Semaphore | None:
        """The per-tool cap (`max_concurrency`) shared by every session, or None."""
        if entry.max_concurrency is None:
            return None
        cap = self._caps.get(entry.name)
        if cap is None:
            cap = self._caps[entry.name] = asyncio.Semaphore(entry.max_concurrency)
        return cap


def admitted() -> None:
    """Tell a batch that the current call holds its permits and starts now."""
    hook = on_admitted.get()
    if hook is not None:
        hook()
