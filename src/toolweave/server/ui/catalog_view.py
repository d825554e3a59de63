"""What the AI Tools list and a tool's page show: rows, filters, search and paging over what a tenant sees.

The search box ranks with the same BM25 index as `find_tools` (`catalog.search.ToolIndex`),
built once per catalog snapshot and tenant, so the list and an agent agree on what matches.
"""

from __future__ import annotations

import weakref
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from toolweave.catalog.catalog import Catalog, Entry, is_destructive
from toolweave.catalog.search import ToolIndex
from toolweave.catalog.search_text import document_terms
from toolweave.gateway import Gateway
from toolweave.store import StoredComposite

KINDS = ("backend", "fanout", "router", "workflow")
PAGE_SIZE = 50

_indexes: weakref.WeakKeyDictionary[Catalog, ToolIndex] = weakref.WeakKeyDictionary()


@dataclass(frozen=True, slots=True)
class ToolRow:
    """One line of the list: a served tool, or an API composite that is not served (draft, disabled, degraded)."""

    name: str
    kind: str
    status: str
    description: str
    backend: str | None = None
    backend_status: str | None = None
    read_only: bool = False
    destructive: bool = False
    used_in: int = 0
    problems: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ListQuery:
    """The list's filters, as given in the URL (unknown values simply match nothing)."""

    text: str = ""
    kind: str = ""
    backend: str = ""
    status: str = ""
    page: int = 1

    @classmethod
    def from_params(cls, params: Any) -> ListQuery:
        try:
            page = max(1, min(int(params.get("page") or 1), 100_000))
        except ValueError:
            page = 1
        return cls(
            text=str(params.get("q") or "")[:200],
            kind=str(params.get("type") or ""),
            backend=str(params.get("backend") or ""),
            status=str(params.get("status") or ""),
            page=page,
        )


@dataclass(slots=True)
class ToolPage:
    rows: list[ToolRow]
    total: int
    page: int
    pages: int
    counts: dict[str, int]
    backends: list[str]
    statuses: list[str]
    all_count: int = 0
    catalog_size: int = 0
    """Every tool before any filter or search: 0 is an empty catalog, not a search that found nothing."""
    extra: dict[str, Any] = field(default_factory=dict)


def _row(gateway: Gateway, entry: Entry, tenant: str | None, stored: StoredComposite | None) -> ToolRow:
    tool = entry.tool
    annotations = tool.annotations
    backend = entry.backend
    return ToolRow(
        name=entry.name,
        kind=entry.kind,
        status=stored.status if stored is not None else "active",
        description=tool.description or "",
        backend=backend.name if backend is not None else None,
        backend_status=backend.status if backend is not None else None,
        read_only=bool(annotations is not None and annotations.read_only_hint),
        destructive=entry.composite is None and is_destructive(tool),
        used_in=len(gateway.catalog.used_in_for(entry.name, tenant)),
    )


def _unserved_row(row: StoredComposite) -> ToolRow:
    return ToolRow(
        name=row.name,
        kind=row.kind,
        status=row.status,
        description=str(row.definition.get("description") or ""),
        problems=tuple(row.validation_errors or ()),
    )


ROW_CACHE_SIZE = 16
"""Row lists kept per catalog snapshot (one per tenant and state of its backends and composites)."""
_rows: weakref.WeakKeyDictionary[Catalog, dict[tuple[Any, ...], list[ToolRow]]] = weakref.WeakKeyDictionary()


def tool_rows(gateway: Gateway, stored: list[StoredComposite], tenant: str | None) -> list[ToolRow]:
    """Every tool `tenant` sees, in catalog order, then its API composites that are not served.

    Building a row per tool was most of the list's cost with 1,000 tools, so the rows are kept per
    catalog snapshot (a change of tools makes a new one) and reused while the other things a row
    shows are unchanged: each backend's status and each stored composite's version, status and
    problems (all in the key)."""
    listed = gateway.catalog.listed_for(tenant)
    backends = {id(entry.backend): entry.backend for entry in listed if entry.backend is not None}
    key = (
        tenant,
        tuple((backend.name, backend.status) for backend in backends.values()),
        tuple((r.id, r.version, r.status, r.tenant, tuple(r.validation_errors or ())) for r in stored),
    )
    cached = _rows.setdefault(gateway.catalog, {})
    rows = cached.get(key)
    if rows is None:
        rows = _build_rows(gateway, listed, stored, tenant)
        if len(cached) >= ROW_CACHE_SIZE:
            cached.pop(next(iter(cached)))
        cached[key] = rows
    return list(rows)  # callers get their own list; the rows themselves are frozen


def _build_rows(
    gateway: Gateway, listed: list[Entry], stored: list[StoredComposite], tenant: str | None
) -> list[ToolRow]:
    by_name = {row.name: row for row in stored}
    rows = []
    for entry in listed:
        row = by_name.pop(entry.name, None) if entry.composite is not None else None
        if row is not None and entry.owner != row.tenant:
            row = None
        rows.append(_row(gateway, entry, tenant, row))
    names = {row.name for row in rows}
    rows.extend(_unserved_row(row) for row in by_name.values() if row.name not in names)
    return rows


def _index(catalog: Catalog) -> ToolIndex:
    """The snapshot's `find_tools` index (built with it in search mode, else here, once per snapshot)."""
    if catalog.index is not None:
        return catalog.index
    index = _indexes.get(catalog)
    if index is None:
        index = _indexes[catalog] = ToolIndex(catalog.search_documents())
    return index


def ranked(catalog: Catalog, tenant: str | None, rows: list[ToolRow], text: str) -> list[ToolRow]:
    """`rows` that match `text`, best first by the `find_tools` ranking (`rows` are what the tenant
    sees, so another tenant's tools never appear); unserved drafts (not in the index) follow when
    every word of the query is in their name or description."""
    terms = document_terms(text)
    if not terms:
        return rows
    by_name = {row.name: row for row in rows}
    index = _index(catalog)
    found = [by_name[tool.name] for tool in index.search(text, len(index.tools)) if tool.name in by_name]
    served = {row.name for row in found}
    for row in rows:
        if row.name not in served and row.backend is None and row.kind != "backend":
            words = set(document_terms(f"{row.name} {row.description}"))
            if catalog.get(row.name) is None and all(term in words for term in terms):
                found.append(row)
    return found


def _status_of(row: ToolRow) -> str:
    return row.backend_status or row.status


def tool_page(catalog: Catalog, tenant: str | None, rows: list[ToolRow], query: ListQuery) -> ToolPage:
    """The filtered, searched page of `rows`, with the counts per type before the type filter."""
    backends = sorted({row.backend for row in rows if row.backend})
    statuses = sorted({_status_of(row) for row in rows})
    matched = [
        row
        for row in rows
        if (not query.backend or row.backend == query.backend)
        and (not query.status or _status_of(row) == query.status)
    ]
    matched = ranked(catalog, tenant, matched, query.text)
    counts = Counter(row.kind for row in matched)
    all_count = len(matched)
    if query.kind:
        matched = [row for row in matched if row.kind == query.kind]
    pages = max(1, -(-len(matched) // PAGE_SIZE))
    page = min(query.page, pages)
    start = (page - 1) * PAGE_SIZE
    return ToolPage(
        rows=matched[start : start + PAGE_SIZE],
        total=len(matched),
        page=page,
        pages=pages,
        counts={kind: counts.get(kind, 0) for kind in KINDS},
        backends=backends,
        statuses=statuses,
        all_count=all_count,
        catalog_size=len(rows),
    )
