"""How long an HTTP API backend's tool names may be: shared by the backend and `validate --offline`,
which must not import the backend (and its HTTP client) to check a file."""

from __future__ import annotations

from toolweave.config.models import BackendConfig

SEPARATOR_ROOM = 4
"""The longest `gateway.separator`; tool names leave room for it in the 64-character exposed name."""


def name_room(config: BackendConfig) -> int:
    return 64 - (len(config.name) + SEPARATOR_ROOM if config.namespace else 0)
