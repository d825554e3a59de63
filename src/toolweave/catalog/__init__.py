"""Catalog and middleware: names and conflicts, validation, filters, search, aliases."""

from toolweave.catalog.catalog import Catalog, CatalogIssue, Entry, ToolClass, is_destructive
from toolweave.config.patterns import PatternSet, pattern_problem
from toolweave.schemas import ArgumentValidator, redact, secret_fields

__all__ = [
    "ArgumentValidator",
    "Catalog",
    "CatalogIssue",
    "Entry",
    "PatternSet",
    "ToolClass",
    "is_destructive",
    "pattern_problem",
    "redact",
    "secret_fields",
]
