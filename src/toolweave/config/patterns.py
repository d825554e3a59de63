"""Name patterns used by filters and policy: shell globs, or `re:` for RE2 regexes."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable

import re2

_QUIET = re2.Options()
_QUIET.log_errors = False  # a bad pattern is reported as a config problem, not logged by RE2 on stderr


class PatternSet:
    """Compiled once; `matches(name)` is a single regex search on the hot path."""

    __slots__ = ("_regex", "patterns")

    def __init__(self, patterns: Iterable[str]) -> None:
        self.patterns = tuple(patterns)
        parts = [_source(p) for p in self.patterns]
        self._regex = (
            re2.compile("|".join(f"(?:{part})" for part in parts), options=_QUIET) if parts else None
        )

    def __bool__(self) -> bool:
        return self._regex is not None

    def matches(self, name: str) -> bool:
        return self._regex is not None and self._regex.fullmatch(name) is not None


def pattern_problem(pattern: str) -> str | None:
    """Why a pattern is invalid, or None (for config validation)."""
    if not isinstance(pattern, str) or not pattern:
        return "a pattern must be a non-empty string"
    source = _source(pattern)
    try:
        re2.compile(source, options=_QUIET)
    except re2.error as error:
        detail = error.args[0] if error.args else error
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        return f"invalid regular expression {pattern!r}: {detail}"
    except re.error as error:
        return f"invalid pattern {pattern!r}: {error}"
    return None


def _source(pattern: str) -> str:
    """RE2 source for a pattern; fnmatch's `\\Z` anchor is dropped because matching is full-match."""
    if pattern.startswith("re:"):
        return pattern[3:]
    return fnmatch.translate(pattern).removesuffix("\\Z")
