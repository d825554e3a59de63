"""The evaluation corpus: the dumped catalog of real tools and the query sets.

Tools are named as the gateway exposes them (`backend__tool`); each carries the text its backend
contributes to search (the server's name, title and description from its `initialize` answer).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import mcp_types as types

from toolweave.catalog.search import BackendText, SearchDocument

HERE = Path(__file__).resolve().parent
CATALOG_DIR = HERE / "catalog"
QUERY_DIR = HERE / "queries"
SEPARATOR = "__"


@dataclass(frozen=True)
class Query:
    text: str
    expected: frozenset[str]
    """Exposed names; any of them in the results counts as found."""
    hard: bool


def load_dumps(directory: Path = CATALOG_DIR) -> list[dict]:
    return [json.loads(path.read_text()) for path in sorted(directory.glob("*.json"))]


def backend_text(dump: dict) -> BackendText:
    info = dump.get("serverInfo") or {}
    return BackendText(
        name=dump["server"],
        title=" ".join(filter(None, [info.get("name"), info.get("title")])),
        description=info.get("description") or "",
    )


def documents(dumps: list[dict] | None = None) -> list[SearchDocument]:
    """Every dumped tool as the gateway's index sees it, under its exposed name."""
    docs = []
    for dump in dumps if dumps is not None else load_dumps():
        backend = backend_text(dump)
        for raw in dump["tools"]:
            tool = types.Tool.model_validate({**raw, "name": f"{dump['server']}{SEPARATOR}{raw['name']}"})
            docs.append(SearchDocument(tool, backend))
    return docs


def load_queries(name: str) -> list[Query]:
    """`dev` or `holdout`: one `expected | query` a line, `!` marks a hard one, `#` a comment."""
    queries = []
    for line in (QUERY_DIR / f"{name}.txt").read_text().splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        hard = line.startswith("!")
        expected, text = line.lstrip("! ").split("|", 1)
        names = frozenset(ref.strip().replace("/", SEPARATOR, 1) for ref in expected.split(","))
        queries.append(Query(text.strip(), names, hard))
    return queries
