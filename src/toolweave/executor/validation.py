"""The validation stage: the arguments are a JSON object that satisfies the tool's input schema.

Invalid arguments never reach a backend; the message names every problem and
field (never a secret's value), and says that nothing was called.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolweave.catalog.catalog import Entry
from toolweave.executor.errors import InvalidArguments


def validated(entry: Entry, arguments: Any) -> dict[str, Any]:
    """The arguments as the call's own dict; `InvalidArguments` says why they cannot be sent to
    `entry` (an exception, not a value: the success path costs nothing, and a refusal cannot be
    mistaken for arguments)."""
    if not isinstance(arguments, Mapping):
        raise InvalidArguments(
            f"arguments for {entry.name!r} must be a JSON object, got {type(arguments).__name__}"
        )
    checked: dict[str, Any] = dict(arguments)
    problems = entry.validator.problems(checked)
    if problems:
        raise InvalidArguments(
            f"invalid arguments for {entry.name!r}: " + "; ".join(problems) + ". Nothing was called."
        )
    return checked
