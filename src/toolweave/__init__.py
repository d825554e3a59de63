"""toolweave: a composite tool gateway for AI agents."""

__version__ = "0.1.0"

from typing import Any

from toolweave.backends.python import tool
from toolweave.gateway import Gateway

__all__ = ["FederatedClient", "Gateway", "__version__", "federated_tool", "tool"]


def __getattr__(name: str) -> Any:
    """The client side of federated tools, imported when first used (it needs `websockets`)."""
    if name in ("FederatedClient", "federated_tool"):
        from toolweave.backends.federated import client

        return getattr(client, name)
    raise AttributeError(f"module 'toolweave' has no attribute {name!r}")
