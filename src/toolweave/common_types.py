"""The type aliases every layer shares, in one place: JSON, and the progress callback.

JSON arrives from outside (MCP messages, config files, HTTP bodies, stored definitions) and is
checked where it is read, field by field; until then it is `JSONObject` (`dict[str, Any]`): `Any`
is the honest type of a value nobody has looked at yet, and the readers below turn it into a typed
one or a default. This module imports nothing from toolweave, so any package may use it
(`toolweave.wire` included). docs/architecture.md "Types".
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, TypeAlias, TypeVar

JSONScalar: TypeAlias = str | int | float | bool | None
JSONValue: TypeAlias = JSONScalar | list["JSONValue"] | dict[str, "JSONValue"]
"""A JSON document toolweave built itself, so every level is known."""

JSONObject: TypeAlias = dict[str, Any]
"""A JSON object from outside: the keys are strings, the values unchecked until read (`Any` at the
wire's edge, on purpose: see the module docstring)."""

ProgressFn: TypeAlias = Callable[[float, float | None, str | None], Awaitable[None]]
"""`await progress(value, total, message)`: a call's progress, on its way to the client that asked
for it (`notifications/progress`)."""

_Default = TypeVar("_Default")


def object_at(data: Mapping[str, Any], key: str) -> JSONObject:
    """`data[key]` if it is a JSON object, else an empty one: reading an optional nested object."""
    value = data.get(key)
    return value if isinstance(value, dict) else {}


def list_at(data: Mapping[str, Any], key: str) -> list[Any]:
    """`data[key]` if it is a JSON array, else an empty one."""
    value = data.get(key)
    return value if isinstance(value, list) else []


def str_at(data: Mapping[str, Any], key: str, default: _Default) -> str | _Default:
    """`data[key]` if it is a string, else `default`."""
    value = data.get(key)
    return value if isinstance(value, str) else default
