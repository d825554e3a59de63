"""What tracing costs per call: `python -m bench.telemetry [--before TREE] [--calls N] [--rounds R]`.

Side by side in one run, each variant in its own process (interleaved rounds, the median kept):

- `before`: another toolweave tree (`--before`, e.g. a `git worktree` of the commit before tracing),
  telemetry not even present;
- `off`: this tree, no `[telemetry]`: the executor's one `tracer is None` check per call;
- `on`: this tree, tracing at 100% sampling, exported over OTLP/HTTP to a sink in this process (the
  gateway's export thread, protobuf encoding included, counts in its CPU time).

- `--parts`: instead, the pieces of a traced direct call in this process, each the least CPU of
  many short runs (least disturbed by other processes): its two spans through toolweave's tracer
  (the event loop's share), the same two spans through OpenTelemetry's SDK alone, and OpenTelemetry's
  OTLP encoder and exporter (encode and post to the sink) per span (the export thread's share);
  the SDK's spans and the encoder also without attributes (what the attributes cost), and the
  encoder and exporter with batches of 2,048 spans instead of the `BatchSpanProcessor`'s 512, and
  an incoming HTTP request's server span (the middleware over an app that answers at once).
- `--frozen`: also `on-frozen`, the same as `on` with the started gateway's heap moved out of the
  garbage collector's sight (`gc.freeze()`): what the full collections that tracing's queued spans
  bring about cost.
- `--also LABEL=TREE[,NAME=VALUE...]` (repeatable): another tree's `on` (e.g. a change to the
  tracing code, a `git worktree` of the commit before it; `.` for this one), with these
  environment variables (e.g. `OTEL_BSP_MAX_EXPORT_BATCH_SIZE=64`), in the same interleaved rounds.

Each process builds a `Gateway` over the in-process demo notebook (`toolweave.demo.notes`) and a
fan-out of two of its tools, and measures CPU time per call through the executor: a direct call
(2 spans when on: the call and its backend call) and the fan-out (5 spans). Two figures each: the
whole process (`time.process_time`: the export thread's encoding and posting, and the notebook's
own thread-pool work, included) and the event loop's thread alone (`time.thread_time` in it: what
the call's own path pays); the JSON also gives the CPU the garbage collector took per call (in any
thread) and its full collections. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
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


class _Collections:
    """A `gc.callbacks` entry: the CPU time spent collecting (in whichever thread collects) and the
    number of full (generation 2) collections."""

    def __init__(self) -> None:
        self.seconds = 0.0
        self.full = 0
        self._started: dict[int, float] = {}

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        thread = threading.get_ident()
        if phase == "start":
            self._started[thread] = time.thread_time()
            return
        self.seconds += time.thread_time() - self._started.pop(thread, time.thread_time())
        self.full += info["generation"] == 2


async def _measure(variant: str, endpoint: str, calls: int) -> dict[str, float]:
    """In the child: CPU µs per direct call and per fan-out call, after a warm-up."""
    from toolweave import Gateway
    from toolweave.config import parse_config

    raw: dict[str, Any] = dict(CONFIG)
    tracer = None
    if variant in ("on", "on-frozen"):
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
        if variant == "on-frozen":
            gc.collect()
            gc.freeze()  # the heap so far (imports, the gateway) never scanned again
        for name, arguments in ((direct, {"query": "gateway"}), ("both", {"query": "gateway"})):
            for _ in range(max(50, calls // 10)):
                await gw.call(name, arguments)
            collecting = _Collections()
            started, started_loop = time.process_time(), time.thread_time()
            gc.callbacks.append(collecting)
            for _ in range(calls):
                result = await gw.call(name, arguments)
                assert not result.is_error, result
            gc.callbacks.remove(collecting)
            figures[name + ":loop"] = (time.thread_time() - started_loop) / calls * 1e6
            figures[name] = (time.process_time() - started) / calls * 1e6
            figures[name + ":gc"] = collecting.seconds / calls * 1e6
            figures[name + ":full_gc"] = collecting.full
        if tracer is not None:
            tracer.provider.force_flush()
            figures["dropped"] = tracer.guarded.dropped
            tracer.close()
    return figures


def _least(run: Any, repeat: int, times: int = 40, between: Any = None) -> float:
    """The least CPU µs of one `run()` over `times` runs of `repeat` each (this thread); `between()`
    after each run, untimed."""
    best = float("inf")
    for _ in range(times):
        started = time.thread_time()
        for _ in range(repeat):
            run()
        best = min(best, (time.thread_time() - started) / repeat * 1e6)
        if between is not None:
            between()
    return best


def _parts(endpoint: str) -> dict[str, float]:
    """The pieces of a traced direct call (see the module's docstring), µs."""
    from types import SimpleNamespace

    import mcp_types as types
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.trace import ReadableSpan
    from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult

    from toolweave.telemetry import Tracing

    class Kept(SpanExporter):
        def __init__(self) -> None:
            self.spans: list[ReadableSpan] = []

        def export(self, spans: Any) -> SpanExportResult:
            if len(self.spans) < 512:
                self.spans.extend(spans[: 512 - len(self.spans)])
            return SpanExportResult.SUCCESS

    kept = Kept()
    chosen = {
        "url": endpoint,
        "protocol": "http/protobuf",
        "headers": {},
        "ratio": 1.0,
        "service": "toolweave",
    }
    tracing = Tracing(chosen, exporter=kept)
    backend = type("PythonBackend", (), {"name": "notes"})()
    entry = SimpleNamespace(name="notes__search", backend=backend, backend_tool="search")
    session = SimpleNamespace(caller="local", tenant=None)
    result = types.CallToolResult(content=[types.TextContent(type="text", text="found")])

    def traced() -> None:
        with tracing.call(entry, session, 0) as span:
            with tracing.backend(entry):
                pass
            span.finish(result)

    tracer = tracing.tracer
    call_attributes = {
        "mcp.method.name": "tools/call",
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "notes__search",
        "enduser.id": "local",
    }
    backend_attributes = {
        "mcp.method.name": "tools/call",
        "gen_ai.tool.name": "search",
        "toolweave.backend": "notes",
    }

    def sdk_alone() -> None:
        call = tracer.start_span("tools/call notes__search", attributes=call_attributes)
        inner = tracer.start_span(
            "tools/call search", context=trace.set_span_in_context(call), attributes=backend_attributes
        )
        inner.end()
        call.end()

    def sdk_bare() -> None:
        call = tracer.start_span("tools/call notes__search")
        inner = tracer.start_span("tools/call search", context=trace.set_span_in_context(call))
        inner.end()
        call.end()

    flush = tracing.provider.force_flush  # the queue (2,048 spans) never full: no drop is timed
    figures = {
        "loop_2_spans_toolweave_us": _least(traced, 500, between=flush),
        "loop_2_spans_sdk_alone_us": _least(sdk_alone, 500, between=flush),
    }
    flush()
    spans = kept.spans[:512]
    flush()
    kept.spans = []
    figures["request_span_us"] = _request_spans(tracing, flush)
    flush()
    kept.spans = []
    figures["loop_2_spans_sdk_no_attributes_us"] = _least(sdk_bare, 500, between=flush)
    flush()
    bare = kept.spans[:512]
    exporter = OTLPSpanExporter(endpoint=endpoint + "/v1/traces", timeout=5)
    figures["encode_per_span_us"] = _least(lambda: encode_spans(spans).SerializePartialToString(), 1) / 512
    figures["encode_per_span_no_attributes_us"] = (
        _least(lambda: encode_spans(bare).SerializePartialToString(), 1) / 512
    )
    figures["export_per_span_us"] = _least(lambda: exporter.export(spans), 1) / 512
    larger = spans * 4  # a batch of 2,048 (OTEL_BSP_MAX_EXPORT_BATCH_SIZE=2048)
    figures["encode_per_span_batch_2048_us"] = (
        _least(lambda: encode_spans(larger).SerializePartialToString(), 1, 20) / 2048
    )
    figures["export_per_span_batch_2048_us"] = _least(lambda: exporter.export(larger), 1, 20) / 2048
    exporter.shutdown()
    tracing.close()
    return {name: round(value, 2) for name, value in figures.items()}


def _request_spans(tracing: Any, flush: Any) -> float:
    """µs per HTTP request through toolweave's request-span middleware over an app that answers 200
    at once, less the same app called bare: the server span of an incoming request."""

    async def app(scope: Any, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200})
        await send({"type": "http.response.body", "body": b""})

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(_message: Any) -> None:
        pass

    scope = {"type": "http", "path": "/api/v1/tools", "method": "GET", "headers": [(b"accept", b"*/*")]}
    middleware = tracing.middleware_class(app, tracing)

    async def requests(through: Any) -> None:
        for _ in range(200):
            await through(scope, receive, send)

    loop = asyncio.new_event_loop()
    try:
        traced = _least(lambda: loop.run_until_complete(requests(middleware)), 1, 60, between=flush)
        bare = _least(lambda: loop.run_until_complete(requests(app)), 1, 60)
    finally:
        loop.close()
    return (traced - bare) / 200


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


def _run(tree: Path, variant: str, endpoint: str, calls: int, extra: dict[str, str]) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(tree / "src"), "TOOLWEAVE_LOG_LEVEL": "warning"}
    for name in list(env):
        if name.startswith("OTEL_"):
            del env[name]
    env.update(extra)
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
        metavar="LABEL=TREE[,NAME=VALUE...]",
        help="another tree's `on` (with these environment variables), side by side (repeatable)",
    )
    parser.add_argument(
        "--frozen", action="store_true", help="also `on-frozen`: on, the started gateway's heap gc.freeze()d"
    )
    parser.add_argument("--parts", action="store_true", help="the pieces of a traced call, in this process")
    parser.add_argument("--calls", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    sink = _Sink()
    if args.parts:
        print(json.dumps(_parts(sink.url)))
        return
    variants = [("off", ROOT), ("on", ROOT)]
    if args.before is not None:
        variants.insert(0, ("before", args.before.resolve()))
    if args.frozen:
        variants.append(("on-frozen", ROOT))
    extra: dict[str, dict[str, str]] = {}
    for also in args.also:
        label, sep, rest = also.partition("=")
        tree, *settings = rest.split(",")
        if not sep or not label or not tree or label in ("before", "off", "on", "on-frozen"):
            parser.error(f"--also wants LABEL=TREE[,NAME=VALUE...] with a new label, got {also!r}")
        extra[label] = dict(setting.partition("=")[::2] for setting in settings)
        variants.append((label, Path(tree).resolve()))
    seen: dict[str, list[dict[str, float]]] = {name: [] for name, _ in variants}
    for _round in range(args.rounds):
        for name, tree in variants:
            child = "off" if name in ("before", "off") else "on-frozen" if name == "on-frozen" else "on"
            seen[name].append(_run(tree, child, sink.url, args.calls, extra.get(name, {})))
    summary: dict[str, Any] = {"calls": args.calls, "rounds": args.rounds}
    columns = (("direct_us", "notes__search"), ("direct_loop_us", "notes__search:loop"))
    columns += (("fanout_us", "both"), ("fanout_loop_us", "both:loop"))
    columns += (("direct_gc_us", "notes__search:gc"), ("fanout_gc_us", "both:gc"))
    columns += (("direct_full_gcs", "notes__search:full_gc"), ("fanout_full_gcs", "both:full_gc"))
    shown = ("direct_us", "direct_loop_us", "direct_gc_us", "fanout_us", "fanout_loop_us", "fanout_gc_us")
    widths = (15, 9, 7, 16, 9, 7)
    print(
        f"{'variant':8} {'direct µs/call':>15} {'its loop':>9} {'its gc':>7} {'fan-out µs/call':>16} {'its loop':>9} {'its gc':>7}"
    )
    for name, _tree in variants:
        summary[name] = {
            key: round(statistics.median(r[field] for r in seen[name]), 1) for key, field in columns
        }
        print(
            f"{name:8}"
            + "".join(f" {summary[name][key]:{w}.1f}" for key, w in zip(shown, widths, strict=True))
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
