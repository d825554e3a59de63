"""An HTTP response → a `CallToolResult` an agent can act on.

- 2xx JSON: `structuredContent` (an object as is; an array or a scalar as
  `{"result": value}`) plus the JSON as text. When the tool advertises an
  `outputSchema`, the body must match it, or the result is an error saying
  where it does not (MCP clients reject structured content that does not
  match, so passing it on would fail later and less clearly).
- 2xx text (`text/*`, XML, ...): the text. Images and audio: image/audio
  content. Anything else binary: an embedded resource with a base64 blob.
- Anything else: `isError` with the status, its reason and a bounded excerpt of
  the body, with any credential value the API echoed scrubbed out.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

import mcp_types as types
import orjson
from jsonschema.protocols import Validator

from toolweave.backends.openapi.spec import OperationSpec
from toolweave.results import error_result, json_text, text

MAX_EXCERPT = 2000
_TEXTUAL = (
    "text/",
    "application/xml",
    "application/javascript",
    "application/x-www-form-urlencoded",
    "application/yaml",
)
_STATUS_HINTS = {
    400: "the API rejected the arguments; check them against the tool's input schema",
    401: "the API did not accept the credentials; check the backend's auth or the tenant's connection",
    403: "the credentials are valid but not allowed to do this",
    404: "nothing at that address; check the identifiers in the arguments",
    409: "the request conflicts with the current state of the resource",
    422: "the API could not process the arguments",
    429: "rate limited; wait before calling again",
}


def scrub(message: str, secrets: Sequence[str]) -> str:
    for secret in secrets:
        if secret:
            message = message.replace(secret, "[redacted]")
    return message


def excerpt(body: bytes, secrets: Sequence[str], limit: int = MAX_EXCERPT) -> str:
    shown = body[: limit * 4].decode("utf-8", "replace")
    shown = scrub(shown, secrets)
    if len(shown) > limit or len(body) > limit * 4:
        return shown[:limit] + f"… ({len(body)} bytes in all)"
    return shown


def media_type(content_type: str | None) -> str:
    return (content_type or "").split(";")[0].strip().lower()


def is_json_media(media: str) -> bool:
    return media == "application/json" or media.endswith("+json") or media == "text/json"


def charset(content_type: str | None) -> str:
    for part in (content_type or "").split(";")[1:]:
        key, _, value = part.strip().partition("=")
        if key.lower() == "charset" and value:
            return value.strip('"')
    return "utf-8"


def error_response(
    spec: OperationSpec, status: int, reason: str, body: bytes, secrets: Sequence[str], extra: str = ""
) -> types.CallToolResult:
    hint = _STATUS_HINTS.get(
        status, "the API reported a server error; it may work again later" if status >= 500 else ""
    )
    lines = [f"{spec.label} failed: HTTP {status} {reason}".rstrip() + (f" ({hint})" if hint else "")]
    if extra:
        lines.append(extra)
    if body:
        lines.append("Response body: " + excerpt(body, secrets))
    return error_result("\n".join(lines), meta={"http_status": status})


def success_response(
    spec: OperationSpec,
    status: int,
    content_type: str | None,
    body: bytes,
    uri: str,
    validator: Validator | None,
    secrets: Sequence[str],
) -> types.CallToolResult:
    media = media_type(content_type)
    declared_json = spec.output_schema is not None
    if not body:
        if declared_json:
            return _not_declared(spec, status, "an empty body", body, secrets)
        return types.CallToolResult(content=[text(f"HTTP {status}: done (the API returned no body)")])
    if is_json_media(media) or (declared_json and not media):
        return _json_response(spec, status, body, validator, secrets)
    if declared_json:
        return _not_declared(spec, status, f"a {media or 'untyped'} body", body, secrets)
    if media.startswith(_TEXTUAL) or media.endswith(("+xml", "+yaml")):
        return types.CallToolResult(content=[text(body.decode(charset(content_type), "replace"))])
    encoded = base64.b64encode(body).decode()
    if media.startswith("image/"):
        return types.CallToolResult(content=[types.ImageContent(type="image", data=encoded, mime_type=media)])
    if media.startswith("audio/"):
        return types.CallToolResult(content=[types.AudioContent(type="audio", data=encoded, mime_type=media)])
    resource = types.BlobResourceContents(
        uri=uri, mime_type=media or "application/octet-stream", blob=encoded
    )
    return types.CallToolResult(content=[types.EmbeddedResource(type="resource", resource=resource)])


def _json_response(
    spec: OperationSpec, status: int, body: bytes, validator: Validator | None, secrets: Sequence[str]
) -> types.CallToolResult:
    try:
        value = orjson.loads(body)
    except orjson.JSONDecodeError as error:
        return _not_declared(spec, status, f"a body that is not valid JSON ({error.msg})", body, secrets)
    if validator is not None:
        problem = _first_problem(validator, value)
        if problem is not None:
            return _not_declared(spec, status, f"JSON that does not match it ({problem})", body, secrets)
    structured = value if isinstance(value, dict) else {"result": value}
    shown = body.decode("utf-8", "replace") if isinstance(value, dict | list) else json_text(value)
    return types.CallToolResult(content=[text(shown)], structured_content=structured)


def _first_problem(validator: Validator, value: Any) -> str | None:
    from jsonschema.exceptions import best_match

    error = best_match(validator.iter_errors(value))
    if error is None:
        return None
    where = "/".join(str(part) for part in error.absolute_path) or "(root)"
    return f"at {where}: {error.message[:300]}"


def _not_declared(
    spec: OperationSpec, status: int, what: str, body: bytes, secrets: Sequence[str]
) -> types.CallToolResult:
    message = (
        f"{spec.label} declares a JSON object response but answered HTTP {status} with {what}. "
        "The API and its description disagree; set output_schema = false on the backend to pass such "
        "responses through as they are."
    )
    if body:
        message += "\nResponse body: " + excerpt(body, secrets)
    return error_result(message, meta={"http_status": status})
