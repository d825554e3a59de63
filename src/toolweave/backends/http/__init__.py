"""HTTP APIs as backends: the calls an OpenAPI document or declared actions describe, auth, results."""

from __future__ import annotations

from typing import Any

__all__ = ["HttpApiBackend"]


def __getattr__(name: str) -> Any:
    """Imported when first used: `validate --offline` reads `check.py` without the backend's imports."""
    if name == "HttpApiBackend":
        from toolweave.backends.http.backend import HttpApiBackend

        return HttpApiBackend
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
