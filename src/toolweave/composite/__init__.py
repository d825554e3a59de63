"""Composite kinds: fan-out, router, workflow. `build_composite` picks the builder by kind.

The names below are imported when first used: reading a config needs only the definition models.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    "KINDS": "kinds",
    "build_composite": "kinds",
    "parse_composite": "kinds",
    "BuildError": "base",
    "Composite": "base",
    "RunContext": "base",
    "ToolResolver": "base",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
