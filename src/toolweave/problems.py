"""The one problem type: a path and a message. Every layer reports bad input with it.

A config file's problems (`composite_tools[2].rules[0].condition.type`), a
composite that does not build against the catalog (`steps[1].tool`, relative
to its definition), a rejected REST request (`body.definition.name`) and a run
that cannot be resumed (`arguments.token`) are all `Problem`s, so a path is
never recovered from message text: it is joined (`join_path`) as a problem
travels outwards.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, NamedTuple

from pydantic import ValidationError


class Problem(NamedTuple):
    """Where (`path`, empty for the whole thing) and what is wrong. A tuple, so `(path, message)` unpacks."""

    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message

    def under(self, prefix: str) -> Problem:
        """The same problem seen from outside: its path joined under `prefix`."""
        return Problem(join_path(prefix, self.path), self.message)


def as_problems(items: Iterable[Problem | tuple[str, str]]) -> list[Problem]:
    """Problems from `(path, message)` pairs (a plain tuple is accepted where a Problem is)."""
    return [item if isinstance(item, Problem) else Problem(*item) for item in items]


class ConfigError(Exception):
    """Raised with EVERY problem found in a config, never just the first."""

    def __init__(self, issues: Sequence[Problem], source: str | None = None) -> None:
        self.issues = as_problems(issues)
        self.source = source
        head = f"{len(self.issues)} problem(s) in {source or 'config'}"
        super().__init__(head + ":\n" + "\n".join(f"  {issue}" for issue in self.issues))


def join_path(prefix: str, *parts: str | int) -> str:
    """`composite_tools` + 2 + `rules[0]` → `composite_tools[2].rules[0]` (a part may itself be a path)."""
    path = prefix
    for part in parts:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part:
            path = f"{path}{part}" if part.startswith("[") else f"{path}.{part}" if path else str(part)
    return path


def _friendly(error: dict[str, Any]) -> str:
    kind = error.get("type", "")
    if kind == "extra_forbidden":
        return "unknown key (check the spelling; unknown keys are errors)"
    if kind == "missing":
        return "required key is missing"
    message = str(error.get("msg", "invalid value"))
    return message.removeprefix("Value error, ").removeprefix("Assertion failed, ")


def problems_from_validation(error: ValidationError, prefix: str = "") -> list[Problem]:
    """Turn pydantic's errors into path-addressed issues (`a.b[2].c: message`)."""
    issues = []
    for item in error.errors():
        parts: Iterable[str | int] = [
            p for p in item["loc"] if not (isinstance(p, str) and p.startswith("function-"))
        ]
        issues.append(Problem(join_path(prefix, *parts), _friendly(item)))
    return issues
