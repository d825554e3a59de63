"""Config problems: each one has a path and a message, and all are reported at once."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError


@dataclass(frozen=True, slots=True)
class ConfigIssue:
    path: str
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}" if self.path else self.message


class ConfigError(Exception):
    """Raised with EVERY problem found in a config, never just the first."""

    def __init__(self, issues: Sequence[ConfigIssue], source: str | None = None) -> None:
        self.issues = list(issues)
        self.source = source
        head = f"{len(self.issues)} problem(s) in {source or 'config'}"
        super().__init__(head + ":\n" + "\n".join(f"  {issue}" for issue in self.issues))


def join_path(prefix: str, *parts: str | int) -> str:
    path = prefix
    for part in parts:
        if isinstance(part, int):
            path += f"[{part}]"
        elif part:
            path = f"{path}.{part}" if path else str(part)
    return path


def _friendly(error: dict[str, Any]) -> str:
    kind = error.get("type", "")
    if kind == "extra_forbidden":
        return "unknown key (check the spelling; unknown keys are errors)"
    if kind == "missing":
        return "required key is missing"
    message = str(error.get("msg", "invalid value"))
    return message.removeprefix("Value error, ").removeprefix("Assertion failed, ")


def issues_from_validation(error: ValidationError, prefix: str = "") -> list[ConfigIssue]:
    """Turn pydantic's errors into path-addressed issues (`a.b[2].c: message`)."""
    issues = []
    for item in error.errors():
        parts: Iterable[str | int] = [
            p for p in item["loc"] if not (isinstance(p, str) and p.startswith("function-"))
        ]
        issues.append(ConfigIssue(join_path(prefix, *parts), _friendly(item)))
    return issues
