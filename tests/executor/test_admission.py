"""Admission control against a real MCP backend: class pools, promotion, per-session serial pools,
shared per-tool caps, and short-circuits that never take a permit."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

from support.executor import MakeGateway, after, backend, overlap, sleep, span, write
from support.results import text
from toolweave import Gateway
from toolweave.executor import Pools, Session
from toolweave.executor.admission import on_admitted

GUARD = 20  # seconds: a hang guard only


async def test_classes_come_from_annotations(gw: Gateway) -> None:
    ex = gw.default_executor
    assert ex.classify("t__sleep") == "read"  # readOnlyHint
    assert ex.classify("t__counter") == "read"
    assert ex.classify("t__increment") == "serial"  # mutating, not promoted
    assert ex.classify("t__delete_everything") == "serial"
    assert ex.classify("t__crash") == "serial"  # no annotations at all: mutating
    assert ex.classify("t__nope") == "short"


async def test_promoted_writes_overlap(make_gateway: MakeGateway) -> None:
    gw = await make_gateway(backend(extra="tools.slow_write.concurrent = true"))
    assert gw.default_executor.classify("t__slow_write") == "concurrent"
    assert gw.default_executor.classify("t__increment") == "serial"  # only the named tool is promoted
    w1, w2 = (span(r) for r in await gw.execute_batch([write("w1"), write("w2")]))
    assert overlap(w1, w2)


async def test_a_backend_can_promote_all_its_mutating_tools(make_gateway: MakeGateway) -> None:
    gw = await make_gateway(backend(extra="concurrent = true"))
    ex = gw.default_executor
    assert ex.classify("t__slow_write") == "concurrent"
    assert ex.classify("t__increment") == "concurrent"
    assert ex.classify("t__sleep") == "read"  # reads stay reads
    w1, w2 = (span(r) for r in await gw.execute_batch([write("w1"), write("w2")]))
    assert overlap(w1, w2)


async def test_a_tool_override_can_demote_a_promoted_backend_tool(make_gateway: MakeGateway) -> None:
    gw = await make_gateway(backend(extra="concurrent = true\ntools.slow_write.concurrent = false"))
    assert gw.default_executor.classify("t__slow_write") == "serial"
    w1, w2 = (span(r) for r in await gw.execute_batch([write("w1", 0.2), write("w2", 0.2)]))
    assert after(w2, w1)


async def test_concurrent_width_caps_promoted_writes(make_gateway: MakeGateway) -> None:
    gw = await make_gateway(backend(extra="concurrent = true") + "[policy]\nconcurrent_width = 1\n")
    w1, w2 = sorted(
        (span(r) for r in await gw.execute_batch([write("w1", 0.2), write("w2", 0.2)])), key=lambda s: s.start
    )
    assert after(w2, w1)


async def test_read_width_caps_reads(make_gateway: MakeGateway) -> None:
    gw = await make_gateway(backend() + "[policy]\nread_width = 1\n")
    r1, r2 = sorted(
        (span(r) for r in await gw.execute_batch([sleep("r1", 0.2), sleep("r2", 0.2)])), key=lambda s: s.start
    )
    assert after(r2, r1)


async def test_the_serial_pool_is_per_session(gw: Gateway) -> None:
    alice, bob = gw.executor(Session(label="alice")), gw.executor(Session(label="bob"))
    # one session's writes queue behind each other...
    same = await asyncio.gather(
        alice.call("t__slow_write", write("a1")["arguments"]),
        alice.call("t__slow_write", write("a2")["arguments"]),
    )
    a1, a2 = sorted((span(r) for r in same), key=lambda s: s.start)
    assert after(a2, a1)
    # ...but two sessions each have their own width-1 pool
    both = await asyncio.gather(
        alice.call("t__slow_write", write("a")["arguments"]),
        bob.call("t__slow_write", write("b")["arguments"]),
    )
    assert overlap(*(span(r) for r in both))


async def test_a_per_tool_cap_is_shared_by_all_sessions(make_gateway: MakeGateway) -> None:
    gw = await make_gateway(backend(extra="tools.sleep.max_concurrency = 1"))
    alice, bob = gw.executor(Session(label="alice")), gw.executor(Session(label="bob"))
    both = await asyncio.gather(
        alice.call("t__sleep", sleep("a", 0.2)["arguments"]),
        bob.call("t__sleep", sleep("b", 0.2)["arguments"]),
    )
    first, second = sorted((span(r) for r in both), key=lambda s: s.start)
    assert after(second, first)
    # other read tools are not capped
    results = await gw.execute_batch(
        [sleep("c", 0.2), {"id": "e", "name": "t__echo", "arguments": {"text": "x"}}]
    )
    assert not any(r.is_error for r in results)


async def test_denied_unknown_and_invalid_calls_take_no_permit(make_gateway: MakeGateway) -> None:
    gw = await make_gateway(backend() + '[policy]\ndeny = ["t__delete_everything"]\n')
    ex = gw.executor()
    async with ex.pools.serial:  # the session's only serial permit is taken: any admitted write would block
        async with asyncio.timeout(GUARD):
            denied = await ex.call("t__delete_everything", {})
            unknown = await ex.call("t__missing", {})
            invalid = await ex.call("t__increment", {"by": "two"})
            batch = await ex.execute_batch(
                [{"id": "1", "name": "t__delete_everything"}, {"id": "2", "name": "t__missing"}]
            )
    assert "denied" in text(denied)
    assert "unknown tool" in text(unknown)
    assert "invalid arguments" in text(invalid)
    assert all(r.is_error for r in batch)
    assert ex.classify("t__delete_everything") == "short"


def test_forked_pools_share_serial_and_read_but_not_concurrent() -> None:
    pools = Pools.create(read_width=4, concurrent_width=2)
    child = pools.fork()
    assert child.serial is pools.serial
    assert child.read is pools.read
    assert child.concurrent is not pools.concurrent
    assert child.for_class("composite") is child.concurrent
    assert child.for_class("concurrent") is child.concurrent
    assert child.for_class("serial") is pools.serial
    assert child.for_class("read") is pools.read


class WaitsSeen:
    """A tracer (`toolweave.tracing.CallTracer`) that keeps only the stages calls waited in."""

    def __init__(self) -> None:
        self.waits: list[tuple[str, str]] = []

    @contextlib.contextmanager
    def call(self, entry: Any, session: Any, depth: int) -> Iterator[Any]:
        yield SimpleNamespace(finish=lambda result: None)

    def backend(self, entry: Any) -> contextlib.nullcontext[None]:
        return contextlib.nullcontext()

    def waited(self, stage: str, entry: Any, started_ns: int) -> None:
        self.waits.append((stage, entry.name))

    def run(self, record: Any) -> None:
        pass


async def test_an_admission_span_is_for_a_call_that_queued_not_for_a_slow_machine(
    make_gateway: MakeGateway,
) -> None:
    gw = await make_gateway(backend(extra="tools.sleep.max_concurrency = 1"))
    seen = gw.registry.tracer = WaitsSeen()
    ex = gw.executor(Session(label="alice"))

    def descheduled() -> None:  # the process lost the CPU between arriving and starting
        time.sleep(0.005)

    on_admitted.set(descheduled)
    assert not (await ex.call("t__sleep", sleep("alone", 0)["arguments"])).is_error
    on_admitted.set(None)
    assert seen.waits == []  # a free slot: it did not queue, however long the machine took

    first_in = asyncio.Event()

    async def first() -> Any:
        on_admitted.set(first_in.set)  # this task's context only
        return await ex.call("t__sleep", sleep("first", 0.3)["arguments"])

    holding = asyncio.create_task(first())
    async with asyncio.timeout(GUARD):
        await first_in.wait()
        second = await ex.call("t__sleep", sleep("second", 0)["arguments"])
        assert not second.is_error and not (await holding).is_error
    assert seen.waits == [("admission", "t__sleep")]  # the second waited for the cap's one slot
