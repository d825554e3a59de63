"""Backends: MCP servers (stdio, streamable HTTP), in-process Python functions, HTTP APIs.

`create_backend` picks the kind from the config. The names are imported when first used: reading
or checking a config offline must not load the MCP SDK (about a second of imports).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

    from toolweave.backends.base import Backend
    from toolweave.config.models import BackendConfig

_HOMES = {
    "Backend": "base",
    "BackendStatus": "base",
    "HttpApiBackend": "http.backend",
    "MCPBackend": "mcp",
    "PythonBackend": "python",
    "tool": "python",
}


def create_backend(
    config: BackendConfig, *, errlog: Any = None, base_dir: Path | None = None, token_auth: Any = None
) -> Backend:
    """The backend `config` describes. `errlog`: where a stdio child's stderr goes raw (default: log
    records); `base_dir`: the config file's folder, where an in-process module is also looked for;
    `token_auth`: an MCP backend's OAuth token flow (`[backends.oauth]`)."""
    if config.python:
        from toolweave.backends.python import PythonBackend

        return PythonBackend(config, base_dir=base_dir)
    if config.is_http_api:
        from toolweave.backends.http.backend import HttpApiBackend

        return HttpApiBackend(config)
    from toolweave.backends.mcp import MCPBackend

    return MCPBackend(config, errlog=errlog, token_auth=token_auth)


__all__ = ["create_backend", *sorted(_HOMES)]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{home}"), name)
