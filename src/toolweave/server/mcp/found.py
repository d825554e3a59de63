"""Found tools become real tools (`[search] list_found`): in search mode, the tools `find_tools`
returned to a session join that session's `tools/list`, so the model calls them directly with
their own schemas instead of through `call_tool`.

Per session and bounded: at most `list_found` tools, the least recently used (found again or
called) dropped first. A change is announced to that session alone with
`notifications/tools/list_changed`. Nothing else changes: the listing is what `find_tools` may
show this caller (its tenant's tools), and a call of a listed tool goes through the same executor
(policy, validation, approval, limits) as `call_tool` would have.

A session is a handshake-era MCP connection (2025-11-25 and older, streamable HTTP or stdio),
the one object whose lifetime is a client's; a 2026-07-28 request is self-contained and keeps
the plain search-mode listing.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from typing import Any

import mcp_types as types

from toolweave.catalog.catalog import Catalog


class FoundTools:
    """The tools one session found, least recently used first, bounded by the catalog's `list_found`."""

    __slots__ = ("_listing", "_names")

    def __init__(self) -> None:
        self._names: OrderedDict[str, None] = OrderedDict()
        self._listing: tuple[tuple[Any, ...], dict[str, Any]] | None = None
        """(catalog, tenant, names, version) → the wire listing built for them, the last one asked."""

    def __len__(self) -> int:
        return len(self._names)

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def add(self, catalog: Catalog, tenant: str | None, names: Sequence[str]) -> bool:
        """Note what a `find_tools` call returned; True when the session's `tools/list` changed.

        Tools the session lists anyway (the search tools, pinned tools, composites) are not kept;
        the others become the most recently used, and the oldest go beyond the bound.
        """
        bound = catalog.list_found
        before = set(self._names)
        for name in names:
            entry = catalog.entries.get(name)
            if entry is None or catalog.kept_in_search_mode(entry, tenant):
                continue
            self._names[name] = None
            self._names.move_to_end(name)
        while len(self._names) > bound:
            self._names.popitem(last=False)
        return set(self._names) != before

    def names(self) -> list[str]:
        """The found tools, least recently used first (what another replica needs to list them)."""
        return list(self._names)

    def replace(self, catalog: Catalog, tenant: str | None, names: Sequence[str]) -> None:
        """Become the found tools another replica recorded for the session (least recently used first)."""
        self._names.clear()
        self.add(catalog, tenant, names)

    def touch(self, name: str) -> None:
        """A call of a listed found tool makes it the most recently used."""
        if name in self._names:
            self._names.move_to_end(name)

    def tools(self, catalog: Catalog, tenant: str | None) -> list[types.Tool]:
        """The found tools this session lists now: those still in the catalog and visible to `tenant`,
        in alphabetical order (so using one does not reorder the listing)."""
        found = []
        for name in sorted(self._names):
            entry = catalog.entries.get(name)
            if entry is not None and entry.listed_to(tenant):
                found.append(entry.tool)
        return found

    def cached(self, key: tuple[Any, ...]) -> dict[str, Any] | None:
        """The wire listing built for `key` (catalog, tenant, version), if it is still current."""
        if self._listing and self._listing[0] == (*key, tuple(sorted(self._names))):
            return self._listing[1]
        return None

    def remember(self, key: tuple[Any, ...], listing: dict[str, Any]) -> None:
        self._listing = ((*key, tuple(sorted(self._names))), listing)
