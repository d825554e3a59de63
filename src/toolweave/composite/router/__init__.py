"""Router composites: one tool in front of several operations, picked by rules or by the agent.

`config.py` is the definition and its own checks, `conditions.py` and `schema.py` compile rules
and the unified input schema, `build.py` builds it against a catalog, `run.py` runs a call.
The names below are imported when first used (reading a config needs only `config.py`).
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {"KIND": "run", "RouterComposite": "run", "build_router": "build"}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
