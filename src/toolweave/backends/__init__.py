"""Backends: MCP servers (stdio, streamable HTTP), in-process Python functions, HTTP APIs.

`create_backend` picks the kind from the config and imports only that kind's module: reading or
checking a config offline must not load the MCP SDK (about a second of imports). The kinds
themselves are imported from their modules (`base.py`, `mcp`, `python.py`, `http/backend.py`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pathlib import Path

    from toolweave.backends.base import Backend
    from toolweave.config.models import BackendConfig


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
