"""The ranking `find_tools` had before the search work (plain BM25 over the name twice, title,
description and parameter names; `k1` 1.2, `b` 0.75), kept as a row of every bench run.

Why: a query set's difficulty is not known in advance. A set on which this row and FastMCP score
low is a hard set, and the distance of the current ranking from this row is what the work gained
there. On a set scored elsewhere, this row's figure there (for the issue's set: R@5 0.68) places
that set between ours, so a figure measured on ours says something about it.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

import mcp_types as types

_TOKEN = re.compile(r"[a-z0-9]+")
K1, B = 1.2, 0.75


def tokenize(text: str) -> list[str]:
    """Lower-case runs of letters and digits, camelCase split (`listIssues` -> list, issues)."""
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", text)
    return _TOKEN.findall(spaced.lower())


def _document(tool: types.Tool) -> list[str]:
    params = " ".join((tool.input_schema or {}).get("properties", {}) or {})
    name = tokenize(tool.name)
    return name * 2 + tokenize(tool.title or "") + tokenize(tool.description or "") + tokenize(params)


class PlainBM25:
    """Okapi BM25 over one bag of words a tool, no stemming, no stop words, no synonyms."""

    def __init__(self, tools: Sequence[types.Tool]) -> None:
        self.tools = list(tools)
        self._docs = [Counter(_document(tool)) for tool in self.tools]
        self._lengths = [sum(doc.values()) for doc in self._docs]
        self._average = (sum(self._lengths) / len(self._lengths)) if self._lengths else 1.0
        frequency: Counter[str] = Counter()
        for doc in self._docs:
            frequency.update(doc.keys())
        count = len(self._docs)
        self._idf = {term: math.log(1 + (count - df + 0.5) / (df + 0.5)) for term, df in frequency.items()}

    def search(self, query: str, limit: int = 10) -> list[types.Tool]:
        terms = tokenize(query)
        scored = []
        for index, doc in enumerate(self._docs):
            norm = K1 * (1 - B + B * self._lengths[index] / self._average)
            total = sum(
                self._idf[term] * doc[term] * (K1 + 1) / (doc[term] + norm) for term in terms if term in doc
            )
            if total > 0:
                scored.append((total, index))
        scored.sort(key=lambda item: (-item[0], item[1]))
        return [self.tools[index] for _, index in scored[:limit]]
