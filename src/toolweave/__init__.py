"""toolweave: a composite tool gateway for AI agents."""

__version__ = "0.1.0"

from toolweave.backends.python import tool
from toolweave.gateway import Gateway

__all__ = ["Gateway", "__version__", "tool"]
