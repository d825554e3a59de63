"""Declared HTTP actions (`[[backends.actions]]`) → the same `OperationSpec`s an OpenAPI document gives.

`url = "/v1/forecast/{city}"`: each `{name}` is a path argument (one
percent-encoded segment). The other arguments go to the query string (GET,
HEAD, DELETE, OPTIONS, or the names listed in `query`) or to a JSON body
(POST, PUT, PATCH; `body = "form"` for a form, `"none"` for no body).
"""

from __future__ import annotations

from typing import Any

from toolweave.backends.openapi.spec import BodySpec, Location, OperationSpec, ParamSpec, ValueShape
from toolweave.config.http_api import PLACEHOLDER_RE, HttpAction
from toolweave.schemas.read import properties_of

_QUERY_METHODS = ("GET", "HEAD", "DELETE", "OPTIONS", "TRACE")
_ANNOTATIONS = {
    "GET": {"readOnlyHint": True},
    "HEAD": {"readOnlyHint": True},
    "OPTIONS": {"readOnlyHint": True},
    "TRACE": {"readOnlyHint": True},
    "DELETE": {"destructiveHint": True, "idempotentHint": True},
    "PUT": {"idempotentHint": True},
}


def action_spec(action: HttpAction, base_url: str) -> OperationSpec:
    """`base_url` is the backend's `http`; an absolute action URL must lie under it."""
    path = action.url
    if path.startswith(("http://", "https://")):
        if not (path == base_url or path.startswith(base_url.rstrip("/") + "/")):
            raise ValueError(f"action {action.name!r}: url must lie under the backend's base URL {base_url}")
        path = path[len(base_url.rstrip("/")) :] or "/"
    path, _, fixed_query = path.partition("?")
    placeholders = PLACEHOLDER_RE.findall(path)
    fixed_pairs = [pair.split("=", 1) for pair in fixed_query.split("&") if pair]
    schema = action.input_schema or _default_schema(action)
    properties = properties_of(schema)
    header_args = {name for template in action.headers.values() for name in PLACEHOLDER_RE.findall(template)}
    query_args = {name for name in PLACEHOLDER_RE.findall(fixed_query)}
    params: list[ParamSpec] = [_param(name, "path", properties) for name in placeholders]
    params.extend(_fixed_query(fixed_pairs))
    rest = [
        name
        for name in properties
        if name not in placeholders and name not in header_args and name not in query_args
    ]
    query_names = (
        action.query if action.query is not None else (rest if action.method in _QUERY_METHODS else [])
    )
    params.extend(_param(name, "query", properties) for name in query_names)
    body_kind = action.body or ("json" if action.method in ("POST", "PUT", "PATCH") else "none")
    body_fields = [name for name in rest if name not in query_names]
    body = None
    if body_kind != "none" and body_fields:
        body = BodySpec(
            kind=body_kind,
            media_type="application/json" if body_kind == "json" else "application/x-www-form-urlencoded",
            fields={name: name for name in body_fields},
            required=False,
        )
    headers = tuple(action.headers.items())
    return OperationSpec(
        tool=action.name,
        method=action.method,
        path=path,
        description=action.description,
        input_schema=schema,
        params=tuple(params),
        body=body,
        output_schema=action.output_schema if _is_object(action.output_schema) else None,
        annotations=_annotations(action),
        needs_auth=True,
        operation_id=action.name,
        pointer=f"/actions/{action.name}",
        headers=headers,
        fixed_query=tuple(
            (p[0], p[1] if len(p) > 1 else "")
            for p in fixed_pairs
            if not (len(p) == 2 and PLACEHOLDER_RE.fullmatch(p[1]))
        ),
    )


def _default_schema(action: HttpAction) -> dict[str, Any]:
    names = list(dict.fromkeys(PLACEHOLDER_RE.findall(action.url)))
    names += [
        n for template in action.headers.values() for n in PLACEHOLDER_RE.findall(template) if n not in names
    ]
    return {
        "type": "object",
        "properties": {name: {"type": "string"} for name in names},
        "required": names,
        "additionalProperties": False,
    }


def _param(name: str, location: Location, properties: dict[str, Any]) -> ParamSpec:
    kind = properties.get(name, {}).get("type")
    shape: ValueShape = "array" if kind == "array" else "object" if kind == "object" else "primitive"
    style = "simple" if location == "path" else "form"
    return ParamSpec(
        prop=name, name=name, location=location, style=style, explode=style == "form", shape=shape
    )


def _fixed_query(pairs: list[list[str]]) -> list[ParamSpec]:
    """`?units=metric&q={city}` in the URL: `{city}` becomes a query argument named by its key."""
    out: list[ParamSpec] = []
    for pair in pairs:
        if len(pair) == 2:
            found = PLACEHOLDER_RE.fullmatch(pair[1])
            if found:
                out.append(
                    ParamSpec(prop=found.group(1), name=pair[0], location="query", style="form", explode=True)
                )
    return out


def _annotations(action: HttpAction) -> dict[str, Any]:
    annotations: dict[str, Any] = {**_ANNOTATIONS.get(action.method, {}), "openWorldHint": True}
    for key, value in (
        ("readOnlyHint", action.read_only),
        ("destructiveHint", action.destructive),
        ("idempotentHint", action.idempotent),
    ):
        if value is not None:
            annotations[key] = value
    return annotations


def _is_object(schema: Any) -> bool:
    return isinstance(schema, dict) and schema.get("type") == "object"
