"""Backends: where tools come from (MCP over stdio or HTTP, in-process Python)."""

from toolweave.backends.base import Backend, BackendStatus
from toolweave.backends.mcp import MCPBackend
from toolweave.backends.python import PythonBackend, tool
from toolweave.config.models import BackendConfig


def create_backend(config: BackendConfig, **options: object) -> Backend:
    if config.python:
        return PythonBackend(config)
    return MCPBackend(config, **options)  # type: ignore[arg-type]


__all__ = ["Backend", "BackendStatus", "MCPBackend", "PythonBackend", "create_backend", "tool"]
