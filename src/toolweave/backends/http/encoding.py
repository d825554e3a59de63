"""Tool arguments → an HTTP request, by OpenAPI's serialisation rules (`style` / `explode`).

| location | styles | array `[a, b]` (explode / not) | object `{k: v}` (explode / not) |
| --- | --- | --- | --- |
| path | simple | `a,b` | `k=v` / `k,v` |
| path | label | `.a.b` / `.a,b` | `.k=v` / `.k,v` |
| path | matrix | `;n=a;n=b` / `;n=a,b` | `;k=v` / `;n=k,v` |
| query | form | `n=a&n=b` / `n=a,b` | `k=v` / `n=k,v` |
| query | spaceDelimited, pipeDelimited | `n=a%20b`, `n=a\\|b` | — |
| query | deepObject | — | `n[k]=v` |
| header | simple | `a,b` | `k=v` / `k,v` |
| cookie | form | `n=a,b` | `n=k,v` |

Values are percent-encoded (RFC 3986 unreserved characters stay), so an argument
can never add a path segment, a query parameter or a header line of its own.
Dots are unreserved, so a path argument of `.` or `..` (or an empty one) would
make a segment that HTTP clients, proxies and servers resolve away
(`/projects/{p}/members/{m}` with `m=".."` is `/projects/p`): such a
segment is refused before anything is sent.
Arguments that are absent or null are not sent. Form bodies send arrays as
repeated fields and nested objects as `name[key]=value`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote

import orjson

from toolweave.backends.errors import ArgumentError
from toolweave.backends.openapi.spec import BodySpec, OperationSpec, ParamSpec

_RESERVED = ":/?#[]@!$&'()*+,;="


@dataclass(slots=True)
class RequestParts:
    """Everything but the base URL and the credentials, which the caller adds."""

    path: str
    query: list[tuple[str, str]] = field(default_factory=list)
    """Already percent-encoded `(name, value)` pairs."""
    headers: dict[str, str] = field(default_factory=dict)
    cookies: list[tuple[str, str]] = field(default_factory=list)
    content: bytes | None = None
    files: list[tuple[str, tuple[None, str]]] | None = None
    """Multipart fields (no file uploads: `(None, value)` parts)."""

    def query_string(self) -> str:
        return "&".join(f"{name}={value}" for name, value in self.query)


def build_request(spec: OperationSpec, arguments: Mapping[str, Any]) -> RequestParts:
    """Raise `ArgumentError` when an argument cannot be serialised where it goes."""
    path = spec.path
    parts = RequestParts(path=path, query=list(spec.fixed_query))
    for param in spec.params:
        value = arguments.get(param.prop)
        if param.location == "path":
            if value is None:
                raise ArgumentError(f"missing required path argument {param.prop!r}")
            parts.path = parts.path.replace("{" + param.name + "}", _path_value(param, value))
            _check_segments(spec.path, parts.path, param.prop)
        elif value is None:
            continue
        elif param.location == "query":
            parts.query.extend(_query_pairs(param, value))
        elif param.location == "header":
            parts.headers[param.name] = _header_value(param, value)
        else:
            parts.cookies.append((param.name, _cookie_value(param, value)))
    for name, template in spec.headers:
        parts.headers[name] = _checked_header(name, fill_template(template, arguments, encode=False))
    if spec.body is not None:
        _body(parts, spec.body, arguments)
    return parts


_DOT_SEGMENTS = frozenset({"", ".", ".."})


def _check_segments(template: str, path: str, prop: str) -> None:
    """Refuse a path whose argument made a segment that normalises away (`.`, `..`, empty; also
    percent-encoded as `%2e`, which servers decode before resolving). Segments the operator wrote
    stay as written; with `allowReserved` an argument may add segments, and each of those is checked."""
    written = template.split("/")
    segments = path.split("/")
    same_shape = len(segments) == len(written)
    for index, segment in enumerate(segments):
        if index == 0 or (same_shape and written[index] == segment):
            continue
        if unquote(segment) in _DOT_SEGMENTS:
            raise ArgumentError(
                f"path argument {prop!r} would make the path segment {segment!r}, which HTTP resolves "
                "away (., .. or empty); it is refused, never sent"
            )


def fill_template(template: str, arguments: Mapping[str, Any], *, encode: bool = True) -> str:
    """`{name}` → the argument, percent-encoded as one path segment (declared actions' URLs and headers)."""
    out: list[str] = []
    rest = template
    while "{" in rest:
        head, _, tail = rest.partition("{")
        name, _, rest = tail.partition("}")
        out.append(head)
        value = arguments.get(name)
        if value is None:
            raise ArgumentError(f"missing argument {name!r} (used in the URL template)")
        text = _scalar(value) if not isinstance(value, list | dict) else _json(value)
        out.append(quote(text, safe="") if encode else text)
    out.append(rest)
    return "".join(out)


# -- values ------------------------------------------------------------------------


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return value
    if isinstance(value, int | float):
        return _json(value)
    if isinstance(value, list | dict):
        return _json(value)
    return str(value)


def _json(value: Any) -> str:
    return orjson.dumps(value).decode()


def _enc(value: Any, param: ParamSpec | None = None) -> str:
    safe = _RESERVED if param is not None and param.allow_reserved else ""
    return quote(_scalar(value), safe=safe)


def _items(param: ParamSpec, value: Any) -> list[Any] | dict[str, Any] | None:
    """The value as a list or dict when the parameter's shape says so (a lone value counts as one item)."""
    if param.json:
        return None
    if param.shape == "array":
        return value if isinstance(value, list) else [value]
    if param.shape == "object" and isinstance(value, dict):
        return value
    return None


def _path_value(param: ParamSpec, value: Any) -> str:
    items = _items(param, value)
    style, explode, name = param.style, param.explode, quote(param.name, safe="")
    if isinstance(items, list):
        parts = [_enc(v, param) for v in items]
        if style == "label":
            return "." + ("." if explode else ",").join(parts)
        if style == "matrix":
            return "".join(f";{name}={v}" for v in parts) if explode else f";{name}=" + ",".join(parts)
        return ",".join(parts)
    if isinstance(items, dict):
        pairs = [(quote(str(k), safe=""), _enc(v, param)) for k, v in items.items()]
        if style == "label":
            return "." + (
                ".".join(f"{k}={v}" for k, v in pairs) if explode else ",".join(f"{k},{v}" for k, v in pairs)
            )
        if style == "matrix":
            if explode:
                return "".join(f";{k}={v}" for k, v in pairs)
            return f";{name}=" + ",".join(f"{k},{v}" for k, v in pairs)
        return ",".join(f"{k}={v}" if explode else f"{k},{v}" for k, v in pairs)
    encoded = _json_or_enc(param, value)
    if style == "label":
        return "." + encoded
    if style == "matrix":
        return f";{name}={encoded}"
    return encoded


def _json_or_enc(param: ParamSpec, value: Any) -> str:
    return quote(_json(value), safe="") if param.json else _enc(value, param)


def _query_pairs(param: ParamSpec, value: Any) -> list[tuple[str, str]]:
    name = quote(param.name, safe="[]")
    items = _items(param, value)
    if isinstance(items, list):
        encoded = [_enc(v, param) for v in items]
        if param.style == "form" and param.explode and param.delimiter is None:
            return [(name, v) for v in encoded]
        delimiter = {"spaceDelimited": "%20", "pipeDelimited": "|"}.get(param.style, ",")
        if param.delimiter == "\t":
            delimiter = "%09"
        return [(name, delimiter.join(encoded))]
    if isinstance(items, dict):
        if param.style == "deepObject":
            return [(f"{name}[{quote(str(k), safe='')}]", _enc(v, param)) for k, v in items.items()]
        if param.explode:
            return [(quote(str(k), safe=""), _enc(v, param)) for k, v in items.items()]
        return [(name, ",".join(f"{quote(str(k), safe='')},{_enc(v, param)}" for k, v in items.items()))]
    return [(name, _json_or_enc(param, value))]


def _header_value(param: ParamSpec, value: Any) -> str:
    items = _items(param, value)
    if isinstance(items, list):
        text = ",".join(_scalar(v) for v in items)
    elif isinstance(items, dict):
        text = ",".join(
            f"{k}={_scalar(v)}" if param.explode else f"{k},{_scalar(v)}" for k, v in items.items()
        )
    else:
        text = _json(value) if param.json else _scalar(value)
    return _checked_header(param.prop, text)


def _checked_header(name: str, text: str) -> str:
    if any(ch in text for ch in "\r\n\0"):
        raise ArgumentError(f"argument {name!r} contains a line break, which cannot go in an HTTP header")
    return text


def _cookie_value(param: ParamSpec, value: Any) -> str:
    items = _items(param, value)
    if isinstance(items, list):
        text = ",".join(_enc(v) for v in items)
    elif isinstance(items, dict):
        text = ",".join(f"{_enc(k)},{_enc(v)}" for k, v in items.items())
    else:
        text = _json_or_enc(param, value)
    return text


# -- bodies ------------------------------------------------------------------------


def _body(parts: RequestParts, body: BodySpec, arguments: Mapping[str, Any]) -> None:
    if body.prop is not None:
        value = arguments.get(body.prop)
        if value is None:
            return
        if body.kind == "text":
            parts.content = _scalar(value).encode()
            parts.headers["Content-Type"] = "text/plain; charset=utf-8"
            return
        fields: dict[str, Any] | Any = value
    else:
        # an explicit null is sent (a nullable field); an absent argument is not
        fields = {body.fields[prop]: arguments[prop] for prop in body.fields if prop in arguments}
        if not fields and not body.required:
            return
    if body.kind == "json":
        parts.content = orjson.dumps(fields)
        parts.headers["Content-Type"] = body.media_type if "json" in body.media_type else "application/json"
    elif body.kind == "form":
        pairs = _form_pairs(fields if isinstance(fields, dict) else {"body": fields})
        parts.content = "&".join(f"{quote(k, safe='[]')}={quote(v, safe='')}" for k, v in pairs).encode()
        parts.headers["Content-Type"] = "application/x-www-form-urlencoded"
    else:  # multipart: plain fields only (operations with required file fields are skipped at conversion)
        pairs = _form_pairs(fields if isinstance(fields, dict) else {"body": fields})
        parts.files = [(k, (None, v)) for k, v in pairs]


def _form_pairs(fields: Mapping[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    pairs: list[tuple[str, str]] = []
    for key, value in fields.items():
        name = f"{prefix}[{key}]" if prefix else str(key)
        if value is None:
            continue
        if isinstance(value, dict):
            pairs.extend(_form_pairs(value, name))
        elif isinstance(value, list):
            pairs.extend((name, _scalar(item)) for item in value if item is not None)
        else:
            pairs.append((name, _scalar(value)))
    return pairs
