"""`execute_batch` against a real MCP backend: tkach's batch scenarios, proved structurally.

No absolute clocks: overlap and serialisation are read from the `sleep` /
`slow_write` tools' own start/end timestamps (one server process, one clock).
"""

from __future__ import annotations

from support.executor import MakeGateway, after, backend, overlap, sleep, span, write
from support.results import text
from toolweave import Gateway


async def test_allowed_missing_and_denied_each_get_a_result_in_order(make_gateway: MakeGateway) -> None:
    gw = await make_gateway(backend() + '[policy]\ndeny = ["t__delete_everything"]\n')
    results = await gw.execute_batch(
        [
            {"id": "1", "name": "t__echo", "arguments": {"text": "hello"}},
            {"id": "2", "name": "t__no_such_tool", "arguments": {}},
            {"id": "3", "name": "t__delete_everything", "arguments": {}},
            {"id": "4", "name": "t__add", "arguments": {"a": 2, "b": 3}},
        ]
    )
    assert len(results) == 4
    assert not results[0].is_error and text(results[0]) == "hello"
    assert results[1].is_error and "unknown tool 't__no_such_tool'" in text(results[1])
    assert results[2].is_error and "denied by the gateway policy" in text(results[2])
    assert not results[3].is_error and results[3].structured_content == {"sum": 5}


async def test_unknown_tool_suggests_close_names(gw: Gateway) -> None:
    (result,) = await gw.execute_batch([{"id": "x", "name": "t__ech", "arguments": {"text": "a"}}])
    assert result.is_error
    assert "Did you mean" in text(result) and "t__echo" in text(result)


async def test_parallel_reads_overlap_and_keep_input_order(gw: Gateway) -> None:
    # the first call is the slowest, so completion order differs from input order
    results = await gw.execute_batch([sleep("a", 0.6), sleep("b", 0.1), sleep("c", 0.3)])
    a, b, c = (span(r) for r in results)
    assert [a.label, b.label, c.label] == ["a", "b", "c"]
    assert overlap(a, b) and overlap(a, c) and overlap(b, c)
    assert b.end < a.end  # b finished first, yet its result is still in position 2


async def test_ro_ro_w_ro_ro_makes_three_runs(gw: Gateway) -> None:
    ex = gw.default_executor
    calls = [sleep("r1"), sleep("r2"), write("w"), sleep("r3"), sleep("r4")]
    assert [ex.classify(c["name"]) for c in calls] == ["read", "read", "serial", "read", "read"]
    r1, r2, w, r3, r4 = (span(r) for r in await gw.execute_batch(calls))
    # run 1: the two leading reads together
    assert overlap(r1, r2)
    # barrier: the write starts only after both reads ended
    assert after(w, r1) and after(w, r2)
    # barrier: the trailing reads start only after the write ended, and run together
    assert after(r3, w) and after(r4, w)
    assert overlap(r3, r4)


async def test_read_write_read_sees_the_write(gw: Gateway) -> None:
    results = await gw.execute_batch(
        [
            {"id": "1", "name": "t__counter"},
            {"id": "2", "name": "t__increment", "arguments": {"by": 5}},
            {"id": "3", "name": "t__counter"},
        ]
    )
    assert [r.structured_content for r in results] == [{"value": 0}, {"value": 5}, {"value": 5}]


async def test_a_write_between_two_fetches_serialises_them(gw: Gateway) -> None:
    # [fetch_a, save, fetch_b]: three runs, so fetch_b waits for fetch_a (≈ 2× one fetch)
    fetch_a, save, fetch_b = (
        span(r) for r in await gw.execute_batch([sleep("fetch_a"), write("save", 0.0), sleep("fetch_b")])
    )
    assert after(save, fetch_a)
    assert after(fetch_b, save)
    assert after(fetch_b, fetch_a)


async def test_two_fetches_alone_run_together(gw: Gateway) -> None:
    # [fetch_a, fetch_b]: one run, so they overlap (≈ 1× one fetch)
    fetch_a, fetch_b = (span(r) for r in await gw.execute_batch([sleep("fetch_a"), sleep("fetch_b")]))
    assert overlap(fetch_a, fetch_b)
    assert not after(fetch_b, fetch_a)


async def test_unpromoted_writes_serialise(gw: Gateway) -> None:
    first, second = (span(r) for r in await gw.execute_batch([write("w1", 0.2), write("w2", 0.2)]))
    assert after(second, first)


async def test_failures_inside_a_batch_do_not_stop_it(gw: Gateway) -> None:
    results = await gw.execute_batch(
        [
            {"id": "1", "name": "t__fail", "arguments": {"message": "boom"}},
            {"id": "2", "name": "t__add", "arguments": {"a": "not a number", "b": 1}},
            {"id": "3", "name": "t__echo", "arguments": ["not", "an", "object"]},
            {"id": "4", "name": "t__echo", "arguments": {"text": "still here"}},
        ]
    )
    assert results[0].is_error and "boom" in text(results[0])
    assert results[1].is_error and "invalid arguments for 't__add'" in text(results[1])
    assert results[2].is_error and "must be a JSON object" in text(results[2])
    assert not results[3].is_error and text(results[3]) == "still here"


async def test_empty_batch(gw: Gateway) -> None:
    assert await gw.execute_batch([]) == []


async def test_batch_entries_without_arguments_or_id(gw: Gateway) -> None:
    results = await gw.execute_batch([{"name": "t__counter"}, {"name": "t__echo", "arguments": None}])
    assert results[0].structured_content == {"value": 0}
    assert results[1].is_error and "invalid arguments" in text(results[1])
