"""The catalog: immutable snapshots of every tool served: names, conflicts, filters, aliases,
tenancy (who owns and who sees each tool) and search mode."""

from toolweave.catalog.catalog import Catalog, CatalogIssue, Entry, ToolClass, is_destructive
from toolweave.catalog.search import CALL_TOOL, FIND_TOOLS, SEARCH_TOOLS, ToolIndex

__all__ = [
    "CALL_TOOL",
    "FIND_TOOLS",
    "SEARCH_TOOLS",
    "Catalog",
    "CatalogIssue",
    "Entry",
    "ToolClass",
    "ToolIndex",
    "is_destructive",
]
