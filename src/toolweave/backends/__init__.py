"""Backends: where tools come from (MCP over stdio or HTTP, in-process Python, HTTP APIs)."""

from toolweave.backends.base import Backend, BackendStatus
from toolweave.backends.http import HttpApiBackend
from toolweave.backends.mcp import MCPBackend
from toolweave.backends.python import PythonBackend, tool
from toolweave.config.models import BackendConfig


def create_backend(config: BackendConfig, **options: object) -> Backend:
    if config.python:
        return PythonBackend(config)
    if config.is_http_api:
        return HttpApiBackend(config)
    return MCPBackend(config, **options)  # type: ignore[arg-type]


__all__ = [
    "Backend",
    "BackendStatus",
    "HttpApiBackend",
    "MCPBackend",
    "PythonBackend",
    "create_backend",
    "tool",
]
