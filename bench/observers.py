"""What the per-call observers cost: `python -m bench.observers [--before TREE] [--calls N] [--rounds R]`.

After every call it dispatched, the executor tells the served gateway's call observer
(`ServerRuntime._observe`), which hands the call to three services in turn: `Metrics.observe`
(Prometheus series), `ToolStats.observe` (the per-tool health of `GET /api/v1/stats`) and
`EventStream.observe` (the `tool_result` event of `GET /api/v1/events` and the trace log). This
measures each of them, and the three together, in process: CPU time (`time.thread_time`) per
observe call, the least of many short runs of `--calls` calls (the run least disturbed by other
processes on a shared machine).

The call observed is the one of bench scenario A (`b1__echo` on an HTTP MCP backend, by the local
operator, a successful result, 2.5 ms); also a tenant's call and an error. `events` is measured
as a served gateway runs it with the `warning` log level (the bench's): nobody subscribed, no
Redis relay; `events+sub`: one subscriber of `GET /api/v1/events` that takes every event (its
queue emptied between runs, untimed); `events-info`: nobody subscribed, at the `info` log level
(`gateway.log_level`'s default): the trace line of every call, text format, written to /dev/null.

Each tree (`--before TREE`, e.g. a `git worktree` of the commit before a change; and this one)
runs in its own process importing its own `src/`, in interleaved rounds; the median of the rounds'
figures is kept. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CHILD = "--child"
PIECES = ("metrics", "stats", "events", "all", "all-tenant", "all-error", "events+sub", "events-info")


def _least(run: Callable[[], None], calls: int, times: int, between: Callable[[], None] | None) -> float:
    """The least CPU µs per call of `times` runs of `calls` calls each (this thread)."""
    best = float("inf")
    for _ in range(times):
        started = time.thread_time()
        for _ in range(calls):
            run()
        best = min(best, (time.thread_time() - started) / calls * 1e6)
        if between is not None:
            between()
    return best


def _child(argv: list[str]) -> None:
    """In the child: µs per observe call of each piece, with the tree on PYTHONPATH."""
    import mcp_types as types

    import toolweave
    from toolweave.backends.mcp import MCPBackend
    from toolweave.catalog.catalog import Entry
    from toolweave.config import parse_config
    from toolweave.services.events import EventStream
    from toolweave.services.logs import TEXT_FORMAT
    from toolweave.services.metrics import Metrics
    from toolweave.services.stats import ToolStats
    from toolweave.store.stats import StatsRepository

    calls, times = int(argv[0]), int(argv[1])
    logging.getLogger("toolweave").setLevel(logging.WARNING)  # `gateway.log_level = "warning"`
    cfg = parse_config({"backends": [{"name": "b1", "url": "http://127.0.0.1:9/mcp"}]})
    assert cfg is not None
    backend = MCPBackend(cfg.backends[0])
    tool = types.Tool(name="echo", input_schema={"type": "object"})
    entry = Entry(name="b1__echo", tool=tool, backend=backend, backend_tool="echo")
    ok = types.CallToolResult(content=[types.TextContent(type="text", text="hi")])
    failed = types.CallToolResult(content=[types.TextContent(type="text", text="boom")], is_error=True)
    metrics = Metrics(instance="bench")
    stats = ToolStats(StatsRepository(None))  # type: ignore[arg-type]  # observe never writes
    events = EventStream()
    listening = EventStream()
    subscriber = listening.subscribe(None, everything=True)
    seconds = 0.0025

    def drain() -> None:
        while not subscriber.queue.empty():
            subscriber.queue.get_nowait()
        stats._pending.clear()  # one minute's tally, as between two flushes

    def every(result: types.CallToolResult, tenant: str | None) -> Callable[[], None]:
        def run() -> None:  # `ServerRuntime._observe`
            metrics.observe(entry, result, seconds, tenant)
            stats.observe(entry, result, seconds, tenant)
            events.observe(entry, result, seconds, tenant, None)

        return run

    pieces: dict[str, Callable[[], None]] = {
        "metrics": lambda: metrics.observe(entry, ok, seconds, None),
        "stats": lambda: stats.observe(entry, ok, seconds, None),
        "events": lambda: events.observe(entry, ok, seconds, None, None),
        "all": every(ok, None),
        "all-tenant": every(ok, "acme"),
        "all-error": every(failed, None),
        "events+sub": lambda: listening.observe(entry, ok, seconds, None, "bench"),
    }
    devnull = open(os.devnull, "w")  # noqa: SIM115  # closed at exit
    handler = logging.StreamHandler(devnull)
    handler.setFormatter(logging.Formatter(TEXT_FORMAT))
    trace = logging.getLogger("toolweave.trace")

    def logged() -> None:
        events.observe(entry, ok, seconds, None, "bench")

    pieces["events-info"] = logged
    assert set(pieces) == set(PIECES)
    figures: dict[str, Any] = {"src": str(Path(toolweave.__file__).parent)}
    for name in PIECES:
        if name == "events-info":  # `configure_logging("info")`: the root's handler, at INFO
            logging.getLogger().addHandler(handler)
            logging.getLogger("toolweave").setLevel(logging.INFO)
            assert trace.isEnabledFor(logging.INFO)
        pieces[name]()  # first call: label children created, caches filled
        figures[name] = _least(pieces[name], calls, times, drain)
    assert subscriber.queue.qsize() == 0 or subscriber.queue.get_nowait()["type"] == "tool_result"
    print(json.dumps(figures))


def _run(tree: Path, calls: int, times: int) -> dict[str, Any]:
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "TOOLWEAVE_LOG_LEVEL": "warning"}
    out = subprocess.run(
        [sys.executable, "-m", "bench.observers", CHILD, str(calls), str(times)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"{tree} failed:\n{out.stderr[-3000:]}")
    figures: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    if Path(figures["src"]).resolve() != (tree / "src" / "toolweave").resolve():
        raise SystemExit(f"{tree}: imported toolweave from {figures['src']}, not from the tree")
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--before", type=Path, help="another toolweave tree (its src/ is imported)")
    parser.add_argument("--calls", type=int, default=1000, help="calls per timed run")
    parser.add_argument("--times", type=int, default=100, help="timed runs per piece (the least kept)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    trees = [("after", ROOT)]
    if args.before is not None:
        trees.insert(0, ("before", args.before.resolve()))
    seen: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in trees}
    for _round in range(args.rounds):
        for name, tree in trees:
            seen[name].append(_run(tree, args.calls, args.times))
    summary: dict[str, Any] = {"calls": args.calls, "times": args.times, "rounds": args.rounds}
    summary["load"] = round(os.getloadavg()[0], 1)
    print(f"{'µs per observe call':20}" + "".join(f" {name:>10}" for name, _ in trees))
    for name, _tree in trees:
        summary[name] = {piece: round(statistics.median(r[piece] for r in seen[name]), 2) for piece in PIECES}
    for piece in PIECES:
        print(f"{piece:20}" + "".join(f" {summary[name][piece]:10.2f}" for name, _ in trees))
    if "before" in summary:
        summary["ratio"] = {
            piece: round(summary["after"][piece] / summary["before"][piece], 2) for piece in PIECES
        }
        print(f"{'after/before, all':20} {summary['ratio']['all']:10.2f}")
    print(json.dumps(summary))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == CHILD:
        _child(sys.argv[2:])
    else:
        main()
