"""Bridges from a `Gateway` to agent frameworks.

Each bridge lives in its own module and imports its framework only when
used, so `import toolweave.integrations` never needs an optional extra:

* `toolweave.integrations.langchain.as_langchain_tools(gateway, names=None)`
  (extra `langchain`) — the gateway's tools as LangChain `StructuredTool`s.
"""

from __future__ import annotations

from typing import Any

__all__ = ["as_langchain_tools"]


def __getattr__(name: str) -> Any:
    """Import a bridge on first use, so a missing extra fails only for its own bridge."""
    if name == "as_langchain_tools":
        from toolweave.integrations.langchain import as_langchain_tools

        return as_langchain_tools
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
