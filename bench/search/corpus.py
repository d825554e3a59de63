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
    """`dev`, `holdout` or a file of your own, in either of two forms:

    - text: one `expected | query` a line, `!` marks a hard one, `#` a comment;
    - JSON Lines (`.jsonl`): one `{"query": ..., "expected": [...], "hard": false}` an object, where
      `expected` may also be one string (`"text"` is accepted for `"query"`).

    Expected tools are `server/tool` (the dump's `server` and the tool's name), the exposed
    `server__tool`, or the tool's name alone where one server has it (see `resolve_expected`)."""
    path = source if isinstance(source, Path) else QUERY_DIR / f"{source}.txt"
    if path.suffix == ".jsonl":
        return _json_lines(path)
    queries = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if "|" not in line:
            raise SystemExit(f"{path}:{number}: expected `server/tool[, server/tool] | query`, got {line!r}")
        hard = line.startswith("!")
        expected, text = line.lstrip("! ").split("|", 1)
        queries.append(_query(f"{path}:{number}", text, expected.split(","), hard))
    return queries


def _json_lines(path: Path) -> list[Query]:
    queries = []
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            item = json.loads(line)
        except ValueError as error:
            raise SystemExit(f"{where}: not JSON ({error})") from None
        if not isinstance(item, dict):
            raise SystemExit(f'{where}: expected {{"query": ..., "expected": [...]}}, got {line.strip()!r}')
        text = item.get("query", item.get("text"))
        expected = item.get("expected")
        if isinstance(expected, str):
            expected = [expected]
        if (
            not isinstance(text, str)
            or not isinstance(expected, list)
            or not all(isinstance(e, str) for e in expected)
        ):
            raise SystemExit(
                f'{where}: "query" must be a string and "expected" a tool name or a list of them: {line.strip()!r}'
            )
        queries.append(_query(where, text, expected, bool(item.get("hard", False))))
    return queries


def _query(where: str, text: str, refs: list[str], hard: bool) -> Query:
    names = frozenset(ref.strip().replace("/", SEPARATOR, 1) for ref in refs if ref.strip())
    if not names or not text.strip():
        raise SystemExit(f"{where}: a query needs at least one expected tool and a text")
    return Query(text.strip(), names, hard)


def resolve_expected(queries: list[Query], docs: list[SearchDocument]) -> list[Query]:
    """Expected tools by their exposed names. A name the catalog lacks stops the run (a typo there
    would count as a miss of every ranking); a tool's name alone stands for the one server's tool of
    that name, and stops the run naming the servers when several have it."""
    known = {doc.tool.name for doc in docs}
    by_tool: dict[str, list[str]] = {}
    for name in known:
        by_tool.setdefault(name.split(SEPARATOR, 1)[1], []).append(name)
    missing: set[str] = set()
    ambiguous: set[str] = set()

    def exposed(name: str) -> str:
        if name in known:
            return name
        candidates = by_tool.get(name, [])
        if len(candidates) == 1:
            return candidates[0]
        if candidates:
            ambiguous.add(f"{name} ({', '.join(sorted(c.replace(SEPARATOR, '/', 1) for c in candidates))})")
        else:
            missing.add(name.replace(SEPARATOR, "/", 1))
        return name

    resolved = [Query(q.text, frozenset(exposed(n) for n in q.expected), q.hard) for q in queries]
    if missing:
        raise SystemExit(f"expected tools the catalog lacks: {', '.join(sorted(missing)[:20])}")
    if ambiguous:
        raise SystemExit(
            f"expected tools named without their server that several servers have: {'; '.join(sorted(ambiguous))}"
        )
    return resolved
