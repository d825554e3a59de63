"""A python backend module whose tool names a type that does not exist."""

from __future__ import annotations

import toolweave


@toolweave.tool
def broken(thing: Undefined) -> str:  # type: ignore[name-defined]  # noqa: F821
    """Cannot have a schema."""
    return str(thing)
