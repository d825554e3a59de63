"""Tool names that LLM providers accept.

OpenAI and Anthropic reject a tool whose name does not match
`^[a-zA-Z0-9_-]{1,64}$`, and they reject the whole request when two tools
share a name. Exposed names (`backend__tool`) usually qualify already, but a backend
tool name may carry dots, slashes, spaces or be long, so every export for an
LLM passes the names through here.

Renaming is deterministic so an export is stable between runs: invalid
characters become `_`, and a name longer than 64 characters is cut and given
a short hash of the *original* name, so two long names that share a prefix
stay distinct. A rename that would make two tools share a name is refused
with both originals named — silently dropping or suffixing one would let an
agent call the wrong tool.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from typing import Final

NAME_PATTERN: Final = "^[a-zA-Z0-9_-]{1,64}$"
"""What OpenAI and Anthropic accept as a tool name."""
MAX_NAME_LENGTH: Final = 64
HASH_LENGTH: Final = 8
"""Hex digits of the SHA-256 of the original name appended to a shortened name."""

_VALID: Final = re.compile(r"[a-zA-Z0-9_-]{1,64}")
_INVALID_CHAR: Final = re.compile(r"[^a-zA-Z0-9_-]")


def is_safe_name(name: str) -> bool:
    """True when `name` matches `NAME_PATTERN` as it is."""
    return _VALID.fullmatch(name) is not None


def safe_name(name: str) -> str:
    """The provider-safe form of one name; a valid name is returned unchanged."""
    if is_safe_name(name):
        return name
    cleaned = _INVALID_CHAR.sub("_", name) or "_"
    if len(cleaned) <= MAX_NAME_LENGTH:
        return cleaned
    digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:HASH_LENGTH]  # of the original name
    return f"{cleaned[: MAX_NAME_LENGTH - HASH_LENGTH - 1]}_{digest}"


def shortened(name: str, limit: int = MAX_NAME_LENGTH) -> str:
    """`name` cut to `limit` characters with a short hash of the whole name, so two long names that
    share a prefix stay distinct; a name that fits is returned unchanged."""
    if len(name) <= limit:
        return name
    digest = hashlib.sha256(name.encode("utf-8")).hexdigest()[:HASH_LENGTH]
    return f"{name[: limit - HASH_LENGTH - 1]}_{digest}"


def safe_names(names: Iterable[str]) -> dict[str, str]:
    """Map each original name to its safe form, refusing duplicates and collisions.

    The mapping keeps input order; callers use it to translate a provider's
    tool call back to the gateway name.
    """
    mapping: dict[str, str] = {}
    owners: dict[str, str] = {}
    for name in names:
        if name in mapping:
            raise ValueError(f"tool {name!r} appears more than once in the export")
        safe = safe_name(name)
        if safe in owners:
            raise ValueError(
                f"tools {owners[safe]!r} and {name!r} would both be exported as {safe!r}; "
                "rename one of them (an alias) or export them separately"
            )
        owners[safe] = name
        mapping[name] = safe
    return mapping


def unique_names(names: Iterable[str]) -> dict[str, str]:
    """Map each name to itself, refusing duplicates (formats that keep names verbatim)."""
    mapping: dict[str, str] = {}
    for name in names:
        if name in mapping:
            raise ValueError(f"tool {name!r} appears more than once in the export")
        mapping[name] = name
    return mapping
