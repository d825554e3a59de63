"""An in-process Python backend for `bench.replicas`: a call costs the gateway alone, no backend hop."""

from __future__ import annotations

from toolweave import tool


@tool(read_only=True)
async def echo(text: str = "hi") -> str:
    """Return `text`."""
    return text
