"""What the builder's forms share: reading posted fields with bounds, keys a form has no field for
kept across form ↔ text switches, each problem put at its field, and the table of form kinds.

Each kind (router, fan-out, workflow) is a flat HTML form whose fields are named `<prefix>-<i>-<field>`
for rows and plain names at the top. A validation problem's path (`definition.targets[1].tool`) names
the slot of its field (`t-1-tool`), so the problem shows under the field that causes it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import yaml

from toolweave.problems import Problem
from toolweave.server.ui.errors import Unreadable

MAX_ROWS = 50
"""Rows (operations, rules, targets, steps) one form may hold: a bound on what one request makes the
gateway check."""
MAX_TEXT = 10_000
MAX_EXTRA = 100_000
"""Bound of a hidden "kept" field (keys without a form field), as text."""
MAX_DEPTH = 64
"""Nesting a definition from the browser may have: writing it back (YAML, TOML) recurses."""


class Form(Protocol):
    name: str

    def slots(self) -> list[str]: ...


def text_of(form: Any, key: str, limit: int = MAX_TEXT) -> str:
    value = form.get(key)
    return value.strip()[:limit] if isinstance(value, str) else ""


def count_of(form: Any, key: str) -> int:
    try:
        return max(0, min(int(form.get(key) or 0), MAX_ROWS))
    except ValueError:
        return 0


def kept_of(form: Any, key: str) -> dict[str, Any]:
    """A hidden field holding, as JSON, the keys of the definition that the form shows no field for."""
    raw = form.get(key)
    if not isinstance(raw, str) or not raw.strip() or len(raw) > MAX_EXTRA:
        return {}
    try:
        loaded = json.loads(raw)
    except (ValueError, RecursionError):
        return {}
    return loaded if isinstance(loaded, dict) and nesting_depth(loaded) <= MAX_DEPTH else {}


def nesting_depth(value: Any) -> int:
    """How deep mappings and lists nest, counted without recursion (the value may be too deep for
    it); counting stops past MAX_DEPTH."""
    deepest, stack = 0, [(value, 1)]
    while stack:
        current, depth = stack.pop()
        if isinstance(current, dict | list):
            deepest = max(deepest, depth)
            if depth > MAX_DEPTH:
                return depth
            stack.extend(
                (item, depth + 1) for item in (current.values() if isinstance(current, dict) else current)
            )
    return deepest


def kept_json(kept: Mapping[str, Any]) -> str:
    return json.dumps(kept, ensure_ascii=False, sort_keys=True) if kept else ""


def rest_of(mapping: Mapping[str, Any], shown: tuple[str, ...]) -> dict[str, Any]:
    """The keys of `mapping` the form has no field for (kept as they are)."""
    return {key: value for key, value in mapping.items() if key not in shown}


def scalar(text: str) -> Any:
    """A value as typed: numbers and booleans as such, else the text."""
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def plain(value: Any) -> str:
    return "" if value is None else str(value)


def structured(text: str, what: str) -> Any:
    """A field that holds YAML (JSON is YAML): `{a: 1}`, `[x, y]`; empty is None."""
    if not text.strip():
        return None
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise Unreadable(f"{what} is not valid YAML or JSON{where}") from None


def inline(value: Any) -> str:
    """A value written on one line as YAML flow (`{a: 1, b: x}`), for a one-line field."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return yaml.safe_dump(
        value, default_flow_style=True, sort_keys=False, allow_unicode=True, width=10_000
    ).strip()


def names_list(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


_ROW_PATH = re.compile(r"^(\w+)\[(\d+)\](?:\.(.*))?$")


def slot_for(
    path: str, rows: Mapping[str, tuple[str, Mapping[str, str]]], top: tuple[str, ...]
) -> str | None:
    """The slot of a problem's path: `rows` maps a list key (`targets`) to its prefix and its
    fields' slots (`{"tool": "tool"}`); a row's other problems go to the row's own slot."""
    path = path.removeprefix("definition").lstrip(".")
    found = _ROW_PATH.match(path)
    if found and found.group(1) in rows:
        prefix, fields = rows[found.group(1)]
        head = (found.group(3) or "").split(".")[0].split("[")[0]
        return f"{prefix}-{found.group(2)}-{fields.get(head, 'row')}"
    head = path.split(".")[0].split("[")[0]
    return head if head in top else None


def place(
    problems: list[Problem], form: Form, slot_of: Callable[[Problem], str | None]
) -> tuple[dict[str, list[str]], list[str]]:
    """({slot: messages}, messages about the whole definition)."""
    known = set(form.slots())
    at: dict[str, list[str]] = {}
    general: list[str] = []
    for problem in problems:
        slot = slot_of(problem)
        if slot is not None and slot in known:
            at.setdefault(slot, []).append(problem.message)
        else:
            general.append(str(problem))
    return at, general


@dataclass(frozen=True, slots=True)
class FormKind:
    """One kind the builder edits as a form: how its fields become a definition and back."""

    kind: str
    title: str
    intro: str
    fields_template: str
    """The template whose `form_fields(form, at, oob)` macro draws this kind's fields."""
    read: Callable[[Any], Any]
    to_definition: Callable[[Any], dict[str, Any]]
    from_definition: Callable[[Mapping[str, Any]], Any]
    place: Callable[[list[Problem], Any], tuple[dict[str, list[str]], list[str]]]
    add_row: Callable[[Any, str, str], bool]
    """Apply an `add_*`/`pick` action (with the picked tool); False when it is not one of this kind's."""
    field_problems: Callable[[Any], list[Problem]] = lambda _form: []
    """Problems of the form's own text fields (YAML that does not read), before the validator runs."""
    row_tools: Callable[[Any], list[tuple[str, str]]] = lambda _form: []
    """(hint slot, tool reference) of each row that calls a tool: the builder shows under the row
    the parameters that tool takes, so a mapping or arguments can be written without looking it up."""
    choices: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    """The options of this kind's select boxes, by name."""
    stale_tables: Callable[[Any, dict[str, Any]], list[int]] = lambda _form, _params: []
    """Rows whose per-parameter table was drawn for another tool than the one now typed: check as you
    type redraws only those (out of band), so the field being typed in keeps its focus."""
