"""Validating a document with `openapi-spec-validator`, each problem with its JSON pointer and operation.

The library checks the document against the OpenAPI JSON Schema (fast) and then
walks it for what a schema cannot say (path parameters that are not declared,
duplicate operationIds, defaults that do not match their schema). Its walk
reports the latter without a location, so this module drives it one operation
(and one component) at a time, which gives every problem its pointer and
operation, and lets one unresolvable reference spoil only its own operation.

No reference outside the document is ever fetched: the resolver's URL and file
handlers are replaced by one that refuses.

Validating GitHub's 13 MB description takes the library tens of seconds of CPU,
so a serving gateway runs this file as a script in a child process (the
document on stdin, problems as JSON on stdout) and keeps serving meanwhile. The
script imports nothing of toolweave (which would cost the child the whole
package's import time), only the validator.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from typing import Any, NamedTuple

import orjson

from toolweave.backends.errors import RemoteRefRefused
from toolweave.common_types import object_at

MAX_PROBLEMS = 500
_METHODS = ("get", "put", "post", "delete", "options", "head", "patch", "trace")


class _Refuse:
    def __call__(self, uri: str) -> Any:
        raise RemoteRefRefused(f"$ref to {uri!r} points outside the document; it is never fetched")


_REFUSE = _Refuse()
_NO_FETCH = {"<all_urls>": _REFUSE, "http": _REFUSE, "https": _REFUSE, "file": _REFUSE}


class Problem(NamedTuple):
    """Where (a JSON pointer), what, and which operation; `spec.Problem` once it leaves this module."""

    pointer: str
    message: str
    operation: str | None


def validate_document(data: dict[str, Any]) -> list[Any]:
    """Every problem the validator finds as `spec.Problem`s (at most `MAX_PROBLEMS`, then a count)."""
    from toolweave.backends.openapi.spec import Problem as DocumentProblem

    return [DocumentProblem(p.pointer, p.message, p.operation) for p in find_problems(data)]


def find_problems(data: dict[str, Any]) -> list[Problem]:
    from openapi_spec_validator.shortcuts import get_validator_cls
    from openapi_spec_validator.validation.exceptions import ValidatorDetectError

    try:
        base = get_validator_cls(data)
    except ValidatorDetectError:
        return [
            Problem(
                "", "not an OpenAPI 2.0 / 3.x document (no recognised 'swagger' or 'openapi' field)", None
            )
        ]
    validator_class = type("NoFetchValidator", (base,), {"resolver_handlers": _NO_FETCH})
    validator = validator_class(data)
    problems: list[Problem] = []
    for problem in _problems(validator, data):
        if len(problems) == MAX_PROBLEMS:
            problems.append(Problem("", f"... more problems not listed (the first {MAX_PROBLEMS} are)", None))
            break
        problems.append(problem)
    return problems


def _problems(validator: Any, data: dict[str, Any]) -> Iterator[Problem]:
    yield from _structural(validator, data)
    registry = validator.keyword_validators_registry
    spec = validator.schema_path
    if isinstance(data.get("tags"), list) and "tags" in registry.keyword_validators:
        yield from _guarded(lambda: registry["tags"](spec / "tags"), "/tags", None)
    paths = object_at(data, "paths")
    for url, item in paths.items():
        yield from _path_item(registry, spec, url, item)
    components = object_at(data, "components")
    schemas = object_at(components, "schemas")
    definitions = object_at(data, "definitions")
    for section, found in (("/components/schemas", schemas), ("/definitions", definitions)):
        for name in found:
            at = child(section, name)
            node = _walk(spec, at)
            yield from _guarded(lambda node=node: registry["schema"](node), at, None)


def _path_item(registry: Any, spec: Any, url: str, item: Any) -> Iterator[Problem]:
    item_at = child("/paths", url)
    if not isinstance(item, dict):
        return
    node = _walk(spec, item_at)
    parameters = None
    if "parameters" in item:
        parameters = node / "parameters"
        yield from _guarded(
            lambda: registry["parameters"](parameters), child(item_at, "parameters"), f"* {url}"
        )
    for method in _METHODS:
        if method not in item:
            continue
        operation = item[method]
        operation_id = operation.get("operationId") if isinstance(operation, dict) else None
        label = f"{method.upper()} {url}"
        label = f"{operation_id} ({label})" if isinstance(operation_id, str) else label
        yield from _guarded(
            lambda method=method: registry["operation"](url, method, node / method, parameters),
            child(item_at, method),
            label,
        )


def escape(token: Any) -> str:
    return str(token).replace("~", "~0").replace("/", "~1")


def child(pointer: str, *tokens: Any) -> str:
    return pointer + "".join("/" + escape(token) for token in tokens)


def _walk(spec: Any, pointer: str) -> Any:
    node = spec
    for token in pointer.split("/")[1:]:
        node = node / token.replace("~1", "/").replace("~0", "~")
    return node


def _structural(validator: Any, data: dict[str, Any]) -> Iterator[Problem]:
    for error in validator.schema_validator.iter_errors(data):
        path = list(error.absolute_path)
        pointer = "".join("/" + escape(part) for part in path)
        yield Problem(pointer, _one_line(error.message), _operation_of(path, data))


def _operation_of(path: list[Any], data: dict[str, Any]) -> str | None:
    if len(path) >= 3 and path[0] == "paths" and path[2] in _METHODS:
        operation = (data.get("paths") or {}).get(path[1], {}).get(path[2], {})
        operation_id = operation.get("operationId") if isinstance(operation, dict) else None
        label = f"{str(path[2]).upper()} {path[1]}"
        return f"{operation_id} ({label})" if isinstance(operation_id, str) else label
    if len(path) >= 2 and path[0] == "paths":
        return f"* {path[1]}"
    return None


def _guarded(run: Any, at: str, operation: str | None) -> Iterator[Problem]:
    """The library's errors for one part of the document; an exception it raises is that part's problem."""
    try:
        for error in run():
            inner = "".join("/" + escape(part) for part in getattr(error, "absolute_path", ()) or ())
            yield Problem(at + inner, _one_line(getattr(error, "message", None) or str(error)), operation)
    except RemoteRefRefused as error:
        yield Problem(at, str(error), operation)
    except RecursionError:
        yield Problem(at, "references nest too deeply to validate", operation)
    except Exception as error:  # noqa: BLE001 - the library raises (unresolvable refs...): a problem of this part
        refused = _refusal_in(error)
        if refused is not None:
            yield Problem(at, str(refused), operation)
        else:
            yield Problem(at, f"cannot be validated: {_one_line(str(error))}", operation)


def _refusal_in(error: BaseException) -> RemoteRefRefused | None:
    """The resolver wraps our refusal (`referencing.exceptions.Unretrievable`): find it in the chain."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, RemoteRefRefused):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def _one_line(message: str) -> str:
    first = message.strip().split("\n\n", 1)[0]
    text = " ".join(first.split())
    return text if len(text) <= 400 else text[:399] + "…"


def main() -> None:
    """Read a document (JSON) on stdin, write its problems as a JSON list on stdout."""
    data = orjson.loads(sys.stdin.buffer.read())
    problems = find_problems(data) if isinstance(data, dict) else [Problem("", "not a mapping", None)]
    sys.stdout.buffer.write(
        orjson.dumps(
            [{"pointer": p.pointer, "message": p.message, "operation": p.operation} for p in problems]
        )
    )


if __name__ == "__main__":
    main()
