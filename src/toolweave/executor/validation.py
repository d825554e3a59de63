"""The validation stage: the arguments are a JSON object that satisfies the tool's input schema.

Invalid arguments never reach a backend; the message names every problem and
field (never a secret's value), and says that nothing was called.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from toolweave.catalog.catalog import Entry


def validated(entry: Entry, arguments: Any) -> dict[str, Any] | str:
    """The arguments as the call's own dict, or why they cannot be sent to `entry`."""
    if not isinstance(arguments, Mapping):
        return f"arguments for {entry.name!r} must be a JSON object, got {type(arguments).__name__}"
    arguments = dict(arguments)
    problems = entry.validator.problems(arguments)
    if problems:
        return f"invalid arguments for {entry.name!r}: " + "; ".join(problems) + ". Nothing was called."
    return arguments
