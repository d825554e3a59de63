"""toolweave: a composite tool gateway for AI agents."""

__version__ = "0.1.0"

import importlib
from typing import Any

_HOMES = {
    "Gateway": "toolweave.gateway",
    "tool": "toolweave.backends.python",
    # the client side of federated tools needs `websockets`
    "FederatedClient": "toolweave.backends.federated.client",
    "federated_tool": "toolweave.backends.federated.client",
}

__all__ = ["FederatedClient", "Gateway", "__version__", "federated_tool", "tool"]


def __getattr__(name: str) -> Any:
    """Imported when first used: `import toolweave` (and so every CLI command) stays cheap; the
    gateway pulls in the MCP SDK, which alone takes about a second to import."""
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module 'toolweave' has no attribute {name!r}")
    return getattr(importlib.import_module(home), name)
