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
from contextvars import ContextVar, Token
from typing import Any, overload

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
    if type(schema) is not dict and not isinstance(schema, Mapping):  # a plain dict skips the ABC check
        return False
    return schema.get("writeOnly") is True or schema.get("format") == "password"


def secret_fields(schema: Mapping[str, Any] | None) -> frozenset[str]:
    """Top-level properties of an input schema that hold secrets."""
    properties = (schema or {}).get("properties") if isinstance(schema, Mapping) else None
    if not isinstance(properties, Mapping):
        return frozenset()
    return frozenset(name for name, prop in properties.items() if is_secret_schema(prop))


DERIVED_SECRETS: ContextVar[frozenset[str]] = ContextVar("toolweave_derived_secrets", default=frozenset())
"""Argument fields of the inner call being made that were computed from a caller's secret (a workflow
step's `{{ params.token | lower }}`): recorded as `REDACTED` whatever the target's schema says."""


MAX_TAINTED = 1024
"""Most secret values one call follows (each at least `MIN_TEXT_LENGTH` characters)."""


class SecretValues:
    """The secret values of one call, and every value computed from one since (taint).

    Seeded with the values of the call's secret arguments (`writeOnly`, `format: password`);
    the template sandbox adds each string a filter, method, operator, slice or `~` makes from a
    value holding one (`params.pw | upper`, `params.token | reverse`, a `forEach` item), so the
    forms a template produced are known whatever it did. Everything the call records (its run
    record, its inner calls' records, checkpoints, trace events) is scrubbed of them
    (`scrub`), case-insensitively, so a backend quoting one in another case is scrubbed too.
    A template taking a secret apart one character at a time is not followed.
    """

    __slots__ = ("_exact", "_lowered", "_ordered")

    def __init__(self, values: Iterable[str] = ()) -> None:
        self._exact: set[str] = set()
        self._lowered: tuple[str, ...] | None = None
        self._ordered: tuple[str, ...] | None = None
        for value in values:
            self.add(value)

    def __len__(self) -> int:
        return len(self._exact)

    def add(self, value: Any) -> None:
        """`value` (a string, or the strings of a list or tuple) is secret from now on."""
        if isinstance(value, str):
            if len(value) >= MIN_TEXT_LENGTH and value not in self._exact and len(self._exact) < MAX_TAINTED:
                self._exact.add(value)
                self._lowered = self._ordered = None
        elif isinstance(value, list | tuple):
            for item in value:
                if isinstance(item, str):
                    self.add(item)

    def holds(self, value: Any) -> bool:
        """Whether `value` (a string, or a list/tuple/dict of strings, one level deep) holds a secret."""
        if isinstance(value, str):
            return value in self._exact or any(secret in value for secret in self._exact)
        items = (
            value.values() if isinstance(value, Mapping) else value if isinstance(value, list | tuple) else ()
        )
        return any(isinstance(item, str) and self.holds(item) for item in items)

    def scrub(self, text: str) -> str:
        """`text` with every occurrence of a secret value, in any case, replaced by `REDACTED`."""
        if not self._exact or len(text) < MIN_TEXT_LENGTH:
            return text
        lowered = text.lower()
        if len(lowered) != len(text):  # a character whose lower case is longer: match exactly
            return redact_text(text, self.ordered())
        spans: list[tuple[int, int]] = []
        for value in self._lowered_values():
            start = lowered.find(value)
            while start >= 0:
                spans.append((start, start + len(value)))
                start = lowered.find(value, start + len(value))
        if not spans:
            return text
        spans.sort()
        out: list[str] = []
        end = 0
        for start, stop in spans:
            if start >= end:
                out.append(text[end:start])
                out.append(REDACTED)
                end = stop
            elif stop > end:
                end = stop
        out.append(text[end:])
        return "".join(out)

    def scrub_value(self, value: Any, _depth: int = 0) -> Any:
        """A copy of a JSON-like value with every string scrubbed (keys too); the value is not changed."""
        if isinstance(value, str):
            return self.scrub(value)
        if _depth > 64:
            return value
        if isinstance(value, Mapping):
            return {self.scrub(str(k)): self.scrub_value(v, _depth + 1) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.scrub_value(item, _depth + 1) for item in value]
        return value

    def ordered(self) -> tuple[str, ...]:
        if self._ordered is None:
            self._ordered = tuple(sorted(self._exact, key=len, reverse=True))
        return self._ordered

    def _lowered_values(self) -> tuple[str, ...]:
        if self._lowered is None:
            self._lowered = tuple(dict.fromkeys(value.lower() for value in self.ordered()))
        return self._lowered


TAINTED: ContextVar[SecretValues | None] = ContextVar("toolweave_tainted", default=None)
"""The secret values of the call being made (and of the calls it is part of); None: no secret."""


def follow_secrets(fields: frozenset[str], arguments: Mapping[str, Any]) -> Token[SecretValues | None] | None:
    """Make the values of a call's secret fields secret for the rest of the call (joining the
    calling composite's values, if any). The token to reset when this call started the set."""
    active = TAINTED.get()
    seeds = [text for name in fields for text in _texts(arguments.get(name))]
    if active is not None:
        for seed in seeds:
            active.add(seed)
        return None
    if not any(len(seed) >= MIN_TEXT_LENGTH for seed in seeds):
        return None
    return TAINTED.set(SecretValues(seeds))


@overload
def scrub_secrets(value: str) -> str: ...
@overload
def scrub_secrets(value: Any) -> Any: ...
def scrub_secrets(value: Any) -> Any:
    """`value` (text or JSON-like) scrubbed of the current call's secret values (unchanged without any)."""
    active = TAINTED.get()
    if active is None or not len(active):
        return value
    return active.scrub(value) if isinstance(value, str) else active.scrub_value(value)


def _texts(value: Any, _depth: int = 0) -> list[str]:
    """The strings a secret argument holds: itself, its JSON, and every string inside it."""
    if value is None or isinstance(value, bool):
        return []
    if isinstance(value, str):
        return [value]
    texts = [_as_json(value)]
    if _depth < 8:
        items = (
            value.values() if isinstance(value, Mapping) else value if isinstance(value, list | tuple) else ()
        )
        for item in items:
            texts.extend(_texts(item, _depth + 1))
    return texts


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
