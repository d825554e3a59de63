"""Routing conditions compiled once into fast predicates.

A router decision must cost microseconds, so everything that does not depend
on the call — the field path split, the case-folded value, the RE2 program,
the human-readable description — is prepared when the router is built. At
call time a compiled condition does one lookup and one comparison.

`match(arguments)` returns the *reason* the condition matched (for
`_meta.toolweave.reason`, e.g. `url contains 'linkedin.com'`) or None.

Semantics (documented for users):

- `field` is a dotted path (`target.url`; a numeric part indexes a list).
  A top-level key that literally contains the dots wins over the path.
- A missing field, or one that is null, never matches a leaf condition.
  `not` inverts its condition, so `not` of a leaf matches a missing field;
  use `exists` to require presence.
- String conditions compare the field's *string form*: strings as they are,
  integers in decimal, floats as their shortest repr (`2.0` compares as `2`,
  like JSON), booleans as `true` / `false` (lowercase, like JSON). Objects
  and lists never match a string condition.
- `caseSensitive` defaults to false; comparisons then use Unicode case folding.
- `matches` is an unanchored RE2 search (use `^` / `$` to anchor); RE2 runs
  in linear time, so no input can make a pattern backtrack catastrophically.
- `gt`/`gte`/`lt`/`lte` compare numbers; a string field is compared when it
  parses as a number (`"10"`), anything else (booleans included) never matches.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Final, Protocol

import re2

from toolweave.composite.router.config import COMPARE_TYPES, Condition, re2_options

_MISSING: Final = object()
"""A field absent from the arguments (distinct from a present null)."""

_COMPARISON_SYMBOLS: Final = {"gt": ">", "gte": ">=", "lt": "<", "lte": "<="}
_STRING_VERBS: Final = {
    "contains": "contains",
    "equals": "equals",
    "matches": "matches",
    "starts_with": "starts with",
    "ends_with": "ends with",
}


class CompiledCondition(Protocol):
    description: str
    """How the condition reads to a human, e.g. `url contains 'linkedin.com'`."""

    def match(self, arguments: Mapping[str, Any]) -> str | None:
        """The reason it matched, or None."""
        ...


def string_form(value: Any) -> str | None:
    """The text a string condition compares; None for values that have none (objects, lists, null)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return str(int(value)) if value.is_integer() else repr(value)
    return None


def number_form(value: Any) -> int | float | None:
    """The number a comparison uses; None for booleans, non-numeric strings, NaN and others."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return None if math.isnan(value) else value
    if isinstance(value, str):
        return _parse_number(value)
    return None


def _parse_number(text: str) -> int | float | None:
    stripped = text.strip()
    try:
        return int(stripped)
    except ValueError:
        pass
    try:
        number = float(stripped)
    except ValueError:
        return None
    return None if math.isnan(number) else number


def _quoted(text: str) -> str:
    return f"'{text}'"


class FieldReader:
    """Reads a dotted field path out of the arguments."""

    __slots__ = ("_first", "_path", "_rest")

    def __init__(self, path: str) -> None:
        self._path = path
        parts = path.split(".")
        self._first = parts[0]
        self._rest = tuple(parts[1:])

    def read(self, arguments: Mapping[str, Any]) -> Any:
        exact = arguments.get(self._path, _MISSING)
        if exact is not _MISSING or not self._rest:
            return exact
        current = arguments.get(self._first, _MISSING)
        for part in self._rest:
            current = _step(current, part)
            if current is _MISSING:
                return _MISSING
        return current


def _step(current: Any, part: str) -> Any:
    if isinstance(current, Mapping):
        return current.get(part, _MISSING)
    if isinstance(current, list) and part.isdigit():
        index = int(part)
        return current[index] if index < len(current) else _MISSING
    return _MISSING


class _StringCondition:
    __slots__ = ("_fold", "_reader", "_test", "description")

    def __init__(
        self, reader: FieldReader, test: Callable[[str], bool], fold: bool, description: str
    ) -> None:
        self._reader = reader
        self._test = test
        self._fold = fold
        self.description = description

    def match(self, arguments: Mapping[str, Any]) -> str | None:
        text = string_form(self._reader.read(arguments))
        if text is None:
            return None
        if self._fold:
            text = text.casefold()
        return self.description if self._test(text) else None


class _ExistsCondition:
    __slots__ = ("_reader", "description")

    def __init__(self, reader: FieldReader, description: str) -> None:
        self._reader = reader
        self.description = description

    def match(self, arguments: Mapping[str, Any]) -> str | None:
        value = self._reader.read(arguments)
        return self.description if value is not _MISSING and value is not None else None


class _NumberCondition:
    __slots__ = ("_reader", "_test", "description")

    def __init__(self, reader: FieldReader, test: Callable[[int | float], bool], description: str) -> None:
        self._reader = reader
        self._test = test
        self.description = description

    def match(self, arguments: Mapping[str, Any]) -> str | None:
        number = number_form(self._reader.read(arguments))
        return self.description if number is not None and self._test(number) else None


class _AllCondition:
    __slots__ = ("_children", "description")

    def __init__(self, children: Sequence[CompiledCondition]) -> None:
        self._children = tuple(children)
        self.description = " and ".join(_grouped(child) for child in children)

    def match(self, arguments: Mapping[str, Any]) -> str | None:
        for child in self._children:
            if child.match(arguments) is None:
                return None
        return self.description


class _AnyCondition:
    __slots__ = ("_children", "description")

    def __init__(self, children: Sequence[CompiledCondition]) -> None:
        self._children = tuple(children)
        self.description = " or ".join(_grouped(child) for child in children)

    def match(self, arguments: Mapping[str, Any]) -> str | None:
        for child in self._children:
            reason = child.match(arguments)
            if reason is not None:
                return reason
        return None


class _NotCondition:
    __slots__ = ("_child", "description")

    def __init__(self, child: CompiledCondition) -> None:
        self._child = child
        self.description = f"not ({child.description})"

    def match(self, arguments: Mapping[str, Any]) -> str | None:
        return self.description if self._child.match(arguments) is None else None


def _grouped(child: CompiledCondition) -> str:
    """Parenthesize combinations inside combinations so the description reads unambiguously."""
    if isinstance(child, _AllCondition | _AnyCondition):
        return f"({child.description})"
    return child.description


def compile_condition(condition: Condition) -> CompiledCondition:
    """Compile a validated condition tree; raises ValueError for an RE2 pattern it rejects."""
    kind = condition.type
    if kind == "all":
        return _AllCondition([compile_condition(child) for child in condition.conditions or ()])
    if kind == "any":
        return _AnyCondition([compile_condition(child) for child in condition.conditions or ()])
    if kind == "not":
        assert condition.condition is not None
        return _NotCondition(compile_condition(condition.condition))
    assert condition.field is not None
    reader = FieldReader(condition.field)
    if kind == "exists":
        return _ExistsCondition(reader, f"{condition.field} exists")
    if kind == "in":
        return _compile_in(condition, reader)
    if kind in COMPARE_TYPES:
        return _compile_comparison(condition, reader)
    return _compile_string(condition, reader)


def _compile_string(condition: Condition, reader: FieldReader) -> CompiledCondition:
    kind = condition.type
    raw = string_form(condition.value) or ""
    description = f"{condition.field} {_STRING_VERBS[kind]} {_quoted(raw)}"
    if kind == "matches":
        try:
            pattern = re2.compile(raw, options=re2_options(condition.is_case_sensitive))
        except re2.error as error:
            raise ValueError(f"invalid RE2 pattern {raw!r}: {error}") from None
        search = pattern.search
        return _StringCondition(reader, lambda text: search(text) is not None, False, description)
    fold = not condition.is_case_sensitive
    expected = raw.casefold() if fold else raw
    tests: dict[str, Callable[[str], bool]] = {
        "contains": lambda text: expected in text,
        "equals": lambda text: text == expected,
        "starts_with": lambda text: text.startswith(expected),
        "ends_with": lambda text: text.endswith(expected),
    }
    return _StringCondition(reader, tests[kind], fold, description)


def _compile_in(condition: Condition, reader: FieldReader) -> CompiledCondition:
    raw_values = [string_form(item) or "" for item in condition.value]
    fold = not condition.is_case_sensitive
    accepted = frozenset(value.casefold() if fold else value for value in raw_values)
    listing = ", ".join(_quoted(value) for value in raw_values)
    return _StringCondition(reader, accepted.__contains__, fold, f"{condition.field} in [{listing}]")


def _compile_comparison(condition: Condition, reader: FieldReader) -> CompiledCondition:
    bound = condition.value
    tests: dict[str, Callable[[int | float], bool]] = {
        "gt": lambda number: number > bound,
        "gte": lambda number: number >= bound,
        "lt": lambda number: number < bound,
        "lte": lambda number: number <= bound,
    }
    description = f"{condition.field} {_COMPARISON_SYMBOLS[condition.type]} {string_form(bound)}"
    return _NumberCondition(reader, tests[condition.type], description)


def referenced_fields(condition: Condition) -> list[str]:
    """Every field path a condition tree reads, in declaration order."""
    return [node.field for _path, node in condition.walk("") if node.field is not None]
