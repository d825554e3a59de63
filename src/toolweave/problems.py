"""The one problem type: a path and a message. Every layer reports bad input with it.

A config file's problems (`composite_tools[2].rules[0].condition.type`), a
composite that does not build against the catalog (`steps[1].tool`, relative
to its definition), a rejected REST request (`body.definition.name`) and a run
that cannot be resumed (`arguments.token`) are all `Problem`s, so a path is
never recovered from message text: it is joined (`join_path`) as a problem
travels outwards.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from types import UnionType
from typing import Annotated, Any, NamedTuple, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from toolweave.errors import ToolweaveError
from toolweave.suggest import did_you_mean


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


class ConfigError(ToolweaveError):
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


def _friendly(error: ErrorDetails, model: Any = None) -> str:
    kind = error.get("type", "")
    if kind == "extra_forbidden":
        loc = [part for part in error.get("loc", ()) if isinstance(part, str | int)]
        hint = did_you_mean(str(loc[-1]), keys_at(model, loc[:-1])) if model is not None and loc else ""
        return f"unknown key{hint or ' (check the spelling; unknown keys are errors)'}"
    if kind == "missing":
        return "required key is missing"
    message = str(error.get("msg", "invalid value"))
    return message.removeprefix("Value error, ").removeprefix("Assertion failed, ")


def problems_from_validation(error: ValidationError, prefix: str = "", model: Any = None) -> list[Problem]:
    """Turn pydantic's errors into path-addressed issues (`a.b[2].c: message`); with the `model` that
    was validated, an unknown key says which known key it may have meant."""
    issues = []
    for item in error.errors():
        parts: Iterable[str | int] = [
            p for p in item["loc"] if not (isinstance(p, str) and p.startswith("function-"))
        ]
        issues.append(Problem(join_path(prefix, *parts), _friendly(item, model)))
    return issues


def keys_at(model: Any, loc: Sequence[str | int]) -> set[str]:
    """The keys the models at `loc` inside `model` accept. Unions are followed on every side, and a
    location part no type knows (a tagged union's tag) is stepped over."""
    current = [model]
    for part in loc:
        following = [found for kind in current for found in _step(kind, part)]
        current = following or current
    return {
        field.alias or name
        for kind in current
        for m in _models(kind)
        for name, field in m.model_fields.items()
    }


def _unwrapped(kind: Any) -> list[Any]:
    """`Annotated[X, ...]`, `X | None`, `Union[X, Y]` → the types inside."""
    origin = get_origin(kind)
    if origin is Annotated:
        return _unwrapped(get_args(kind)[0])
    if origin in (Union, UnionType):
        return [inner for arg in get_args(kind) for inner in _unwrapped(arg)]
    return [kind]


def _models(kind: Any) -> list[type[BaseModel]]:
    return [k for k in _unwrapped(kind) if isinstance(k, type) and issubclass(k, BaseModel)]


def _step(kind: Any, part: str | int) -> list[Any]:
    found: list[Any] = []
    for inner in _unwrapped(kind):
        if isinstance(inner, type) and issubclass(inner, BaseModel):
            for name, field in inner.model_fields.items():
                if part in (name, field.alias):
                    found.append(field.annotation)
            continue
        origin, args = get_origin(inner), get_args(inner)
        if origin in (list, tuple, set, frozenset, Sequence) and isinstance(part, int) and args:
            found.append(args[0])
        elif origin in (dict, Mapping) and isinstance(part, str) and len(args) == 2:
            found.append(args[1])
    return found
