"""OpenTelemetry traces, exported to real OTLP receivers (HTTP decoded with `opentelemetry-proto`, gRPC
served by grpcio): a workflow with a fan-out step and a router step over real backends is one trace
of the expected shape; a client's `traceparent` is its parent and reaches a real MCP backend; an
exporter that is down costs the calls nothing."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from concurrent import futures
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the otel extra: pip install 'toolweave[otel]'")

import grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

from support.api import ApiApp, AppFactory
from support.configs import http_backend, python_backend
from support.processes import free_port, header_server

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{CLIENT_SPAN}-01"


@dataclass(frozen=True)
class Span:
    trace_id: str
    span_id: str
    parent: str
    name: str
    kind: int
    attributes: dict[str, Any]
    status: int


def _spans(request: trace_service_pb2.ExportTraceServiceRequest) -> list[Span]:
    found = []
    for resource in request.resource_spans:
        for scope in resource.scope_spans:
            for span in scope.spans:
                attributes = {a.key: _value(a.value) for a in span.attributes}
                found.append(
                    Span(
                        span.trace_id.hex(),
                        span.span_id.hex(),
                        span.parent_span_id.hex(),
                        span.name,
                        span.kind,
                        attributes,
                        span.status.code,
                    )
                )
    return found


def _value(value: Any) -> Any:
    kind = value.WhichOneof("value")
    return getattr(value, kind) if kind else None


class Receiver:
    def __init__(self) -> None:
        self.spans: list[Span] = []
        self.resources: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def add(self, request: trace_service_pb2.ExportTraceServiceRequest) -> None:
        with self.lock:
            self.spans.extend(_spans(request))
            for resource in request.resource_spans:
                self.resources.append({a.key: _value(a.value) for a in resource.resource.attributes})


@pytest.fixture
def otlp_http() -> Iterator[tuple[str, Receiver]]:
    """An OTLP/HTTP receiver on loopback: `POST /v1/traces` decoded with the official protobufs."""
    receiver = Receiver()

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length") or 0))
            if self.path != "/v1/traces":
                self.send_response(404)
                self.end_headers()
                return
            request = trace_service_pb2.ExportTraceServiceRequest()
            request.ParseFromString(body)
            receiver.add(request)
            answer = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
            self.send_response(200)
            self.send_header("content-type", "application/x-protobuf")
            self.send_header("content-length", str(len(answer)))
            self.end_headers()
            self.wfile.write(answer)

        def log_message(self, *_args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}", receiver
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def otlp_grpc() -> Iterator[tuple[str, Receiver]]:
    """An OTLP/gRPC receiver on loopback (grpcio's server, the official service definition)."""
    receiver = Receiver()

    class Service(trace_service_pb2_grpc.TraceServiceServicer):
        def Export(self, request: Any, context: Any) -> Any:
            receiver.add(request)
            return trace_service_pb2.ExportTraceServiceResponse()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Service(), server)
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    try:
        yield f"http://127.0.0.1:{port}", receiver
    finally:
        server.stop(0)


@pytest.fixture(scope="module")
def hs_url() -> Iterator[str]:
    with header_server() as url:
        yield url


def traced_config(endpoint: str, hs: str | None, **telemetry: Any) -> dict[str, Any]:
    if hs is None:  # the in-process backend alone
        return {"backends": [python_backend()], "telemetry": {"otlp_endpoint": endpoint, **telemetry}}
    return {
        "backends": [python_backend(), http_backend("hs", hs)],
        "telemetry": {"otlp_endpoint": endpoint, **telemetry},
        "composite_tools": [
            {
                "name": "both",
                "description": "Greet, and report the trace context a backend received.",
                "targets": [
                    {"tool": "py/greet", "arguments": {"name": "x"}},
                    {"tool": "hs/trace_context", "arguments": {}},
                ],
            },
            {
                "name": "pick",
                "description": "Trace context or a greeting.",
                "routing": "rule_based",
                "operations": [
                    {"slug": "context", "tool": "hs/trace_context"},
                    {"slug": "hello", "tool": "py/greet"},
                ],
                "rules": [
                    {
                        "condition": {"type": "contains", "field": "name", "value": "trace"},
                        "operation": "context",
                        "priority": 1,
                    }
                ],
                "default_operation": "hello",
            },
            {
                "name": "flow",
                "description": "Fan out, then route.",
                "steps": [
                    {"id": "fan", "tool": "both", "arguments": {}},
                    {"id": "route", "tool": "pick", "arguments": {"name": "trace me"}, "dependsOn": ["fan"]},
                ],
            },
        ],
    }


async def flushed(api: ApiApp, receiver: Receiver) -> list[Span]:
    import asyncio

    assert api.runtime.tracing is not None
    await asyncio.to_thread(api.runtime.tracing.provider.force_flush)
    with receiver.lock:
        return list(receiver.spans)


def children(spans: list[Span], parent: Span) -> list[str]:
    return sorted(span.name for span in spans if span.parent == parent.span_id)


def only(spans: list[Span], name: str) -> Span:
    found = [span for span in spans if span.name == name]
    assert len(found) == 1, (name, [s.name for s in spans])
    return found[0]


async def test_a_workflow_is_one_trace_under_the_clients_span(
    sqlite_app: AppFactory, otlp_http: tuple[str, Receiver], hs_url: str
) -> None:
    endpoint, receiver = otlp_http
    api = await sqlite_app(traced_config(endpoint, hs_url, trace_url="http://viewer.test/trace/{trace_id}"))
    async with api.client() as client:
        answer = await client.post("/api/v1/tools/flow/call", json={}, headers={"traceparent": TRACEPARENT})
    assert answer.status_code == 200 and answer.json()["isError"] is False, answer.text
    spans = await flushed(api, receiver)
    assert {span.trace_id for span in spans} == {TRACE_ID}  # one trace: the client's

    request = only(spans, "POST /api/v1/tools/flow/call")
    assert request.parent == CLIENT_SPAN and request.attributes["http.response.status_code"] == 200
    flow = only(spans, "tools/call flow")
    assert flow.parent == request.span_id
    assert (
        flow.attributes["gen_ai.tool.name"] == "flow" and flow.attributes["mcp.method.name"] == "tools/call"
    )
    run_id = answer.json()["_meta"]["toolweave"]["run_id"]
    assert flow.attributes["toolweave.run.id"] == run_id
    async with api.client() as client:
        run = (await client.get(f"/api/v1/runs/{run_id}")).json()
    assert run["traceId"] == TRACE_ID
    async with api.client() as client:
        page = (await client.get(f"/runs/{run_id}")).text
    assert f'href="http://viewer.test/trace/{TRACE_ID}"' in page
    assert {event["trace_id"] for event in run["events"]} == {TRACE_ID}
    assert children(spans, flow) == ["tools/call both", "tools/call pick"]
    both, pick = only(spans, "tools/call both"), only(spans, "tools/call pick")
    assert children(spans, both) == ["tools/call hs__trace_context", "tools/call py__greet"]
    assert children(spans, pick) == ["router.decide", "tools/call hs__trace_context"]
    decision = only(spans, "router.decide")
    assert decision.attributes["toolweave.router.operation"] == "context"
    assert "trace" in decision.attributes["toolweave.router.reason"]
    greet = only(spans, "tools/call py__greet")
    backend = [s for s in spans if s.parent == greet.span_id]
    assert [(s.name, s.kind, s.attributes["toolweave.backend"]) for s in backend] == [
        ("tools/call greet", 3, "py")  # SPAN_KIND_CLIENT
    ]


async def test_the_clients_traceparent_reaches_the_backend(
    sqlite_app: AppFactory, otlp_http: tuple[str, Receiver], hs_url: str
) -> None:
    endpoint, receiver = otlp_http
    api = await sqlite_app(traced_config(endpoint, hs_url))
    async with api.client() as client:
        answer = await client.post(
            "/api/v1/tools/hs__trace_context/call", json={}, headers={"traceparent": TRACEPARENT}
        )
        failed = await client.post(
            "/api/v1/tools/py__explode/call", json={}, headers={"traceparent": TRACEPARENT}
        )
    received = answer.json()["structuredContent"]
    spans = await flushed(api, receiver)
    backend_span = only(spans, "tools/call trace_context")
    for carried in (received["meta"]["traceparent"], received["headers"]["traceparent"]):
        _version, trace_id, parent, _flags = carried.split("-")
        assert (trace_id, parent) == (TRACE_ID, backend_span.span_id)
    explode = only(spans, "tools/call py__explode")
    assert explode.status == 2 and failed.json()["isError"] is True  # STATUS_CODE_ERROR


async def test_grpc_export(sqlite_app: AppFactory, otlp_grpc: tuple[str, Receiver]) -> None:
    endpoint, receiver = otlp_grpc
    api = await sqlite_app(traced_config(endpoint, None, otlp_protocol="grpc", service_name="tw-grpc"))
    async with api.client() as client:
        answer = await client.post("/api/v1/tools/py__greet/call", json={"name": "g"})
    assert answer.status_code == 200
    spans = await flushed(api, receiver)
    assert {"POST /api/v1/tools/py__greet/call", "tools/call py__greet", "tools/call greet"} <= {
        s.name for s in spans
    }


async def test_an_exporter_that_is_down_costs_the_calls_nothing(
    sqlite_app: AppFactory, caplog: pytest.LogCaptureFixture
) -> None:
    api = await sqlite_app(traced_config(f"http://127.0.0.1:{free_port()}", None))
    async with api.client() as client:
        for index in range(20):
            answer = await client.post("/api/v1/tools/py__greet/call", json={"name": str(index)})
            assert answer.status_code == 200 and answer.json()["isError"] is False
    caplog.set_level(logging.WARNING, logger="toolweave.telemetry")
    import asyncio

    assert api.runtime.tracing is not None
    for _ in range(3):
        await asyncio.to_thread(api.runtime.tracing.provider.force_flush)
    warnings = [r for r in caplog.records if r.name == "toolweave.telemetry"]
    assert len(warnings) == 1 and "not delivered" in warnings[0].getMessage()  # once a minute, not per batch
    assert api.runtime.tracing.guarded.dropped > 0


def test_off_unless_asked_for() -> None:
    from toolweave.config.models import TelemetryConfig
    from toolweave.telemetry import settings

    assert settings(TelemetryConfig(), {}) is None
    chosen = settings(TelemetryConfig(), {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c:4318/"})
    assert chosen is not None and chosen["url"] == "http://c:4318/v1/traces" and chosen["ratio"] == 1.0
    assert (
        settings(TelemetryConfig(), {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://c", "OTEL_SDK_DISABLED": "true"})
        is None
    )
    env = {
        "OTEL_EXPORTER_OTLP_HEADERS": "api-key=s%20x",
        "OTEL_TRACES_SAMPLER": "traceidratio",
        "OTEL_TRACES_SAMPLER_ARG": "0.25",
    }
    picked = settings(TelemetryConfig(otlp_endpoint="http://mine:4318", service_name="gw"), env)
    assert picked is not None
    assert (picked["url"], picked["headers"], picked["ratio"], picked["service"]) == (
        "http://mine:4318/v1/traces",
        {"api-key": "s x"},
        0.25,
        "gw",
    )


def test_nothing_of_opentelemetry_is_imported_when_off() -> None:
    """Neither the SDK nor an exporter (the MCP SDK itself imports the OpenTelemetry API)."""
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from toolweave.config import parse_config\n"
        "from toolweave.server.app import server_app\n"
        "app = server_app(parse_config({'gateway': {'database': 'sqlite:///:memory:'}}))\n"
        "assert app.state.runtime.tracing is None\n"
        "print(sorted(m for m in sys.modules if m.startswith(('opentelemetry.sdk', 'opentelemetry.exporter'))))\n"
    )
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert out.stdout.strip() == "[]"


async def test_the_python_api_honours_telemetry(otlp_http: tuple[str, Receiver]) -> None:
    """`Gateway(config)` traces as `[telemetry]` says (calls on `/mcp` and through a virtual server),
    exports what is queued at `stop()`; `tracer=None` turns it off."""
    from toolweave import Gateway
    from toolweave.config import parse_config
    from toolweave.executor import ToolExecutor

    endpoint, receiver = otlp_http
    raw = traced_config(endpoint, None, service_name="tw-python")
    raw["servers"] = [{"name": "desk", "tools": ["py__greet"]}]
    async with Gateway(parse_config(raw)) as gateway:
        assert gateway.tracing is not None
        assert not (await gateway.executor().call("py__greet", {"name": "a"})).is_error
        desk = gateway.servers.by_name["desk"]
        assert not (await ToolExecutor(desk.registry).call("py__greet", {"name": "b"})).is_error
    assert gateway.tracing is None and gateway.registry.tracer is None
    with receiver.lock:
        names = [span.name for span in receiver.spans]
    assert names.count("tools/call py__greet") == 2 and names.count("tools/call greet") == 2, names
    from toolweave import __version__

    with receiver.lock:
        resources = list(receiver.resources)
    assert resources and all(
        r["service.name"] == "tw-python" and r["service.version"] == __version__ for r in resources
    ), resources

    async with Gateway(parse_config(raw), tracer=None) as untraced:
        assert untraced.tracing is None and untraced.registry.tracer is None
        await untraced.executor().call("py__greet", {"name": "c"})
    with receiver.lock:
        assert len(receiver.spans) == len(names)


async def test_a_request_span_ends_as_an_error_when_the_app_raises_or_answers_5xx(
    otlp_http: tuple[str, Receiver],
) -> None:
    """The request's server span: the app's exception is recorded and re-raised, a 5xx answer is an
    error, a 2xx is not; each span ends and the context around the request is the same after."""
    from opentelemetry import trace

    from toolweave.config import parse_config
    from toolweave.telemetry import Tracing, settings

    endpoint, receiver = otlp_http
    chosen = settings(parse_config(traced_config(endpoint, None)).telemetry)
    assert chosen is not None
    tracing = Tracing(chosen)

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if scope["path"] == "/raises":
            raise RuntimeError("boom")
        await send({"type": "http.response.start", "status": 503 if scope["path"] == "/down" else 200})
        await send({"type": "http.response.body", "body": b""})

    async def receive() -> dict[str, Any]:
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(_message: Any) -> None:
        pass

    middleware = tracing.middleware_class(app, tracing)
    before = trace.get_current_span()
    for path in ("/raises", "/down", "/fine"):
        scope = {"type": "http", "path": path, "method": "GET", "headers": []}
        if path == "/raises":
            with pytest.raises(RuntimeError, match="boom"):
                await middleware(scope, receive, send)
        else:
            await middleware(scope, receive, send)
        assert trace.get_current_span() is before
    tracing.close()
    with receiver.lock:
        spans = list(receiver.spans)
    raised, down, fine = (only(spans, f"GET /{name}") for name in ("raises", "down", "fine"))
    assert (raised.status, down.status, fine.status) == (2, 2, 0)  # STATUS_CODE_ERROR, _UNSET
    assert down.attributes["http.response.status_code"] == 503
    assert fine.attributes["http.response.status_code"] == 200
    assert "http.response.status_code" not in raised.attributes


def test_the_resource_is_hashed_once_and_equal_to_the_sdks() -> None:
    """The encoder hashes the resource once per span; the tracer's resource answers the same hash
    and equality as OpenTelemetry's own, computed once."""
    from opentelemetry.sdk.resources import Resource

    from toolweave.telemetry import _hashed_once

    made = Resource.create({"service.name": "tw", "service.version": "1"})
    hashed = _hashed_once(made)
    assert hashed == made and made == hashed and hash(hashed) == hash(made)
    assert dict(hashed.attributes) == dict(made.attributes) and hashed.schema_url == made.schema_url
    assert hash(hashed.merge(Resource({"x": 1}))) == hash(made.merge(Resource({"x": 1})))


META_TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
META_CLIENT_SPAN = "b7ad6b7169203331"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_tools_call_span_nests_under_the_request_and_the_clients_traceparent(
    tmp_path: Path, api_env: None, otlp_http: tuple[str, Receiver], mode: str
) -> None:
    """Over MCP on both revisions, the call's span is a child of the request's span, in the client's
    trace: a plain call (the fast path; `traceparent` in the HTTP headers) and one the SDK handles
    (2025-11-25: in the session's task, away from the HTTP request's; `traceparent` in `_meta`)."""
    import asyncio

    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared._httpx_utils import create_mcp_http_client

    from support.serving import serve_asgi
    from toolweave.config import parse_config
    from toolweave.server.app import server_app

    endpoint, receiver = otlp_http
    raw = {**traced_config(endpoint, None), "gateway": {"database": f"sqlite:///{tmp_path / 'tw.db'}"}}
    app = server_app(parse_config(raw))
    async with serve_asgi(app) as base:
        http = create_mcp_http_client(headers={"traceparent": TRACEPARENT})
        async with Client(streamable_http_client(f"{base}/mcp", http_client=http), mode=mode) as client:
            assert not (await client.call_tool("py__greet", {"name": "t"})).is_error
        async with Client(f"{base}/mcp", mode=mode) as client:
            meta = {"traceparent": f"00-{META_TRACE_ID}-{META_CLIENT_SPAN}-01"}
            assert not (await client.call_tool("py__multiply", {"a": 2, "b": 3}, meta=meta)).is_error  # type: ignore[arg-type]
        tracing = app.state.runtime.tracing
        assert tracing is not None
        await asyncio.to_thread(tracing.provider.force_flush)
    with receiver.lock:
        spans = list(receiver.spans)
    for tool, backend_tool, trace_id, client_span in (
        ("py__greet", "greet", TRACE_ID, CLIENT_SPAN),
        ("py__multiply", "multiply", META_TRACE_ID, META_CLIENT_SPAN),
    ):
        named = [s for s in spans if s.name == f"tools/call {tool}"]
        request = [s for s in named if s.kind == 2 and "http.request.method" in s.attributes]  # SERVER
        call = [s for s in named if s not in request]
        assert len(request) == 1 and len(call) == 1, [(s.name, s.kind, s.parent) for s in spans]
        assert (request[0].trace_id, request[0].parent) == (trace_id, client_span)
        assert (call[0].trace_id, call[0].parent, call[0].kind) == (trace_id, request[0].span_id, 1)
        assert only(spans, f"tools/call {backend_tool}").parent == call[0].span_id
