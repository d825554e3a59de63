"""Search mode: clients list `find_tools` and `call_tool` (plus the pinned tools) instead of the
whole catalog; `find_tools` ranks the catalog by BM25 over names, descriptions and parameter names."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Sequence

import mcp_types as types

FIND_TOOLS = "find_tools"
CALL_TOOL = "call_tool"

SEARCH_TOOLS = [
    types.Tool(
        name=FIND_TOOLS,
        description=(
            "Find tools by what they do. Returns the best matching tools with their input schemas; "
            "call one with call_tool."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "query": {"type": "string", "description": "What you want to do, in a few words"},
                "limit": {"type": "integer", "minimum": 1, "default": 10},
            },
            "required": ["query"],
        },
        annotations=types.ToolAnnotations(read_only_hint=True),
    ),
    types.Tool(
        name=CALL_TOOL,
        description="Call a tool found with find_tools, by its name, with its arguments.",
        input_schema={
            "type": "object",
            "properties": {"name": {"type": "string"}, "arguments": {"type": "object"}},
            "required": ["name"],
        },
    ),
]
"""What a client lists in search mode (before the pinned tools)."""

_TOKEN = re.compile(r"[a-z0-9]+")
K1, B = 1.2, 0.75


def tokenize(text: str) -> list[str]:
    # split camelCase and snake_case so `listIssues` and `list_issues` both match "issues"
    spaced = re.sub(r"([a-z0-9])([A-Z])", r"\1 \2", text)
    return _TOKEN.findall(spaced.lower())


def _document(tool: types.Tool) -> list[str]:
    params = " ".join((tool.input_schema or {}).get("properties", {}) or {})
    name_tokens = tokenize(tool.name)
    return name_tokens * 2 + tokenize(tool.title or "") + tokenize(tool.description or "") + tokenize(params)


class ToolIndex:
    """An immutable BM25 index, rebuilt with each catalog snapshot."""

    def __init__(self, tools: Sequence[types.Tool]) -> None:
        self.tools = list(tools)
        self._docs = [Counter(_document(tool)) for tool in self.tools]
        self._lengths = [sum(doc.values()) for doc in self._docs]
        self._avg = (sum(self._lengths) / len(self._lengths)) if self._lengths else 1.0
        frequency: Counter[str] = Counter()
        for doc in self._docs:
            frequency.update(doc.keys())
        n = len(self._docs)
        self._idf = {term: math.log(1 + (n - df + 0.5) / (df + 0.5)) for term, df in frequency.items()}

    def search(self, query: str, limit: int = 10) -> list[types.Tool]:
        terms = tokenize(query)
        if not terms:
            return self.tools[:limit]
        scored = []
        for index, doc in enumerate(self._docs):
            score = 0.0
            norm = K1 * (1 - B + B * self._lengths[index] / self._avg)
            for term in terms:
                tf = doc.get(term)
                if tf:
                    score += self._idf[term] * tf * (K1 + 1) / (tf + norm)
            if score > 0:
                scored.append((score, index))
        scored.sort(key=lambda item: (-item[0], item[1]))
        return [self.tools[index] for _, index in scored[:limit]]
