"""The list's rows are reused per catalog snapshot, but never shown stale: a backend's status, a
stored composite's status or a new one show at once."""

from __future__ import annotations

from pathlib import Path

from support.browser import serve_ui
from support.configs import python_backend
from toolweave.server.ui.catalog_view import tool_rows

ROUTER = {
    "name": "greeter",
    "description": "Greet.",
    "routing": "agent_driven",
    "operations": [{"slug": "greet", "tool": "py/greet"}],
}


async def test_rows_follow_backend_status_and_stored_composites(api_env: None, tmp_path: Path) -> None:
    async with serve_ui({"backends": [python_backend()]}, tmp_path) as server:
        gateway, service = server.runtime.gateway, server.runtime.definitions

        async def rows() -> dict[str, tuple[str, str | None]]:
            stored = await service.repo.list(None)
            return {row.name: (row.status, row.backend_status) for row in tool_rows(gateway, stored, None)}

        first = await rows()
        assert first["py__greet"] == ("active", "connected")
        assert await rows() == first

        backend = gateway.backends["py"]
        backend.status = "failed"
        try:
            assert (await rows())["py__greet"] == ("active", "failed")
        finally:
            backend.status = "connected"

        await service.create(None, ROUTER, "draft", None)
        assert (await rows())["greeter"] == ("draft", None)
