"""OTLP/HTTP export with a lean protobuf encoder: the official encoder's cost, cut to a third.

OpenTelemetry's own OTLP encoder builds a protobuf object per span, attribute and value, and
hashes the span's `Resource` (a JSON dump of its attributes) for every span to group them:
about 35 µs of CPU per span here, more than making the span (bench/telemetry.py,
docs/observability.md). This module writes the same bytes directly (the wire format of
`opentelemetry/proto/collector/trace/v1/trace_service.proto`), grouping spans by the identity
of their resource and scope, so the export thread takes a fraction of the CPU the calls share.

It encodes what the gateway's spans hold: attributes of strings, booleans, integers, floats and
sequences of those, events, links, status, flags. A batch holding anything else (a mapping, bytes)
is handed to the official encoder instead, so nothing is ever lost to this shortcut.
Tests decode its output with the official `opentelemetry-proto` classes (tests/server/test_tracing.py).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Any

_PACK_DOUBLE = struct.Struct("<d").pack
_PACK_FIXED64 = struct.Struct("<Q").pack
_PACK_FIXED32 = struct.Struct("<I").pack


class Unsupported(Exception):
    """A value this encoder does not write (the official encoder takes the batch)."""


def _varint(value: int) -> bytes:
    if value < 0:
        value += 1 << 64
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    """A length-delimited field (wire type 2)."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def _text(number: int, value: str) -> bytes:
    return _field(number, value.encode()) if value else b""


def _any_value(value: Any) -> bytes:
    if isinstance(value, str):
        return _field(1, value.encode())
    if isinstance(value, bool):
        return b"\x10" + (b"\x01" if value else b"\x00")
    if isinstance(value, int):
        return b"\x18" + _varint(value)
    if isinstance(value, float):
        return b"\x21" + _PACK_DOUBLE(value)
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        return _field(5, b"".join(_field(1, _any_value(item)) for item in value))
    raise Unsupported(type(value).__name__)


_KEY_VALUES: dict[tuple[int, str, type, Any], bytes] = {}
"""Encoded attributes by (field, key, type, value): the same few repeat on every span (a method, a
tool's name, a backend); bounded by `_KEY_VALUES_MAX` (cleared when full)."""
_KEY_VALUES_MAX = 4096
_SCALARS = (str, bool, int, float)


def _key_value(number: int, key: str, value: Any) -> bytes:
    kind = type(value)
    if kind not in _SCALARS:
        return _field(number, _field(1, key.encode()) + _field(2, _any_value(value)))
    cache_key = (number, key, kind, value)  # the type too: True and 1 are equal keys otherwise
    found = _KEY_VALUES.get(cache_key)
    if found is None:
        if len(_KEY_VALUES) >= _KEY_VALUES_MAX:
            _KEY_VALUES.clear()
        found = _KEY_VALUES[cache_key] = _field(
            number, _field(1, key.encode()) + _field(2, _any_value(value))
        )
    return found


def _attributes(number: int, attributes: Mapping[str, Any] | None) -> bytes:
    if not attributes:
        return b""
    return b"".join([_key_value(number, key, value) for key, value in attributes.items()])


def _dropped(number: int, count: int) -> bytes:
    return _varint(number << 3) + _varint(count) if count else b""


def _span(span: Any) -> bytes:
    context = span.context
    parent = span.parent
    flags = 0x100  # HAS_IS_REMOTE, as OpenTelemetry's encoder writes them (no trace flags)
    parts = [
        b"\x0a\x10" + context.trace_id.to_bytes(16, "big"),
        b"\x12\x08" + context.span_id.to_bytes(8, "big"),
    ]
    state = context.trace_state.to_header() if context.trace_state else ""
    if state:
        parts.append(_text(3, state))
    if parent is not None:
        parts.append(b"\x22\x08" + parent.span_id.to_bytes(8, "big"))
        if parent.is_remote:
            flags |= 0x200
    parts += [
        _text(5, span.name),
        b"\x30" + _varint(span.kind.value + 1),  # the SDK's kinds start at 0, OTLP's at 1 (INTERNAL)
        b"\x39" + _PACK_FIXED64(span.start_time or 0),
        b"\x41" + _PACK_FIXED64(span.end_time or 0),
        _attributes(9, span.attributes),
        _dropped(10, span.dropped_attributes),
    ]
    for event in span.events:
        body = (
            b"\x09" + _PACK_FIXED64(event.timestamp) + _text(2, event.name) + _attributes(3, event.attributes)
        )
        parts.append(_field(11, body))
    parts.append(_dropped(12, span.dropped_events))
    for link in span.links:
        linked = link.context
        body = (
            b"\x0a\x10"
            + linked.trace_id.to_bytes(16, "big")
            + b"\x12\x08"
            + linked.span_id.to_bytes(8, "big")
            + _attributes(4, link.attributes)
            + b"\x35"  # field 6, fixed32: the link's flags
            + _PACK_FIXED32(0x300 if linked.is_remote else 0x100)
        )
        parts.append(_field(13, body))
    parts.append(_dropped(14, span.dropped_links))
    status = span.status
    code = status.status_code.value if status is not None else 0
    body = _text(2, (status.description or "") if status is not None else "")
    parts.append(_field(15, body + (b"\x18" + _varint(code) if code else b"")))  # present even when unset
    parts.append(b"\x85\x01" + _PACK_FIXED32(flags))  # field 16, fixed32
    return b"".join(parts)


def _scope(scope: Any) -> bytes:
    if scope is None:
        return b""
    return _text(1, scope.name) + _text(2, scope.version or "")


def encode(spans: Sequence[Any]) -> bytes:
    """An `ExportTraceServiceRequest` of `spans`, serialized; `Unsupported` for a value it does not write."""
    resources: dict[int, tuple[Any, dict[int, tuple[Any, list[bytes]]]]] = {}
    for span in spans:
        resource = span.resource
        scope = span.instrumentation_scope
        scopes = resources.setdefault(id(resource), (resource, {}))[1]
        scopes.setdefault(id(scope), (scope, []))[1].append(_field(2, _span(span)))
    out = []
    for resource, scopes in resources.values():
        body = _field(1, _attributes(1, resource.attributes)) if resource is not None else b""
        for scope, encoded in scopes.values():
            body += _field(2, _field(1, _scope(scope)) + b"".join(encoded))
        if resource is not None and resource.schema_url:
            body += _text(3, resource.schema_url)
        out.append(_field(1, body))
    return b"".join(out)


class LeanHttpExporter:
    """OTLP/HTTP (protobuf) to `url`: posts `encode`'s bytes on a kept-alive connection; a batch the
    lean encoder cannot write goes through OpenTelemetry's own encoder."""

    def __init__(self, url: str, headers: Mapping[str, str] | None, timeout: float = 5.0) -> None:
        import requests

        self._url = url
        self._timeout = timeout
        self._session = requests.Session()
        self._session.headers.update({**(headers or {}), "Content-Type": "application/x-protobuf"})

    def export(self, spans: Sequence[Any]) -> Any:
        from opentelemetry.sdk.trace.export import SpanExportResult

        try:
            data = encode(spans)
        except Unsupported:
            from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

            data = encode_spans(spans).SerializePartialToString()
        answer = self._session.post(self._url, data=data, timeout=self._timeout)
        ok = 200 <= answer.status_code < 300
        return SpanExportResult.SUCCESS if ok else SpanExportResult.FAILURE

    def shutdown(self) -> None:
        self._session.close()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return True
