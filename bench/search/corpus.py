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
    """Every `<server>.json` of `directory`: `{"server": name, "tools": [...a tools/list page...]}`,
    optionally with the `serverInfo` of the server's `initialize` answer (what `dump.py` writes)."""
    paths = sorted(directory.glob("*.json"))
    if not paths:
        raise SystemExit(f"{directory}: no <server>.json tools/list dumps found")
    dumps = []
    for path in paths:
        try:
            dump = json.loads(path.read_text())
        except ValueError as error:
            raise SystemExit(f"{path}: not JSON ({error})") from None
        if not isinstance(dump, dict) or not isinstance(dump.get("tools"), list):
            raise SystemExit(f'{path}: expected {{"server": name, "tools": [...]}}')
        dump.setdefault("server", path.stem)
        dumps.append(dump)
    return dumps


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


def load_queries(source: str | Path) -> list[Query]:
    """`dev`, `holdout` or a file of your own: one `expected | query` a line, `!` marks a hard one,
    `#` a comment. Expected tools are `server/tool` (the dump's `server` and the tool's name)."""
    path = source if isinstance(source, Path) else QUERY_DIR / f"{source}.txt"
    queries = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if "|" not in line:
            raise SystemExit(f"{path}:{number}: expected `server/tool[, server/tool] | query`, got {line!r}")
        hard = line.startswith("!")
        expected, text = line.lstrip("! ").split("|", 1)
        names = frozenset(
            ref.strip().replace("/", SEPARATOR, 1) for ref in expected.split(",") if ref.strip()
        )
        if not names or not text.strip():
            raise SystemExit(
                f"{path}:{number}: a query needs at least one expected tool and a text: {line!r}"
            )
        queries.append(Query(text.strip(), names, hard))
    return queries


def unknown_tools(queries: list[Query], docs: list[SearchDocument]) -> list[str]:
    """Expected tools the catalog lacks: a typo there would count as a miss of every ranking."""
    known = {doc.tool.name for doc in docs}
    return sorted(
        {name.replace(SEPARATOR, "/", 1) for q in queries for name in q.expected if name not in known}
    )
