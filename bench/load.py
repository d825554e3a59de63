"""Load generation: persistent `mcp.Client` sessions, N concurrent workers, warmup, percentiles.

A `Target` is one way of making a call (direct to a backend, through toolweave, through
a peer gateway). `compare()` measures several targets *side by side*: every target keeps
its own persistent sessions, and the calls are made in interleaved rounds (A, B, C,
B, C, A, ...) so that the noise of a 2-core machine lands on all of them alike.
"""

from __future__ import annotations

import math
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared._httpx_utils import create_mcp_http_client

CallFn = Callable[[Any], Awaitable[Any]]
"""One call made with an entered client (an `mcp.Client`, or e.g. `rawclient.RawMcpClient`)."""
ClientFactory = Callable[[], AbstractAsyncContextManager[Any]]

CALL_TIMEOUT_S = 30.0


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) of already sorted values, linearly interpolated."""
    if not sorted_values:
        return math.nan
    if len(sorted_values) == 1:
        return float(sorted_values[0])
    rank = (len(sorted_values) - 1) * q / 100.0
    low = math.floor(rank)
    high = min(low + 1, len(sorted_values) - 1)
    frac = rank - low
    return float(sorted_values[low] + (sorted_values[high] - sorted_values[low]) * frac)


@dataclass
class LoadResult:
    """Latencies (ms) of one target at one concurrency, and the time spent making them."""

    label: str
    concurrency: int
    latencies_ms: list[float] = field(default_factory=list)
    errors: int = 0
    active_s: float = 0.0
    first_error: str | None = None
    cpu_s: float | None = None
    """CPU time the serving process (`Target.pid`) spent during this target's segments."""

    @property
    def calls(self) -> int:
        return len(self.latencies_ms)

    def pct(self, q: float) -> float:
        return percentile(sorted(self.latencies_ms), q)

    @property
    def p50(self) -> float:
        return self.pct(50)

    @property
    def calls_per_s(self) -> float:
        return self.calls / self.active_s if self.active_s > 0 else math.nan

    @property
    def cpu_ms_per_call(self) -> float:
        """CPU of the serving process per call (its background work included); NaN when not measured."""
        made = self.calls + self.errors
        return self.cpu_s * 1000.0 / made if self.cpu_s is not None and made else math.nan

    def summary(self) -> dict[str, Any]:
        ordered = sorted(self.latencies_ms)
        return {
            "label": self.label,
            "concurrency": self.concurrency,
            "calls": self.calls,
            "errors": self.errors,
            "first_error": self.first_error,
            "p50_ms": round(percentile(ordered, 50), 3),
            "cpu_ms_per_call": round(self.cpu_ms_per_call, 4),
            "p95_ms": round(percentile(ordered, 95), 3),
            "p99_ms": round(percentile(ordered, 99), 3),
            "mean_ms": round(sum(ordered) / len(ordered), 3) if ordered else math.nan,
            "calls_per_s": round(self.calls_per_s, 1),
        }


@dataclass
class Target:
    """A named way to make one call: a client factory and the call to make with it."""

    label: str
    make_client: ClientFactory
    call: CallFn
    pid: int | None = None
    """The process serving this target (a gateway): its CPU time per call is measured too."""


def process_cpu_s(pid: int | None) -> float | None:
    """User + system CPU seconds of a process and its threads so far (Linux `/proc`), or None.

    CPU per call stays comparable on a loaded machine, where wall-clock latencies of
    every target stretch with the load.
    """
    if pid is None:
        return None
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def url_client(url: str, **kwargs: Any) -> ClientFactory:
    """A factory of SDK clients for a streamable-HTTP URL (SDK defaults unless overridden)."""
    return lambda: Client(url, **kwargs)


@asynccontextmanager
async def _headers_transport(url: str, headers: dict[str, str]) -> AsyncIterator[Any]:
    async with (
        create_mcp_http_client(headers=headers) as http,
        streamable_http_client(url, http_client=http) as streams,
    ):
        yield streams


def header_client(url: str, headers: dict[str, str], **kwargs: Any) -> ClientFactory:
    """A factory of SDK clients that send extra HTTP headers (e.g. a bearer token)."""
    return lambda: Client(_headers_transport(url, headers), **kwargs)


def tool_call(name: str, arguments: dict[str, Any] | None = None) -> CallFn:
    """A call that runs `tools/call name arguments` and fails on an `isError` result."""

    async def call(client: Client) -> Any:
        result = await client.call_tool(name, arguments or {})
        if result.is_error:
            text = " ".join(getattr(item, "text", "") for item in result.content)
            raise RuntimeError(f"{name} returned isError: {text[:300]}")
        return result

    return call


async def _timed(client: Any, call: CallFn, result: LoadResult) -> None:
    start = time.perf_counter()
    try:
        with anyio.fail_after(CALL_TIMEOUT_S):
            await call(client)
    except Exception as exc:  # noqa: BLE001 - a failed call is counted, not fatal
        result.errors += 1
        if result.first_error is None:
            result.first_error = f"{type(exc).__name__}: {exc}"[:500]
        return
    result.latencies_ms.append((time.perf_counter() - start) * 1000.0)


async def _run_segment(
    clients: Sequence[Any], call: CallFn, calls: int, result: LoadResult, deadline: float
) -> None:
    """Make `calls` calls with one worker per client; stop early at `deadline`."""
    remaining = [calls]

    async def worker(client: Any) -> None:
        while remaining[0] > 0 and time.monotonic() < deadline:
            remaining[0] -= 1
            await _timed(client, call, result)

    start = time.perf_counter()
    async with anyio.create_task_group() as tg:
        for client in clients:
            tg.start_soon(worker, client)
    result.active_s += time.perf_counter() - start


async def _open_clients(stack: AsyncExitStack, target: Target, count: int) -> list[Any]:
    clients: list[Any] = []
    for _ in range(count):
        # No cancel scope around this: the client's own task group lives inside the stack.
        clients.append(await stack.enter_async_context(target.make_client()))
    return clients


async def _warm(clients: Sequence[Any], target: Target, warmup: int, max_seconds: float) -> None:
    scratch = LoadResult(target.label, len(clients))
    deadline = time.monotonic() + max_seconds
    await _run_segment(clients, target.call, max(warmup, len(clients)), scratch, deadline)
    if scratch.errors and not scratch.latencies_ms:
        raise RuntimeError(f"{target.label}: every warmup call failed: {scratch.first_error}")


async def compare(
    targets: Sequence[Target],
    *,
    concurrency: int,
    calls: int,
    warmup: int = 20,
    rounds: int = 5,
    max_seconds: float = 120.0,
) -> dict[str, LoadResult]:
    """Measure every target with `calls` calls at `concurrency`, interleaved in `rounds` rounds.

    The call budget of each target is split across the rounds; the target order
    rotates each round. Bounded in time: measuring takes at most about `max_seconds`
    (each segment gets an equal share, so a slow target gets fewer calls rather than
    starving the others) and each target's warmup at most a quarter of it.
    """
    results = {t.label: LoadResult(t.label, concurrency) for t in targets}
    per_round = max(1, math.ceil(calls / rounds))
    segment_s = max_seconds / (rounds * len(targets))
    async with AsyncExitStack() as stack:
        pools = {t.label: await _open_clients(stack, t, concurrency) for t in targets}
        for target in targets:
            await _warm(pools[target.label], target, warmup, max(1.0, max_seconds / 4))
        for round_index in range(rounds):
            order = list(targets[round_index % len(targets) :]) + list(targets[: round_index % len(targets)])
            for target in order:
                deadline = time.monotonic() + segment_s
                before = process_cpu_s(target.pid)
                await _run_segment(
                    pools[target.label], target.call, per_round, results[target.label], deadline
                )
                after = process_cpu_s(target.pid)
                if before is not None and after is not None:
                    result = results[target.label]
                    result.cpu_s = (result.cpu_s or 0.0) + after - before
    return results


async def measure(
    target: Target, *, concurrency: int, calls: int, warmup: int = 20, max_seconds: float = 120.0
) -> LoadResult:
    """Measure one target on its own (prefer `compare` for anything compared)."""
    results = await compare(
        [target], concurrency=concurrency, calls=calls, warmup=warmup, rounds=1, max_seconds=max_seconds
    )
    return results[target.label]
