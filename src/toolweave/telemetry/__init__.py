"""OpenTelemetry traces of every call (the optional extra `toolweave[otel]`).

`Tracing.from_config(config)` is None unless tracing is asked for (`[telemetry] otlp_endpoint`, or
the standard `OTEL_EXPORTER_OTLP_ENDPOINT` / `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`); only then is the
SDK imported. Spans go to a `BatchSpanProcessor`: a background thread batches and exports them over
OTLP (HTTP/protobuf or gRPC), so no call ever waits on the exporter. An exporter that is down loses
spans (the queue is bounded) with one warning a minute, never slowing or failing a call.

What is traced (docs/observability.md): each incoming HTTP request (a server span, its parent the
client's W3C `traceparent`), each call through the executor (a client's call and every inner call
of a composite: fan-out targets, router operations, workflow steps), the stages that made a call
wait (admission, approval), the router's decision with the rule that matched, and each backend call
(a client span whose context goes to the backend in `_meta` and, over HTTP, in headers).
"""

from __future__ import annotations

import asyncio
import logging
import os
import threading
import time
from collections.abc import Mapping, Sequence
from typing import Any

import mcp_types as types

from toolweave import tracing
from toolweave.config.models import Config, TelemetryConfig

logger = logging.getLogger("toolweave.telemetry")

WARN_EVERY = 60.0
"""Seconds between two warnings about spans the exporter could not deliver."""
PROTOCOLS = ("http/protobuf", "grpc")


def settings(config: TelemetryConfig, env: Mapping[str, str] | None = None) -> dict[str, Any] | None:
    """What to export where, from `[telemetry]` and the standard `OTEL_*` variables (the config wins);
    None when tracing is off."""
    env = os.environ if env is None else env
    if env.get("OTEL_SDK_DISABLED", "").lower() == "true" or env.get("OTEL_TRACES_EXPORTER") == "none":
        return None
    endpoint = config.otlp_endpoint or env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "")
    traces_endpoint = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "") if not config.otlp_endpoint else ""
    if not endpoint and not traces_endpoint:
        return None
    protocol = (
        config.otlp_protocol
        or env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
        or env.get("OTEL_EXPORTER_OTLP_PROTOCOL")
        or "http/protobuf"
    )
    if protocol not in PROTOCOLS:
        raise ValueError(f"OTLP protocol {protocol!r} is not supported: use {' or '.join(PROTOCOLS)}")
    if traces_endpoint:
        url = traces_endpoint
    elif protocol == "grpc":
        url = endpoint
    else:
        url = endpoint.rstrip("/") + "/v1/traces"
    ratio = config.sampling_ratio
    if ratio is None:
        ratio = _env_ratio(env)
    return {
        "url": url,
        "protocol": protocol,
        "headers": {**_env_headers(env), **config.headers},
        "ratio": ratio,
        "service": config.service_name or env.get("OTEL_SERVICE_NAME") or "toolweave",
    }


def _env_ratio(env: Mapping[str, str]) -> float:
    if env.get("OTEL_TRACES_SAMPLER", "") in ("traceidratio", "parentbased_traceidratio"):
        try:
            return min(1.0, max(0.0, float(env.get("OTEL_TRACES_SAMPLER_ARG", "1"))))
        except ValueError:
            return 1.0
    return 1.0


def _env_headers(env: Mapping[str, str]) -> dict[str, str]:
    raw = env.get("OTEL_EXPORTER_OTLP_TRACES_HEADERS") or env.get("OTEL_EXPORTER_OTLP_HEADERS") or ""
    found: dict[str, str] = {}
    for part in raw.split(","):
        name, sep, value = part.partition("=")
        if sep and name.strip():
            from urllib.parse import unquote

            found[name.strip()] = unquote(value.strip())
    return found


class _Guarded:
    """The exporter, with failures turned into one warning a minute (never an exception in the
    processor's thread, never a log line per batch)."""

    def __init__(self, exporter: Any, url: str) -> None:
        self._exporter = exporter
        self._url = url
        self._lock = threading.Lock()
        self._last_warning = 0.0
        self.dropped = 0

    def export(self, spans: Sequence[Any]) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        try:
            outcome = self._exporter.export(spans)
        except Exception as error:  # noqa: BLE001 - an exporter must never break tracing
            outcome, reason = SpanExportResult.FAILURE, f"{type(error).__name__}: {error}"
        else:
            reason = "the collector refused them or did not answer"
        if outcome != SpanExportResult.SUCCESS:
            self._dropped(len(spans), reason)
        return outcome

    def _dropped(self, count: int, reason: str) -> None:
        with self._lock:
            self.dropped += count
            now = time.monotonic()
            if now - self._last_warning < WARN_EVERY:
                return
            self._last_warning = now
            total = self.dropped
        logger.warning("traces: %d span(s) not delivered to %s so far: %s", total, self._url, reason)

    def shutdown(self) -> None:
        self._exporter.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return bool(self._exporter.force_flush(timeout_millis))


def _exporter(chosen: dict[str, Any]) -> Any:
    if chosen["protocol"] == "grpc":
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcExporter

        url: str = chosen["url"]
        insecure = url.startswith("http://") or "://" not in url
        return GrpcExporter(endpoint=url, insecure=insecure, headers=chosen["headers"] or None, timeout=5)
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter as HttpExporter

    return HttpExporter(endpoint=chosen["url"], headers=chosen["headers"] or None, timeout=5)


class Tracing:
    """One gateway's tracer provider, its exporter, and the spans the core asks for (`CallTracer`)."""

    def __init__(self, chosen: dict[str, Any], *, exporter: Any = None) -> None:
        try:
            from opentelemetry.sdk.resources import Resource
            from opentelemetry.sdk.trace import TracerProvider
            from opentelemetry.sdk.trace.export import BatchSpanProcessor
            from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased, TraceIdRatioBased
        except ImportError:
            raise RuntimeError(
                "tracing is configured ([telemetry] otlp_endpoint or OTEL_EXPORTER_OTLP_ENDPOINT) but the "
                "OpenTelemetry SDK is not installed: pip install 'toolweave[otel]'"
            ) from None
        from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

        from toolweave import __version__

        self.settings = chosen
        self.guarded = _Guarded(exporter if exporter is not None else _exporter(chosen), chosen["url"])
        resource = _hashed_once(
            Resource.create({"service.name": chosen["service"], "service.version": __version__})
        )
        ratio = chosen["ratio"]
        sampler = ParentBased(ALWAYS_ON if ratio >= 1.0 else TraceIdRatioBased(ratio))  # 1.0: no id check
        self.provider = TracerProvider(resource=resource, sampler=sampler)
        self.provider.add_span_processor(BatchSpanProcessor(self.guarded))  # type: ignore[arg-type]
        self.tracer = self.provider.get_tracer("toolweave", __version__)
        self.propagator = TraceContextTextMapPropagator()
        from opentelemetry import context, trace
        from opentelemetry.trace import Status, StatusCode

        self._trace = trace
        self._context = context
        self._current_context = context.get_current
        self._in_context = trace.set_span_in_context
        self._span_of = trace.get_current_span
        self._error = StatusCode.ERROR
        self._status = Status
        self._internal, self._server, self._client = (
            trace.SpanKind.INTERNAL,
            trace.SpanKind.SERVER,
            trace.SpanKind.CLIENT,
        )
        tracing.set_outgoing(self.outgoing)

    @classmethod
    def from_config(cls, config: Config) -> Tracing | None:
        chosen = settings(config.telemetry)
        return None if chosen is None else cls(chosen)

    # -- context in and out --------------------------------------------------------

    def extract(self, carrier: Mapping[str, str]) -> Any:
        """The context a client sent (`traceparent`, `tracestate`), for a server span's parent."""
        return self.propagator.extract(carrier)

    def outgoing(self) -> dict[str, str]:
        carrier: dict[str, str] = {}
        self.propagator.inject(carrier)
        return carrier

    # -- the core's CallTracer -------------------------------------------------------

    def call(self, entry: Any, session: Any, depth: int) -> _Current:
        """The call's span, current while it runs: a SERVER span for a client's call made without an
        HTTP request around it, else INTERNAL (under the request's span, or the composite's)."""
        attributes = {
            "mcp.method.name": "tools/call",
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": entry.name,
            "enduser.id": session.caller,
        }
        if session.tenant is not None:
            attributes["toolweave.tenant"] = session.tenant
        parent = self._current_context()  # read once: for the kind, the span's parent and its context
        kind = self._internal if depth or self._span_of(parent).is_recording() else self._server
        span = self.tracer.start_span(
            f"tools/call {entry.name}", context=parent, kind=kind, attributes=attributes
        )
        return _Current(self, span, parent)

    def backend(self, entry: Any) -> _Current:
        backend = entry.backend
        attributes = {
            "mcp.method.name": "tools/call",
            "gen_ai.tool.name": entry.backend_tool,
            "toolweave.backend": backend.name,
        }
        parent = self._current_context()
        span = self.tracer.start_span(
            f"tools/call {entry.backend_tool}", context=parent, kind=self._client, attributes=attributes
        )
        return _Current(self, span, parent)

    def waited(self, stage: str, entry: Any, started_ns: int) -> None:
        span = self.tracer.start_span(
            stage,
            start_time=started_ns,
            attributes={"toolweave.stage": stage, "gen_ai.tool.name": entry.name},
        )
        span.end()

    def run(self, record: Any) -> None:
        span = self._span_of()
        context = span.get_span_context()
        if not context.is_valid:
            return
        span.set_attribute("toolweave.run.id", record.id)
        record.state["trace_id"] = format(context.trace_id, "032x")

    # -- incoming HTTP ---------------------------------------------------------------

    @property
    def middleware_class(self) -> type[_ServerSpans]:
        """ASGI middleware (Starlette `Middleware(cls, tracing=self)`): a server span per HTTP request."""
        return _ServerSpans

    def close(self) -> None:
        """Export what is queued (bounded by the exporter's timeout), then stop."""
        if tracing._outgoing == self.outgoing:
            tracing.set_outgoing(None)
        self.provider.shutdown()


def _hashed_once(resource: Any) -> Any:
    """The same resource, its hash computed once.

    OpenTelemetry's OTLP encoder groups each exported span by its resource in a dict, so it hashes
    the resource once per span, and `Resource.__hash__` is a `json.dumps` of all its attributes
    (sorted) each time: 3.5 µs of the encoder's ~26 µs a span (`python -m bench.telemetry --parts`).
    A resource is immutable (its attributes are read-only), so its hash never changes; a resource
    made from it (`merge`, as the SDK does after a fork) is a plain one again."""
    from opentelemetry.sdk.resources import Resource

    class HashedOnce(Resource):
        def __init__(self, attributes: Any, schema_url: str | None = None) -> None:
            super().__init__(attributes, schema_url)
            self._hash = super().__hash__()

        def __hash__(self) -> int:
            return self._hash

    return HashedOnce(resource.attributes, resource.schema_url)


def current_trace_id() -> str | None:
    """The trace id of the current span, if tracing is on and a span is current."""
    if tracing._outgoing is None:
        return None
    from opentelemetry import trace

    context = trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else None


class _Current:
    """A span made current for a `with` block (what `start_as_current_span` does, without its
    generator): its result (`finish`) sets the status; an exception ends it as an error.

    `parent` is the context the span was started in (read once by the caller), so entering does not
    read the current context again; the router's decision is timed from the span's own start."""

    __slots__ = ("_parent", "_span", "_token", "_tracing")

    def __init__(self, owner: Tracing, span: Any, parent: Any) -> None:
        self._tracing = owner
        self._span = span
        self._parent = parent
        self._token: Any = None

    def __enter__(self) -> _Current:
        owner = self._tracing
        self._token = owner._context.attach(owner._in_context(self._span, self._parent))
        return self

    def __exit__(self, kind: Any, error: Any, _trace: Any) -> None:
        owner = self._tracing
        owner._context.detach(self._token)
        if error is not None and not isinstance(error, asyncio.CancelledError):
            self._span.set_status(owner._status(owner._error, f"{type(error).__name__}: {error}"[:300]))
        self._span.end()

    def finish(self, result: types.CallToolResult) -> None:
        span = self._span
        if result.is_error:
            owner = self._tracing
            message = next((c.text for c in result.content if isinstance(c, types.TextContent)), "isError")
            span.set_status(owner._status(owner._error, message[:300]))
            span.set_attribute("error.type", "tool_error")
        if not result.meta:
            return
        details = result.meta.get("toolweave")
        if not isinstance(details, Mapping):
            return
        if details.get("run_id"):
            span.set_attribute("toolweave.run.id", str(details["run_id"]))
        if details.get("kind") == "router" and details.get("operation"):
            self._router_decision(details)
        elif details.get("kind") == "fanout":
            targets = details.get("targets") or []
            span.set_attribute("toolweave.fanout.targets", len(targets))

    def _router_decision(self, details: Mapping[str, Any]) -> None:
        """The router's choice as a span of its own (its rule in `toolweave.router.reason`), a child
        of the router's span; timed from the router's start (the decision precedes its inner call)."""
        owner = self._tracing
        attributes = {
            "toolweave.router.operation": str(details.get("operation")),
            "toolweave.router.tool": str(details.get("tool") or ""),
            "toolweave.router.reason": str(details.get("reason") or ""),
        }
        self._span.set_attributes(attributes)
        context = owner._trace.set_span_in_context(self._span)
        started: int = self._span.start_time
        decision = owner.tracer.start_span(
            "router.decide", context=context, start_time=started, attributes=attributes
        )
        decision.end(end_time=started + 1000)


class _ServerSpans:
    """ASGI middleware: a server span for each HTTP request, its parent the client's `traceparent`.

    For `/mcp` the JSON-RPC method and tool name are read from the body (already bounded by the
    body limit), so the span says `tools/call NAME`; the body is replayed to the app unchanged.
    """

    def __init__(self, app: Any, tracing: Tracing) -> None:
        self.app = app
        self.tracing = tracing

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers") or []}
        parent = self.tracing.extract(headers)
        path: str = scope.get("path", "")
        method: str = scope.get("method", "GET")
        name, attributes = f"{method} {_route_of(scope)}", {"http.request.method": method, "url.path": path}
        if path.rstrip("/").endswith("/mcp") and method == "POST":
            body, receive = await _buffered(receive)
            rpc = _rpc_of(body)
            if rpc is not None:
                name, extra = rpc
                attributes.update(extra)
                meta_parent = extra.pop("_traceparent", None)
                if meta_parent is not None:
                    parent = self.tracing.extract(meta_parent)
        status = {"code": 0}

        async def sending(message: Any) -> None:
            if message["type"] == "http.response.start":
                status["code"] = message["status"]
            await send(message)

        # what `start_as_current_span` does, without its generator and `use_span`'s (~3 µs a request)
        tracing = self.tracing
        span = tracing.tracer.start_span(name, context=parent, kind=tracing._server, attributes=attributes)
        token = tracing._context.attach(tracing._in_context(span))
        try:
            await self.app(scope, receive, sending)
        except Exception as error:
            span.record_exception(error)
            span.set_status(tracing._status(tracing._error, f"{type(error).__name__}: {error}"))
            raise
        else:
            span.set_attribute("http.response.status_code", status["code"])
            if status["code"] >= 500:
                span.set_status(tracing._status(tracing._error))
        finally:
            tracing._context.detach(token)
            span.end()


def _route_of(scope: Any) -> str:
    path: str = scope.get("path", "")
    return path if len(path) <= 120 else path[:120]


async def _buffered(receive: Any) -> tuple[bytes, Any]:
    chunks: list[bytes] = []
    more = True
    messages: list[Any] = []
    while more:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            break
        chunks.append(message.get("body", b""))
        more = message.get("more_body", False)
    pending = list(messages)

    async def replay() -> Any:
        if pending:
            return pending.pop(0)
        return await receive()

    return b"".join(chunks), replay


def _rpc_of(body: bytes) -> tuple[str, dict[str, Any]] | None:
    import orjson

    try:
        message = orjson.loads(body)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(message, dict) or not isinstance(message.get("method"), str):
        return None
    method = message["method"]
    attributes: dict[str, Any] = {"mcp.method.name": method, "jsonrpc.protocol.version": "2.0"}
    if message.get("id") is not None:
        attributes["jsonrpc.request.id"] = str(message["id"])
    params = message.get("params")
    name = method
    if isinstance(params, dict):
        tool = params.get("name")
        if method == "tools/call" and isinstance(tool, str):
            attributes["gen_ai.tool.name"] = tool[:200]
            name = f"{method} {tool[:200]}"
        meta = params.get("_meta")
        if isinstance(meta, dict) and isinstance(meta.get("traceparent"), str):
            carrier = {"traceparent": meta["traceparent"]}
            if isinstance(meta.get("tracestate"), str):
                carrier["tracestate"] = meta["tracestate"]
            attributes["_traceparent"] = carrier
    return name, attributes
