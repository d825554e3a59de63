"""The types of the shared fixtures in `tests/conftest.py`, for test signatures."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

from toolweave import Gateway

OpenGateway = Callable[..., Awaitable[Gateway]]
"""The `open_gateway` fixture: `await open_gateway(config_or_dict, **Gateway options)`."""
WriteConfig = Callable[..., Path]
"""The `write_config` fixture: `write_config(data_or_text, suffix=".yaml")` → path."""
ServeGateway = Callable[..., Awaitable[str]]
"""The `serve_gateway` fixture: `url = await serve_gateway(gateway)`."""
