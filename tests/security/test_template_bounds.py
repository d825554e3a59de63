"""Finding 2(a): every template's cost is bounded while it renders, not after.

As found: `center`, `replace`, `indent`, `format`, `%`, `join` and namespace loops built strings of
100–400 M characters; a lone `{{ expr }}` had no size check (50 MB reached a backend); repeated
squaring of an integer blocked the event loop for seconds. Each worst case below is refused with a
clear `TemplateLimitError` before it allocates (memory peak measured with tracemalloc), and a
render too heavy for the event loop moves to the compute lane (`run_bounded`).
"""

from __future__ import annotations

import asyncio
import threading
import tracemalloc
from typing import Any

import pytest

from toolweave.templates import (
    MAX_RENDERED_CHARS,
    TemplateError,
    TemplateLimitError,
    compile_template,
    run_bounded,
)

MB = 1024 * 1024
PEAK_LIMIT = 16 * MB
"""No refused template may allocate more than this (the worst cases ask for 20–400 MB)."""

DOUBLING = "{% set ns = namespace(s='xxxxxxxxxx') %}{% for i in range(22) %}{% set ns.s = ns.s OP ns.s %}{% endfor %}{{ ns.s|length }}"

WORST_CASES: dict[str, str] = {
    "str.center": "{{ 'x'.center(20000000) }}",
    "str.ljust": "{{ 'x'.ljust(20000000) }}",
    "str.zfill": "{{ '1'.zfill(20000000) }}",
    "center filter": "{{ 'x'|center(20000000) }}",
    "str.replace": "{{ ('x' * 100000).replace('x', 'y' * 200) }}",
    "replace filter": "{{ ('x' * 100000)|replace('x', 'y' * 200) }}",
    "replace of ''": "{{ ('x' * 100000).replace('', 'y' * 200) }}",
    "indent filter": "{{ ('a\\n' * 50000)|indent(400) }}",
    "% operator": "{{ '%20000000d' % 1 }}",
    "format filter": "{{ '%20000000d'|format(1) }}",
    "str.format": "{{ '{:>20000000}'.format(1) }}",
    "join filter": "{{ ('x' * 100000)|join('y' * 200) }}",
    "str.join": "{{ ('y' * 200).join('x' * 100000) }}",
    "str.expandtabs": "{{ ('\\t' * 100000).expandtabs(200) }}",
    "namespace loop ~": DOUBLING.replace("OP", "~"),
    "namespace loop +": DOUBLING.replace("OP", "+"),
    "list doubling": "{% set ns = namespace(s=[1,2,3,4,5,6,7,8,9,10]) %}{% for i in range(22) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s|length }}",
    "lone expression": "{{ [params.s] * 100000 }}",
    "repeated squaring": "{% set ns = namespace(n=7) %}{% for i in range(24) %}{% set ns.n = ns.n * ns.n %}{% endfor %}{{ ns.n > 0 }}",
    "power of a big base": "{{ ((10 ** 200) ** 200) > 0 }}",
    "nested loops": "{% for i in range(2000) %}{% for j in range(1000) %}{% endfor %}{% endfor %}done",
    "exponential macro": "{% macro f(n) %}{% if n %}{{ f(n-1) }}{{ f(n-1) }}{% endif %}{% endmacro %}{{ f(21) }}",
    "tojson indent": "{{ [1]|tojson(indent=20000000) }}",
    "batch fill": "{{ [1]|batch(20000000, 0)|list|length }}",
    "lipsum": "{{ lipsum(n=100000) }}",
}

CONTEXT = {"params": {"s": "p" * 500}}


@pytest.mark.parametrize("source", list(WORST_CASES.values()), ids=list(WORST_CASES))
def test_a_worst_case_template_is_refused_before_it_allocates(source: str) -> None:
    template = compile_template(source)
    tracemalloc.start()
    try:
        with pytest.raises(TemplateError) as raised:
            template.render(CONTEXT)
        _current, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < PEAK_LIMIT, f"{peak / MB:.1f} MB allocated before the refusal"
    message = str(raised.value)
    assert any(word in message for word in ("limit", "more than", "exceeds", "undefined")), message


def test_ordinary_templates_still_render() -> None:
    cases: dict[str, Any] = {
        "{{ 'ab'.center(6, '*') }}": "**ab**",
        "{{ 'a-b'.replace('-', '+') }}": "a+b",
        "{{ ['a', 'b']|join(', ') }}": "a, b",
        "{{ '%05d' % 42 }}": "00042",
        "{{ '{:>4}'.format(7) }}": "   7",
        "{{ 'x' ~ 1 ~ 'y' }}": "x1y",
        "{{ 2 ** 10 }}": 1024,
        "{{ [1, 2] + [3] }}": [1, 2, 3],
        "{% for i in range(3) %}{{ i }}{% endfor %}": "012",
        "{{ 'a\\nb'|indent(2, true) }}": "  a\n  b",
        "{{ params.s|length }}": 500,
    }
    for source, expected in cases.items():
        assert compile_template(source).render(CONTEXT) == expected, source


def test_a_lone_expression_is_held_to_the_output_limit() -> None:
    big = {"params": {"s": "q" * (MAX_RENDERED_CHARS + 1)}}
    with pytest.raises(TemplateLimitError, match="output exceeds"):
        compile_template("{{ params.s }}").render(big)


async def test_a_heavy_render_runs_in_the_compute_lane_and_a_light_one_inline() -> None:
    threads: list[str] = []

    def which_thread(source: str) -> Any:
        result = compile_template(source).render(CONTEXT)
        threads.append(threading.current_thread().name)
        return result

    light = await run_bounded(which_thread, "{{ params.s|length }}")
    heavy = await run_bounded(
        which_thread,
        "{% set ns = namespace(n=0) %}{% for i in range(50000) %}{% set ns.n = ns.n + i %}{% endfor %}{{ ns.n }}",
    )
    assert (light, heavy) == (500, str(sum(range(50000))))
    assert threads[0] == threading.current_thread().name
    assert threads[-1].startswith("toolweave-templates")


async def test_the_event_loop_keeps_turning_while_a_heavy_template_renders() -> None:
    """Ticks of a 1 ms timer while the heaviest allowed loop renders: on the loop it would get none."""
    source = "{% set ns = namespace(n=0) %}{% for i in range(200) %}{% for j in range(300) %}{% set ns.n = ns.n + 1 %}{% endfor %}{% endfor %}{{ ns.n }}"
    ticks = 0
    done = asyncio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not done.is_set():
            await asyncio.sleep(0.001)
            ticks += 1

    running = asyncio.create_task(ticker())
    try:
        assert await run_bounded(compile_template(source).render, CONTEXT) == "60000"
    finally:
        done.set()
        await running
    assert ticks >= 5, ticks
