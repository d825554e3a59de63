"""Python backend modules with postponed annotations: a type defined after the tool, and one never defined."""

from __future__ import annotations

from pydantic import BaseModel

import toolweave


@toolweave.tool(read_only=True)
def area(shape: Rect) -> int:
    """Area of a rectangle."""
    return shape.w * shape.h


class Rect(BaseModel):
    w: int
    h: int
