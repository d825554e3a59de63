"""What tracing costs per call: `python -m bench.telemetry [--before TREE] [--calls N] [--rounds R]`.

Side by side in one run, each variant in its own process (interleaved rounds, the median kept):

- `before`: another toolweave tree (`--before`, e.g. a `git worktree` of the commit before tracing),
  telemetry not even present;
- `off`: this tree, no `[telemetry]`: the executor's one `tracer is None` check per call;
- `on`: this tree, tracing at 100% sampling, exported over OTLP/HTTP to a sink in this process (the
  gateway's export thread, protobuf encoding included, counts in its CPU time).

- `--also LABEL=TREE` (repeatable): another tree's `on` (e.g. a change to the tracing code, a
  `git worktree` of the commit before it), in the same interleaved rounds.

Each process builds a `Gateway` over the in-process demo notebook (`toolweave.demo.notes`) and a
fan-out of two of its tools, and measures CPU time per call through the executor: a direct call
(2 spans when on: the call and its backend call) and the fan-out (5 spans). Two figures each: the
whole process (`time.process_time`: the export thread's encoding and posting, and the notebook's
own thread-pool work, included) and the event loop's thread alone (`time.thread_time` in it: what
the call's own path pays). The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
CHILD = "--child"
CONFIG = {
    "gateway": {"database": "sqlite:///:memory:"},
    "backends": [{"name": "notes", "python": "toolweave.demo.notes"}],
    "composite_tools": [
        {
            "name": "both",
            "description": "Search the notebook twice.",
            "targets": [
                {"tool": "notes/search", "arguments": {"query": "gateway"}},
                {"tool": "notes/search", "arguments": {"query": "composite"}},
            ],
        }
    ],
}


async def _measure(variant: str, endpoint: str, calls: int) -> dict[str, float]:
    """In the child: CPU µs per direct call and per fan-out call, after a warm-up."""
    from toolweave import Gateway
    from toolweave.config import parse_config

    raw: dict[str, Any] = dict(CONFIG)
    tracer = None
    if variant == "on":
        from toolweave.telemetry import Tracing, settings

        cfg = parse_config({**raw, "telemetry": {"otlp_endpoint": endpoint}})
        assert cfg is not None
        chosen = settings(cfg.telemetry)
        assert chosen is not None
        tracer = Tracing(chosen)
    cfg = parse_config(raw)
    assert cfg is not None
    gateway = Gateway(cfg, tracer=tracer) if tracer is not None else Gateway(cfg)
    async with gateway as gw:
        names = {tool.name for tool in gw.list_tools()}
        direct = "notes__search"
        assert direct in names and "both" in names, names
        figures: dict[str, float] = {}
        for name, arguments in ((direct, {"query": "gateway"}), ("both", {"query": "gateway"})):
            for _ in range(max(50, calls // 10)):
                await gw.call(name, arguments)
            started, started_loop = time.process_time(), time.thread_time()
            for _ in range(calls):
                result = await gw.call(name, arguments)
                assert not result.is_error, result
            figures[name + ":loop"] = (time.thread_time() - started_loop) / calls * 1e6
            figures[name] = (time.process_time() - started) / calls * 1e6
        if tracer is not None:
            tracer.provider.force_flush()
            figures["dropped"] = tracer.guarded.dropped
            tracer.close()
    return figures


def _child(argv: list[str]) -> None:
    variant, endpoint, calls = argv[0], argv[1], int(argv[2])
    print(json.dumps(asyncio.run(_measure(variant, endpoint, calls))))


class _Sink:
    """An OTLP/HTTP endpoint that accepts every export (counts the bytes)."""

    def __init__(self) -> None:
        self.received = 0

        sink = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                sink.received += len(self.rfile.read(int(self.headers.get("content-length") or 0)))
                self.send_response(200)
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *_args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


def _run(tree: Path, variant: str, endpoint: str, calls: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "TOOLWEAVE_LOG_LEVEL": "warning"}
    for name in list(env):
        if name.startswith("OTEL_"):
            del env[name]
    out = subprocess.run(
        [sys.executable, "-m", "bench.telemetry", CHILD, variant, endpoint, str(calls)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"{variant} ({tree}) failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--before", type=Path, help="another toolweave tree (its src/ is imported)")
    parser.add_argument(
        "--also",
        action="append",
        default=[],
        metavar="LABEL=TREE",
        help="another tree's `on`, side by side (repeatable)",
    )
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    sink = _Sink()
    variants = [("off", ROOT), ("on", ROOT)]
    if args.before is not None:
        variants.insert(0, ("before", args.before.resolve()))
    for also in args.also:
        label, sep, tree = also.partition("=")
        if not sep or not label or label in ("before", "off", "on"):
            parser.error(f"--also wants LABEL=TREE with a new label, got {also!r}")
        variants.append((label, Path(tree).resolve()))
    seen: dict[str, list[dict[str, float]]] = {name: [] for name, _ in variants}
    for _round in range(args.rounds):
        for name, tree in variants:
            seen[name].append(_run(tree, "off" if name in ("before", "off") else "on", sink.url, args.calls))
    summary: dict[str, Any] = {"calls": args.calls, "rounds": args.rounds}
    columns = (("direct_us", "notes__search"), ("direct_loop_us", "notes__search:loop"))
    columns += (("fanout_us", "both"), ("fanout_loop_us", "both:loop"))
    print(f"{'variant':8} {'direct µs/call':>15} {'its loop':>9} {'fan-out µs/call':>16} {'its loop':>9}")
    for name, _tree in variants:
        summary[name] = {
            key: round(statistics.median(r[field] for r in seen[name]), 1) for key, field in columns
        }
        print(
            f"{name:8}"
            + "".join(
                f" {summary[name][key]:{w}.1f}" for (key, _), w in zip(columns, (15, 9, 16, 9), strict=True)
            )
        )
    off = summary["off"]
    for name, _tree in variants:
        if name not in ("before", "off"):
            summary[f"{name}_minus_off_us"] = {
                key: round(summary[name][key] - off[key], 1) for key, _ in columns
            }
    if "before" in summary:
        before = summary["before"]
        summary["off_minus_before_us"] = {key: round(off[key] - before[key], 1) for key, _ in columns}
    summary["otlp_bytes_received"] = sink.received
    print(json.dumps(summary))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == CHILD:
        _child(sys.argv[2:])
    else:
        main()
