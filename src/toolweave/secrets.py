"""Secrets: what is secret, how it is redacted, and the one marker that replaces it.

A tool parameter is secret when its schema says `writeOnly: true` or
`format: password`. Its value never appears in a run record (replaced by
`REDACTED`), an error message (`redact_text`), an approval prompt or an
export (`toolweave.export.schema` drops its example values). Connection
secrets (a tenant's stored headers) are registered with `SCRUBBER`, which
replaces them in every log line.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterable, Mapping
from typing import Any

REDACTED = "[redacted]"
"""What stands in for a secret value, everywhere."""
MIN_SCRUB_LENGTH = 6
"""Shorter values are not scrubbed from logs: replacing every `abc` in every line would garble them."""
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


class SecretScrubber:
    """The set of secret values that must never reach a log line (connection secrets)."""

    def __init__(self) -> None:
        self._values: set[str] = set()
        self._lock = threading.Lock()

    def add(self, *values: str) -> None:
        with self._lock:
            self._values.update(v for v in values if isinstance(v, str) and len(v) >= MIN_SCRUB_LENGTH)

    def scrub(self, text: str) -> str:
        if not self._values:
            return text
        return redact_text(text, sorted(self._values, key=len, reverse=True))

    def __len__(self) -> int:
        return len(self._values)


SCRUBBER = SecretScrubber()
"""Process-wide: log handlers are process-wide too."""
