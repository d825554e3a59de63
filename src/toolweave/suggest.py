"""Did you mean: the names closest to a misspelt one. The one home for every message naming something
unknown: a tool in a call (MCP, REST, CLI), a tool or backend a composite references, a config key."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

MAX_NAME = 200
"""A longer name is not compared at all: its cost grows with its length and a typo is short."""
MAX_SUGGESTIONS = 3


def closest(name: str, names: Iterable[str], limit: int = MAX_SUGGESTIONS) -> list[str]:
    """Up to `limit` names: those containing `name` (a missing prefix), then the most similar."""
    if not name or len(name) > MAX_NAME:
        return []
    known = [known for known in dict.fromkeys(names) if known != name]
    lowered = name.lower()
    contains = [n for n in known if lowered in n.lower()]
    similar = difflib.get_close_matches(name, known, n=limit, cutoff=0.6)
    return list(dict.fromkeys(contains[:limit] + similar))[:limit]


def did_you_mean(name: str, names: Iterable[str], limit: int = MAX_SUGGESTIONS) -> str:
    """`; did you mean 'a' or 'b'?` to append to a message, or '' when nothing is close."""
    close = closest(name, names, limit)
    if not close:
        return ""
    return f"; did you mean {' or '.join(repr(n) for n in close)}?"
