"""Per-tool health: calls, error rate and p50/p95 latency per tool and per backend over the last hour
or day, for `GET /api/v1/stats` and the dashboard page.

The executor tells the runtime's observer after every call (client calls and every inner call of a
composite), as for the Prometheus metrics; `observe` adds the call to this minute's tally in memory
(a dict lookup and a few additions). Every `FLUSH_INTERVAL` the tallies are added to the database's
rolled-up rows (`toolweave.store.stats`: one row per tool, backend, tenant and minute, and one per
hour), so several gateways sharing a database add up, and a report reads at most 60 (hour) or 24
(day) rows per series, never the run records. A report flushes first, so it includes the calls of
a moment ago.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from dataclasses import dataclass
from typing import Any, Literal

import mcp_types as types

from toolweave.catalog.catalog import Entry
from toolweave.services.metrics import COMPOSITE_BACKEND
from toolweave.store.stats import HOUR, MINUTE, SeriesKey, StatsRepository, StatsRow, Tally, percentile

logger = logging.getLogger("toolweave.stats")

FLUSH_INTERVAL = 10.0
"""Seconds between two additions of the in-memory tallies to the database."""
KEEP_MINUTES = 2 * HOUR
"""Minute rows older than this are deleted (the hour window needs one hour of them)."""
KEEP_HOURS = 8 * 86400
"""Hour rows older than this are deleted (the day window needs one day; a week is kept for charts)."""
MAX_PENDING = 50_000
"""Series-minutes held in memory at most while the database cannot be written (then the oldest go)."""

Window = Literal["hour", "day"]
WINDOWS: dict[str, tuple[int, int]] = {"hour": (MINUTE, HOUR), "day": (HOUR, 86400)}
"""window → (the span of the rows read, how far back)."""
ALL = object()
"""`report(tenant=ALL)`: every tenant's calls (the operator's view)."""


@dataclass(frozen=True, slots=True)
class Health:
    """One tool (or backend) over a window: totals, and per bucket for a chart."""

    name: str
    backend: str
    total: Tally
    series: list[tuple[int, Tally]]
    """(bucket start, tally) for every bucket of the window, oldest first (empty ones included)."""

    def summary(self) -> dict[str, Any]:
        total = self.total
        return {
            "calls": total.calls,
            "errors": total.errors,
            "errorRate": round(total.errors / total.calls, 4) if total.calls else 0.0,
            "p50Ms": _rounded(percentile(total.histogram, 0.5)),
            "p95Ms": _rounded(percentile(total.histogram, 0.95)),
        }


@dataclass(frozen=True, slots=True)
class Report:
    window: str
    start: int
    end: int
    span: int
    tools: list[Health]
    backends: list[Health]


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3 if value < 10 else 1)


class ToolStats:
    def __init__(self, repo: StatsRepository) -> None:
        self.repo = repo
        self._pending: dict[tuple[int, SeriesKey], Tally] = {}
        self._lock = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._last_prune = 0.0

    def observe(self, entry: Entry, result: types.CallToolResult, seconds: float, tenant: str | None) -> None:
        """The runtime's call observer: must stay cheap and never raise."""
        try:
            backend = entry.backend.name if entry.backend is not None else COMPOSITE_BACKEND
            now = int(time.time())
            key = (now - now % MINUTE, (entry.name, backend, tenant or ""))
            tally = self._pending.get(key)
            if tally is None:
                if len(self._pending) >= MAX_PENDING:
                    self._pending.pop(next(iter(self._pending)))
                tally = self._pending[key] = Tally()
            tally.add_call(seconds * 1000.0, bool(result.is_error))
        except Exception:
            logger.debug("recording stats failed", exc_info=True)

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._flush_loop(), name="toolweave-stats")

    async def close(self) -> None:
        if self._task is not None:
            self._task.cancel()
            self._task = None
        try:
            await self.flush()
        except Exception:
            logger.warning("cannot write the last per-tool stats", exc_info=True)

    async def flush(self) -> None:
        """Add what was observed since the last flush to the database (kept for the next try on failure)."""
        async with self._lock:
            batch, self._pending = self._pending, {}
            try:
                await self.repo.add(batch)
            except BaseException:
                for key, tally in batch.items():  # put back, merged with what came in meanwhile
                    self._pending.setdefault(key, Tally()).add(tally)
                raise

    async def _flush_loop(self) -> None:
        while True:
            await asyncio.sleep(FLUSH_INTERVAL)
            try:
                await self.flush()
                if time.time() - self._last_prune > HOUR:
                    now = int(time.time())
                    await self.repo.prune(now - KEEP_MINUTES, now - KEEP_HOURS)
                    self._last_prune = time.time()
            except Exception:
                logger.warning("cannot write per-tool stats (kept for the next try)", exc_info=True)

    async def report(self, window: Window, tenant: str | object | None = ALL) -> Report:
        """The last hour (per minute) or day (per hour) of every tool and backend: one tenant's calls
        (`None`: the operator's own), or everyone's with `ALL`."""
        span, length = WINDOWS[window]
        await self.flush()
        now = int(time.time())
        end = now - now % span + span
        start = end - length
        wanted: str | object = ALL if tenant is ALL else (tenant or "")
        rows = await self.repo.read(span, start, wanted)
        buckets = list(range(start, end, span))
        return Report(
            window=window,
            start=start,
            end=end,
            span=span,
            tools=_grouped(rows, buckets, by_tool=True),
            backends=_grouped(rows, buckets, by_tool=False),
        )


def _grouped(rows: list[StatsRow], buckets: list[int], *, by_tool: bool) -> list[Health]:
    per: dict[tuple[str, str], dict[int, Tally]] = defaultdict(dict)
    for row in rows:
        key = (row.tool, row.backend) if by_tool else (row.backend, row.backend)
        tally = per[key].setdefault(row.bucket, Tally())
        tally.add(row.tally)
    found = []
    for (name, backend), by_bucket in per.items():
        total = Tally()
        for tally in by_bucket.values():
            total.add(tally)
        series = [(bucket, by_bucket.get(bucket, Tally())) for bucket in buckets]
        found.append(Health(name, backend, total, series))
    return sorted(found, key=lambda health: (-health.total.calls, health.name))
