"""The lean OTLP encoder (`toolweave.telemetry.otlp`) writes what OpenTelemetry's own encoder writes:
both outputs decoded with the official `opentelemetry-proto` classes compare equal, for spans with
every kind of attribute value, events, links, a remote parent, statuses and trace state."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk", reason="the otel extra: pip install 'toolweave[otel]'")

from opentelemetry import trace
from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.sdk.resources import Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.trace import Link, SpanContext, SpanKind, Status, StatusCode, TraceFlags, TraceState

from toolweave.telemetry.otlp import Unsupported, encode


class Kept(SpanExporter):
    def __init__(self) -> None:
        self.spans: list[Any] = []

    def export(self, spans: Any) -> SpanExportResult:
        self.spans.extend(spans)
        return SpanExportResult.SUCCESS


def made_spans() -> list[Any]:
    kept = Kept()
    provider = TracerProvider(resource=Resource.create({"service.name": "tw", "service.version": "1"}))
    provider.add_span_processor(SimpleSpanProcessor(kept))
    tracer = provider.get_tracer("toolweave", "0.1")
    other = provider.get_tracer("other")
    remote = SpanContext(
        0x4BF92F3577B34DA6A3CE929D0E0E4736,
        0x00F067AA0BA902B7,
        is_remote=True,
        trace_flags=TraceFlags(1),
        trace_state=TraceState([("vendor", "x1")]),
    )
    with tracer.start_as_current_span(
        "POST /mcp", context=trace.set_span_in_context(trace.NonRecordingSpan(remote)), kind=SpanKind.SERVER
    ) as request:
        request.set_attributes(
            {
                "s": "text é",
                "empty": "",
                "yes": True,
                "no": False,
                "n": 42,
                "negative": -7,
                "big": 2**62,
                "f": 0.25,
                "strings": ["a", "b"],
                "ints": [1, -2],
                "floats": [1.5],
                "bools": [True, False],
            }
        )
        request.add_event("retry", {"attempt": 2}, timestamp=123)
        with tracer.start_as_current_span(
            "inner", kind=SpanKind.CLIENT, links=[Link(remote, {"why": "x"})]
        ) as inner:
            inner.set_status(Status(StatusCode.ERROR, "it broke"))
            inner.set_attributes({"yes": 1, "no": 0, "f": 1})  # equal to True, False, 1.0: cached apart
        with other.start_as_current_span("ok") as fine:
            fine.set_status(Status(StatusCode.OK))
    try:
        with tracer.start_as_current_span("raises"):
            raise ValueError("boom")
    except ValueError:
        pass
    provider.shutdown()
    return kept.spans


def decoded(data: bytes) -> trace_service_pb2.ExportTraceServiceRequest:
    request = trace_service_pb2.ExportTraceServiceRequest()
    request.ParseFromString(data)
    return request


def test_the_lean_encoding_decodes_as_the_official_one() -> None:
    spans = made_spans()
    assert len(spans) == 4
    ours, theirs = decoded(encode(spans)), decoded(encode_spans(spans).SerializeToString())
    assert ours == theirs, f"{ours}\n---\n{theirs}"


def test_a_value_it_does_not_write_is_refused_not_mangled() -> None:
    span = made_spans()[0]

    class Odd:
        def __getattr__(self, name: str) -> Any:
            return {"attributes": {"raw": b"\x00"}}.get(name, getattr(span, name))

    with pytest.raises(Unsupported):
        encode([Odd()])
