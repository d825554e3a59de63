"""Workflow composites: a DAG of steps with templated arguments (ToolHive's composer format too).

`config.py` is the definition, `validation.py` its own checks, `build.py` compiles it against the
catalog once (`build_workflow`), `engine.py` runs a call; `graph.py` finds composites that call each
other in a loop. The names below are imported when first used, so reading a config (which needs only
`config.py`) does not load the engine and the MCP types: `toolweave --help` and `validate --offline`
stay fast.
"""

from __future__ import annotations

import importlib
from typing import Any

_HOMES = {
    "WorkflowComposite": "build",
    "build_workflow": "build",
    "find_composite_cycles": "graph",
    "find_cycles": "graph",
    "format_cycle": "graph",
    "translate_toolhive": "toolhive",
}

__all__ = sorted(_HOMES)


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
