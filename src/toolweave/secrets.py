"""Secrets: what is secret, how it is redacted, and the one marker that replaces it.

A tool parameter is secret when its schema says `writeOnly: true` or
`format: password`. Its value never appears in a run record (replaced by
`REDACTED`), an error message (`redact_text`), an approval prompt or an
export (`toolweave.export.schema` drops its example values). A log field is
secret when its *name* says so (`is_secret_name`: authorization, token,
password, api key...): its value is redacted whatever it is. Connection
secrets (a tenant's stored headers) are never logged at all; there is no
process-wide list of values to scrub, so no tenant's input changes anyone's
log lines, and a log line costs the same however many secrets are stored.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from contextvars import ContextVar
from typing import Any

REDACTED = "[redacted]"
"""What stands in for a secret value, everywhere."""
SECRET_NAME_RE = re.compile(
    r"authorization|cookie|passw(or)?d|secret|token|api[-_]?key|credential|private[-_]?key|signature",
    re.IGNORECASE,
)
"""Field and header names whose values are secrets, wherever they appear (log fields)."""
MAX_REDACT_DEPTH = 6
"""Nested values deeper than this are replaced whole: redacting a log field has a bounded cost."""
MIN_TEXT_LENGTH = 3
"""Shorter argument values are not redacted from messages (a `1` would hit every number)."""


def is_secret_schema(schema: Any) -> bool:
    """A property marked `writeOnly: true` or `format: password` holds a secret."""
    return isinstance(schema, Mapping) and (
        schema.get("writeOnly") is True or schema.get("format") == "password"
    )


def secret_fields(schema: Mapping[str, Any] | None) -> frozenset[str]:
    """Top-level properties of an input schema that hold secrets."""
    properties = (schema or {}).get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(properties, Mapping):
        return frozenset()
    return frozenset(name for name, prop in properties.items() if is_secret_schema(prop))


DERIVED_SECRETS: ContextVar[frozenset[str]] = ContextVar("toolweave_derived_secrets", default=frozenset())
"""Argument fields of the inner call being made that were computed from a caller's secret (a workflow
step's `{{ params.token | lower }}`): recorded as `REDACTED` whatever the target's schema says."""


def redact_arguments(arguments: Mapping[str, Any], secrets: frozenset[str]) -> dict[str, Any]:
    """The arguments with each secret field's value replaced by `REDACTED` (run records, prompts)."""
    if not secrets:
        return dict(arguments)
    return {key: (REDACTED if key in secrets else value) for key, value in arguments.items()}


def secret_values(names: Iterable[str], arguments: Mapping[str, Any]) -> tuple[str, ...]:
    """The text forms of the secret arguments actually given, longest first (for `redact_text`)."""
    values = set()
    for name in names:
        value = arguments.get(name)
        if value is None or isinstance(value, bool):
            continue
        text = value if isinstance(value, str) else _as_json(value)
        if len(text) >= MIN_TEXT_LENGTH:
            values.add(text)
    return tuple(sorted(values, key=len, reverse=True))


def redact_text(message: str, values: Iterable[str]) -> str:
    """`message` with every occurrence of every secret value replaced by `REDACTED`."""
    for value in values:
        if value in message:
            message = message.replace(value, REDACTED)
    return message


def _as_json(value: Any) -> str:
    """A non-string value as a template renders it (compact JSON), so it is found in messages."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)


def is_secret_name(name: object) -> bool:
    """A field or header whose name says it holds a secret (`Authorization`, `api_key`, `client_secret`)."""
    return isinstance(name, str) and SECRET_NAME_RE.search(name) is not None


def redact_named(value: Any, _depth: int = 0) -> Any:
    """`value` with the value of every secret-named key (at any depth) replaced by `REDACTED`."""
    if _depth > MAX_REDACT_DEPTH:
        return REDACTED if isinstance(value, Mapping | list | tuple) else value
    if isinstance(value, Mapping):
        return {
            key: REDACTED if is_secret_name(key) else redact_named(item, _depth + 1)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [redact_named(item, _depth + 1) for item in value]
    return value
