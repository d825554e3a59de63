"""An in-process Python backend for the tests: `python = "tw_pytools"` (tests/servers is on the path)."""

from __future__ import annotations

import asyncio
import threading

from pydantic import BaseModel

import toolweave

CALLS = {"greet": 0}


@toolweave.tool(read_only=True)
def greet(name: str, excited: bool = False) -> str:
    """Greet someone by name.

    Args:
        name: Who to greet.
        excited: End with an exclamation mark
            instead of a full stop.
    """
    CALLS["greet"] += 1
    return f"Hello, {name}{'!' if excited else '.'}"


@toolweave.tool(name="multiply", read_only=True, idempotent=True, title="Multiply")
async def mul(a: float, b: float) -> dict[str, float]:
    """Multiply two numbers."""
    return {"product": a * b}


class Point(BaseModel):
    x: int
    y: int


class Distance(BaseModel):
    squared: int


@toolweave.tool(read_only=True)
def squared_distance(point: Point) -> Distance:
    """Squared distance of a point from the origin."""
    return Distance(squared=point.x**2 + point.y**2)


@toolweave.tool(destructive=True)
def drop_table(table: str) -> str:
    """Drop a table (pretends to)."""
    return f"dropped {table}"


@toolweave.tool
def explode(message: str = "boom") -> str:
    """Always raises."""
    raise RuntimeError(message)


@toolweave.tool(read_only=True)
async def nap(seconds: float) -> str:
    """Sleep a while."""
    await asyncio.sleep(seconds)
    return "rested"


@toolweave.tool(read_only=True)
def where_am_i() -> dict[str, bool]:
    """Whether this sync tool runs off the event loop's thread."""
    return {"main_thread": threading.current_thread() is threading.main_thread()}


@toolweave.tool(read_only=True)
def numbers(count: int = 3) -> list[int]:
    """A list result (not a dict)."""
    return list(range(count))


def not_a_tool() -> str:
    """Not decorated: must not be exposed."""
    return "hidden"
