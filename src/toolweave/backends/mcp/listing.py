"""An MCP backend's lists (tools, resources, resource templates, prompts): fetched whole on
connect, and again when the server says one changed (a `list_changed` notification, or a
2026-07-28 `subscriptions/listen` event). A change announced during a refresh gets a refresh of
its own; a refresh that fails leaves the lists as they were."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from typing import Any

import mcp_types as types
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.shared.inbound import find_invalid_x_mcp_header, x_mcp_header_map

from toolweave.backends.base import Backend, logger
from toolweave.backends.mcp.describe import describe_error
from toolweave.wire.http_caller import HttpToolCaller

PAGE_CAP = 100
"""The most pages one list is read in (a server that keeps answering a cursor is cut off)."""


class Listings:
    """Keeps `backend.tools`, `.resources`, `.resource_templates` and `.prompts` fresh."""

    def __init__(
        self,
        backend: Backend,
        client: Callable[[], Client | None],
        caller: Callable[[], HttpToolCaller | None],
        changed: Callable[[], None],
    ) -> None:
        self._backend = backend
        self._client = client
        """The connected SDK client, if any (a refresh after a change needs one)."""
        self._caller = caller
        """The lean call path, whose `Mcp-Param-*` header maps follow the tool list."""
        self._changed = changed
        """Told after a refresh that a change caused (the catalog rebuilds)."""
        self._task: asyncio.Task[None] | None = None
        self._wanted = False

    async def refresh(self, client: Client) -> None:
        """Read every list the server declared, whole."""
        backend = self._backend
        caps = client.server_capabilities
        backend.tools = await all_pages(
            lambda cursor: client.list_tools(cursor=cursor, cache_mode="refresh"), "tools"
        )
        caller = self._caller()
        if caller is not None:
            caller.header_maps = header_maps(backend.tools)
        if caps.resources is not None:
            backend.resources = await all_pages(
                lambda cursor: client.list_resources(cursor=cursor, cache_mode="refresh"), "resources"
            )
            with contextlib.suppress(MCPError):
                backend.resource_templates = await all_pages(
                    lambda cursor: client.list_resource_templates(cursor=cursor, cache_mode="refresh"),
                    "resource_templates",
                )
        if caps.prompts is not None:
            backend.prompts = await all_pages(
                lambda cursor: client.list_prompts(cursor=cursor, cache_mode="refresh"), "prompts"
            )

    def schedule_refresh(self) -> None:
        """The server said a list changed: refresh in the background, once per burst of changes."""
        self._wanted = True  # a change announced during a refresh gets a refresh of its own
        if self._task is None or self._task.done():
            self._task = asyncio.create_task(self._refresh_after_change())

    async def stop(self) -> None:
        """Cancel a refresh in progress (the backend stops)."""
        task = self._task
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    async def _refresh_after_change(self) -> None:
        while self._wanted:
            self._wanted = False
            client = self._client()
            if client is None:
                return
            try:
                await self.refresh(client)
            except Exception as error:  # noqa: BLE001
                logger.warning(
                    "backend %s: refreshing lists failed: %s", self._backend.name, describe_error(error)
                )
                return
            self._changed()


def header_maps(tools: list[types.Tool]) -> dict[str, dict[tuple[str, ...], str]]:
    """`Mcp-Param-*` header maps of the listed tools that declare any (what the SDK client mirrors)."""
    maps: dict[str, dict[tuple[str, ...], str]] = {}
    for tool in tools:
        if find_invalid_x_mcp_header(tool.input_schema) is None:
            found = x_mcp_header_map(tool.input_schema)
            if found:
                maps[tool.name] = found
    return maps


async def all_pages(fetch: Callable[[str | None], Any], attribute: str) -> list[Any]:
    """Every item of a paginated list, following `nextCursor` at most `PAGE_CAP` pages."""
    items: list[Any] = []
    cursor: str | None = None
    for _ in range(PAGE_CAP):
        page = await fetch(cursor)
        items.extend(getattr(page, attribute))
        cursor = page.next_cursor
        if not cursor:
            break
    return items
