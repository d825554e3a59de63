"""`execute_batch`: a model's batch of calls, one result per call, in input order, always.

Contiguous calls of the same admission class run concurrently, with a
barrier between runs (docs/executor.md). A cancelled batch reports, per call, whether
it never started (`CANCELLED_BEFORE`) or was cut off while running.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

import mcp_types as types

from toolweave.executor.admission import on_admitted
from toolweave.executor.session import BatchCall
from toolweave.results import error_result

logger = logging.getLogger("toolweave.executor")

CANCELLED_BEFORE = "cancelled before execution; the call was not made"
CANCELLED_WHILE_RUNNING = "cancelled while running; the call may have been partly done"

CallFn = Callable[[str, Any], Awaitable[types.CallToolResult]]
ClassifyFn = Callable[[str, Any], str]


async def execute_batch(
    calls: Sequence[BatchCall | Mapping[str, Any]],
    call: CallFn,
    classify: ClassifyFn,
    cancel: asyncio.Event | None = None,
) -> list[types.CallToolResult]:
    batch = [as_batch_call(item, index) for index, item in enumerate(calls)]
    results: list[types.CallToolResult | None] = [None] * len(batch)
    for start, end in class_runs([classify(item.name, item.arguments) for item in batch]):
        if cancel is not None and cancel.is_set():
            break
        await _run_concurrently(batch, results, range(start, end), call, cancel)
    return [result if result is not None else error_result(CANCELLED_BEFORE) for result in results]


async def _run_concurrently(
    batch: list[BatchCall],
    results: list[types.CallToolResult | None],
    indexes: range,
    call: CallFn,
    cancel: asyncio.Event | None,
) -> None:
    admitted: set[int] = set()

    async def one(index: int) -> None:
        item = batch[index]
        on_admitted.set(lambda: admitted.add(index))
        try:
            results[index] = await call(item.name, item.arguments)
        except asyncio.CancelledError:
            raise
        except Exception as error:  # one result per call, always
            logger.exception("batch call %s to %s failed", item.id, item.name)
            results[index] = error_result(f"calling {item.name!r} failed inside the gateway: {error}")

    tasks = [asyncio.create_task(one(index)) for index in indexes]
    if cancel is None:
        await asyncio.gather(*tasks)
        return
    watcher = asyncio.create_task(cancel.wait())
    try:
        await asyncio.wait([*tasks, watcher], return_when=asyncio.FIRST_COMPLETED)
        pending = [t for t in tasks if not t.done()]
        while pending and not cancel.is_set():
            await asyncio.wait([*pending, watcher], return_when=asyncio.FIRST_COMPLETED)
            pending = [t for t in tasks if not t.done()]
        for task in pending:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for index, task in zip(indexes, tasks, strict=True):
            if task.cancelled() and results[index] is None:
                # a call still waiting for approval or a permit never started
                message = CANCELLED_WHILE_RUNNING if index in admitted else CANCELLED_BEFORE
                results[index] = error_result(message)
    finally:
        watcher.cancel()


def class_runs(classes: list[str]) -> list[tuple[int, int]]:
    """Contiguous runs of the same admission class, as (start, end) index pairs."""
    runs: list[tuple[int, int]] = []
    start = 0
    for index in range(1, len(classes) + 1):
        if index == len(classes) or classes[index] != classes[start]:
            runs.append((start, index))
            start = index
    return runs


def as_batch_call(call: BatchCall | Mapping[str, Any], index: int) -> BatchCall:
    if isinstance(call, BatchCall):
        return call
    if not isinstance(call, Mapping):
        name, arguments = getattr(call, "name", ""), getattr(call, "arguments", {})
        return BatchCall(id=str(index), name=str(name), arguments=arguments)
    arguments = call.get("arguments")
    return BatchCall(
        id=str(call.get("id", index)),
        name=str(call.get("name", "")),
        arguments=arguments if arguments is not None else {},
    )
