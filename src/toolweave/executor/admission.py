"""Admission control (seed 001): a class pool per call, plus optional per-tool caps.

Read-only tools share a wide read pool; mutating tools go through a serial
pool of width 1 per session (so an agent's writes keep their order) unless
promoted to the concurrent-mutation pool; composites are recursive tools:
they run in the concurrent pool of their nesting level, and their inner
calls get pools forked for the next level, so a composite never waits on a
permit that its own caller holds.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

from toolweave.catalog.catalog import ToolClass


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
