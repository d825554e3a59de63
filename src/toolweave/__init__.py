"""toolweave: a composite tool gateway for AI agents."""

__version__ = "0.1.0"

from toolweave.backends.python import tool  # noqa: E402
from toolweave.gateway import Gateway  # noqa: E402

__all__ = ["Gateway", "__version__", "tool"]
