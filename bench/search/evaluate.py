"""Score tool search on the dumped catalog: toolweave's ranking beside FastMCP 4.1.0's BM25 search
transform, on the same tools and queries, in the same run; and the tokens each way costs."""

from __future__ import annotations

import json
import statistics
import subprocess
from dataclasses import dataclass

import bpe_openai
import mcp_types as types

from bench.peers import FASTMCP, ensure_installed
from bench.search.corpus import HERE, SEPARATOR, documents, load_dumps, load_queries
from bench.search.scoring import Scores, score
from toolweave.catalog.search import SEARCH_TOOLS, ToolIndex
from toolweave.executor.search_mode import render_found

ENCODING = "o200k_base"


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


def evaluate(with_peer: bool = True) -> dict:
    dumps = load_dumps()
    docs = documents(dumps)
    index = ToolIndex(docs)
    sets = {name: load_queries(name) for name in ("dev", "holdout")}
    encoding = bpe_openai.get_encoding(ENCODING)

    def count(text: str) -> int:
        return len(encoding.encode(text))

    def ours(query: str) -> list[str]:
        return [tool.name for tool in index.search(query, 10)]

    results: dict = {"tools": len(docs), "servers": len(dumps), "sets": {}}
    every_query = [q.text for queries in sets.values() for q in queries]
    peer = fastmcp_rankings(dumps, every_query) if with_peer else None
    peer_by_query = dict(zip(every_query, peer["rankings"], strict=True)) if peer else {}
    for name, queries in sets.items():
        row: dict[str, Scores] = {"toolweave lexical": score(queries, ours)}
        if peer:
            row["FastMCP 4.1.0 BM25"] = score(queries, peer_by_query.__getitem__)
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
            if show_misses and show_misses in ranker and name == "dev":
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
