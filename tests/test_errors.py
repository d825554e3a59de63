"""One error hierarchy: every exception toolweave raises on purpose is a `ToolweaveError`."""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
from collections import defaultdict
from pathlib import Path

import toolweave
from toolweave.errors import ToolweaveError

SAME_NAME_DIFFERENT_THINGS = {"Redirected"}
"""The wire's (a backend answered 3xx) and the OAuth proxy's (an error sent to a client's redirect URI)."""


def exception_classes() -> list[type[BaseException]]:
    """Every public exception class defined in a toolweave module (imported where it is defined)."""
    found: dict[str, type[BaseException]] = {}
    for info in pkgutil.walk_packages(toolweave.__path__, "toolweave."):
        module = importlib.import_module(info.name)
        for name, value in vars(module).items():
            if (
                inspect.isclass(value)
                and issubclass(value, BaseException)
                and value.__module__ == info.name
                and not name.startswith("_")
            ):
                found[f"{value.__module__}.{value.__qualname__}"] = value
    return list(found.values())


def test_every_public_exception_derives_from_toolweave_error() -> None:
    classes = exception_classes()
    assert len(classes) > 40
    outside = [
        f"{kind.__module__}.{kind.__qualname__}" for kind in classes if not issubclass(kind, ToolweaveError)
    ]
    assert outside == []


def test_each_exception_is_defined_once() -> None:
    homes: dict[str, list[str]] = defaultdict(list)
    for kind in exception_classes():
        homes[kind.__name__].append(kind.__module__)
    twice = {
        name: where
        for name, where in homes.items()
        if len(where) > 1 and name not in SAME_NAME_DIFFERENT_THINGS
    }
    assert twice == {}
    assert homes["RpcError"] == ["toolweave.wire.errors"]


def test_the_builtin_bases_callers_catch_are_kept() -> None:
    from toolweave.config.documents import DocumentTooCostly
    from toolweave.services.errors import StreamsBusy
    from toolweave.templates import TemplateError

    assert issubclass(TemplateError, ValueError) and issubclass(StreamsBusy, OverflowError)
    import yaml

    assert issubclass(DocumentTooCostly, yaml.YAMLError)


def _union_members(node: ast.expr) -> list[ast.expr]:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return [*_union_members(node.left), *_union_members(node.right)]
    return [node]


def _head(node: ast.expr) -> str:
    base = node.value if isinstance(node, ast.Subscript) else node
    return ast.unparse(base).rsplit(".", 1)[-1]


CONTAINERS = {"dict", "list", "tuple", "Mapping", "Sequence", "CallToolResult"}
NOT_AN_ERROR = {"type_value"}
"""Where the string is a value too: a JSON Schema `type` is one name or a list of names."""


def test_no_function_returns_a_value_or_a_string_meaning_an_error() -> None:
    """`validated()` returned `dict | str` and its caller tested `type(checked) is str`: a refusal is
    an exception or an optional reason (`*_problem`), never a string in place of a value."""
    found = []
    for path in sorted(Path(toolweave.__file__).parent.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.returns is not None:
                heads = {_head(member) for member in _union_members(node.returns)}
                if "str" in heads and heads & CONTAINERS and node.name not in NOT_AN_ERROR:
                    found.append(f"{path.name}:{node.lineno} {node.name} -> {ast.unparse(node.returns)}")
    assert found == []
