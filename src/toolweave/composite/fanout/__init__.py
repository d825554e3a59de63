"""Fan-out composites: one call, the same arguments sent to many tools, results aggregated.

`config.py` is the definition, `build.py` builds it against a catalog, `run.py` runs a call.
The names below are imported when first used (reading a config needs only `config.py`).
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {"KIND": "run", "OUTPUT_SCHEMA": "run", "FanoutComposite": "run", "build_fanout": "build"}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
