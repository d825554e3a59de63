"""Per-tool health, rolled up: calls, errors and a latency histogram per tool, backend, tenant and
minute (`MINUTE`) or hour (`HOUR`), so the last hour or day of a tool is read from at most 60 or
24 rows, never from the run records.

Latencies go into log-spaced buckets (each 25% wider than the one before, from 0.1 ms), kept
sparse as `{index: count}`; two histograms add bucket by bucket, so rows of several gateways and
several minutes merge exactly, and a percentile read from the sum is within a bucket's width
(±12%) of the true one.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import and_, delete, select, update
from sqlalchemy.ext.asyncio import AsyncConnection

from toolweave.store._sql import upsert
from toolweave.store.database import Database
from toolweave.store.tables import tool_stats

MINUTE = 60
HOUR = 3600
FIRST_MS = 0.1
"""The first bucket's upper bound."""
GROWTH = 1.25
LAST_BUCKET = 90
"""0.1 ms × 1.25^90 ≈ 5 days: everything slower shares the last bucket."""
_LOG_GROWTH = math.log(GROWTH)


def bucket_of(ms: float) -> int:
    """The histogram bucket holding a latency of `ms` milliseconds."""
    if ms <= FIRST_MS:
        return 0
    return min(LAST_BUCKET, math.ceil(math.log(ms / FIRST_MS) / _LOG_GROWTH))


def percentile(histogram: Mapping[int, int], fraction: float) -> float | None:
    """The latency (ms) below which `fraction` of the calls fall, interpolated geometrically in its
    bucket; None for no calls."""
    total = sum(histogram.values())
    if total == 0:
        return None
    rank = fraction * total
    seen = 0
    for index in sorted(histogram):
        count = histogram[index]
        if seen + count >= rank:
            upper: float = FIRST_MS * GROWTH**index
            lower = upper / GROWTH if index > 0 else 0.0
            if lower <= 0:
                return upper * (rank - seen) / count if count else upper
            spread: float = (upper / lower) ** ((rank - seen) / count)
            return lower * spread
        seen += count
    return FIRST_MS * GROWTH ** max(histogram)


@dataclass(slots=True)
class Tally:
    """Calls, errors, summed latency and the histogram of one series in one bucket (or summed)."""

    calls: int = 0
    errors: int = 0
    total_ms: float = 0.0
    histogram: dict[int, int] = field(default_factory=dict)

    def add_call(self, ms: float, is_error: bool) -> None:
        self.calls += 1
        self.errors += 1 if is_error else 0
        self.total_ms += ms
        index = bucket_of(ms)
        self.histogram[index] = self.histogram.get(index, 0) + 1

    def add(self, other: Tally) -> None:
        self.calls += other.calls
        self.errors += other.errors
        self.total_ms += other.total_ms
        for index, count in other.histogram.items():
            self.histogram[index] = self.histogram.get(index, 0) + count


SeriesKey = tuple[str, str, str]
"""(tool, backend, tenant); tenant `""` is the operator's (no tenant)."""


@dataclass(frozen=True, slots=True)
class StatsRow:
    span: int
    bucket: int
    tool: str
    backend: str
    tenant: str
    tally: Tally


def _histogram(raw: Any) -> dict[int, int]:
    return {int(index): int(count) for index, count in (raw or {}).items()}


class StatsRepository:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def add(self, tallies: Mapping[tuple[int, SeriesKey], Tally]) -> None:
        """Add minute tallies `{(minute start, series): tally}` into their minute and hour rows, in one
        transaction. Each row is created empty if missing, then locked and added to, so gateways
        sharing the database add up instead of overwriting each other."""
        if not tallies:
            return
        async with self._db.write() as conn:
            for (minute, key), tally in sorted(tallies.items()):
                for span in (MINUTE, HOUR):
                    await _add_row(conn, span, minute - minute % span, key, tally)

    async def read(self, span: int, since: int, tenant: str | object | None) -> list[StatsRow]:
        """Rows of `span` from bucket `since` on: one tenant's (`""` the operator's), or every
        tenant's when `tenant` is `ALL` (any other object)."""
        query = select(tool_stats).where(tool_stats.c.span == span, tool_stats.c.bucket >= since)
        if isinstance(tenant, str):
            query = query.where(tool_stats.c.tenant == tenant)
        async with self._db.read() as conn:
            rows = (await conn.execute(query)).all()
        return [
            StatsRow(
                r.span,
                r.bucket,
                r.tool,
                r.backend,
                r.tenant,
                Tally(r.calls, r.errors, r.total_ms, _histogram(r.histogram)),
            )
            for r in rows
        ]

    async def prune(self, minutes_before: int, hours_before: int) -> int:
        async with self._db.write() as conn:
            gone = 0
            for span, before in ((MINUTE, minutes_before), (HOUR, hours_before)):
                result = await conn.execute(
                    delete(tool_stats).where(tool_stats.c.span == span, tool_stats.c.bucket < before)
                )
                gone += int(result.rowcount or 0)
        return gone


async def _add_row(conn: AsyncConnection, span: int, bucket: int, key: SeriesKey, tally: Tally) -> None:
    tool, backend, tenant = key
    identity = {"span": span, "bucket": bucket, "tool": tool, "backend": backend, "tenant": tenant}
    empty = {"calls": 0, "errors": 0, "total_ms": 0.0, "histogram": {}}
    await upsert(conn, tool_stats, {**identity, **empty}, list(identity))
    where = and_(*(tool_stats.c[name] == value for name, value in identity.items()))
    row = (await conn.execute(select(tool_stats).where(where).with_for_update())).one()
    merged = Tally(row.calls, row.errors, row.total_ms, _histogram(row.histogram))
    merged.add(tally)
    histogram = {str(index): count for index, count in sorted(merged.histogram.items())}
    values = {
        "calls": merged.calls,
        "errors": merged.errors,
        "total_ms": merged.total_ms,
        "histogram": histogram,
    }
    await conn.execute(update(tool_stats).where(where).values(**values))


def summed(rows: Iterable[StatsRow]) -> Tally:
    total = Tally()
    for row in rows:
        total.add(row.tally)
    return total
