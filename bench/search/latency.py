"""`python -m bench.search.latency`: `find_tools` through a served gateway at 1,000 tools.

Four replay backends (`bench.search.replay`) of 250 dumped tools each behind `toolweave serve` in
search mode. Measured side by side in the same interleaved rounds, with one MCP client each:
`find_tools` (limit 5) cycling through the dev queries, and a plain pinned tool call through the
same gateway, so the search's own cost reads as the difference of the two.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from mcp import Client

from bench.gateway import start_gateway, toml_dumps
from bench.load import Target, compare, tool_call, url_client
from bench.procs import ProcessGroup
from bench.rawclient import raw_client
from bench.search.corpus import CATALOG_DIR, documents, load_queries
from toolweave.catalog.search import SearchDocument, ToolIndex

BACKENDS = 4
TOOLS_PER_BACKEND = 250
PINNED = "r1__everything__echo"


def config(workdir: Path) -> Path:
    dumps = sorted(str(path) for path in CATALOG_DIR.glob("*.json"))
    backends = [
        {
            "name": f"r{i}",
            "command": sys.executable,
            "args": ["-m", "bench.search.replay", "--limit", str(TOOLS_PER_BACKEND), *dumps],
            "cwd": str(Path.cwd()),
        }
        for i in range(1, BACKENDS + 1)
    ]
    document = {
        "gateway": {
            "database": f"sqlite:///{workdir / 'search.db'}",
            "log_level": "warning",
            "tool_exposure": "search",
            "pinned": [PINNED],
        },
        "backends": backends,
    }
    path = workdir / "search.toml"
    path.write_text(toml_dumps(document))
    return path


def find_tools_call() -> Any:
    queries = itertools.cycle([query.text for query in load_queries("dev")])

    async def call(client: Client) -> Any:
        result = await client.call_tool("find_tools", {"query": next(queries), "limit": 5})
        if result.is_error:
            raise RuntimeError(f"find_tools failed: {result.content}")
        return result

    return call


def raw_call(name: str, arguments_of: Any) -> Any:
    """tools/call with the minimal client (no SDK parsing): the gateway's own time."""

    async def call(client: Any) -> Any:
        result = await client.request("tools/call", {"name": name, "arguments": arguments_of()})
        if result.get("isError"):
            raise RuntimeError(f"{name} failed: {result}")
        return result

    return call


def index_only_p50_ms() -> tuple[float, int]:
    """The ranking alone, in this process, over the same 1,000 tools: p50 per dev query."""
    docs = []
    for i in range(1, BACKENDS + 1):
        docs += [
            SearchDocument(d.tool.model_copy(update={"name": f"r{i}__{d.tool.name}"}), d.backend)
            for d in documents()[:TOOLS_PER_BACKEND]
        ]
    index = ToolIndex(docs)
    times = []
    for query in load_queries("dev"):
        start = time.perf_counter()
        index.search(query.text, 5)
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times), len(docs)


async def main() -> None:
    calls = int(os.environ.get("SEARCH_BENCH_CALLS", "600"))
    with tempfile.TemporaryDirectory(prefix="tw-search-") as tmp, ProcessGroup() as group:
        run = await start_gateway(group, config(Path(tmp)), [PINNED], name="toolweave-search")
        async with Client(run.url) as client:
            probe = await client.call_tool("find_tools", {"query": "list", "limit": 50})
            print(f"gateway ready; find_tools answers ({len(probe.content[0].text)} chars for 50 results)")
        raw_queries = itertools.cycle([query.text for query in load_queries("dev")])
        targets = [
            Target(
                f"find_tools, limit 5 ({BACKENDS * TOOLS_PER_BACKEND} tools)",
                url_client(run.url),
                find_tools_call(),
                run.pid,
            ),
            Target(
                "pinned tool call (same gateway)",
                url_client(run.url),
                tool_call(PINNED, {"message": "hello"}),
                run.pid,
            ),
            Target(
                "raw client: find_tools, limit 5",
                raw_client(run.url),
                raw_call("find_tools", lambda: {"query": next(raw_queries), "limit": 5}),
                run.pid,
            ),
            Target(
                "raw client: pinned tool call",
                raw_client(run.url),
                raw_call(PINNED, lambda: {"message": "hello"}),
                run.pid,
            ),
        ]
        measured = await compare(targets, concurrency=1, calls=calls, rounds=5, max_seconds=120)
        load = os.getloadavg()[0]
        print(f"load average {load:.1f} on {os.cpu_count()} cores; {calls} calls each, 5 interleaved rounds")
        for label, result in measured.items():
            print(f"  {label:<40} p50 {result.p50:7.2f} ms  p90 {result.pct(90):7.2f} ms  n={result.calls}")
        find, pinned, raw_find, raw_pinned = (measured[t.label] for t in targets)
        print(
            f"  find_tools p50 / plain call p50: SDK client {find.p50 / pinned.p50:.2f}, "
            f"raw client {raw_find.p50 / raw_pinned.p50:.2f}"
        )
    ranking, count = index_only_p50_ms()
    print(f"  the ranking alone (in process, {count} tools, dev queries): p50 {ranking:.3f} ms")


if __name__ == "__main__":
    asyncio.run(main())
