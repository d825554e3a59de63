"""Is a JSON Schema acceptable? `schema_error`: the metaschema (its `$schema` draft, 2020-12 by
default), and what jsonschema's own check misses.

Schemas come from tenants (definitions made through the API) and from backends, so a schema is
untrusted input, and checking one has a bounded cost: nested at most `MAX_SCHEMA_DEPTH` deep (so
checking one is never a `RecursionError`), at most `MAX_SCHEMA_NODES` subschemas, `$ref` resolved
only inside its own document (`LOCAL_ONLY`, an empty `referencing` registry: never a file read,
never a network fetch), `pattern` and `patternProperties` compiled by RE2 (linear time, where
Python's `re` backtracks exponentially). The metaschema is checked in one linear walk
(`metaschema.py`); a check is remembered by the schema's content; heavy checks run beside the
event loop (`off_loop`). Validators built from an accepted schema: `validate.py`.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import threading
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final, ParamSpec, TypeVar, cast

import jsonschema
import orjson
import re2
from jsonschema.validators import validator_for
from jsonschema_specifications import REGISTRY as METASCHEMAS
from referencing import Registry
from referencing.exceptions import Unresolvable
from referencing.jsonschema import DRAFT202012, specification_with

from toolweave.schemas import metaschema

MAX_SCHEMA_DEPTH: Final = 64
"""Deepest nesting of objects and arrays a schema may have (real tool schemas stay under ~10)."""
MAX_SCHEMA_NODES: Final = 5_000
"""Most subschemas (properties, items, `$defs` entries, ...) one schema may hold; real tool schemas
hold tens to a few hundred, and every one is checked, listed and copied on each `tools/list`."""

LOCAL_ONLY: Final = Registry()
"""No resources and no `retrieve`: a `$ref` outside the schema is unresolvable, never fetched."""

_RE2_OPTIONS = re2.Options()
_RE2_OPTIONS.log_errors = False  # a bad pattern is reported as a schema problem, not logged on stderr

_SCHEMA_MAPS: Final = frozenset(
    {"properties", "patternProperties", "$defs", "definitions", "dependentSchemas", "dependencies"}
)
_SCHEMA_LISTS: Final = frozenset({"allOf", "anyOf", "oneOf", "prefixItems", "items"})
_SCHEMA_VALUES: Final = frozenset(
    {
        "not",
        "if",
        "then",
        "else",
        "items",
        "additionalItems",
        "contains",
        "additionalProperties",
        "propertyNames",
        "unevaluatedItems",
        "unevaluatedProperties",
    }
)
"""Keywords whose values are schemas; `const`, `enum`, `default`, `examples` hold data, not schemas."""


_P = ParamSpec("_P")
_T = TypeVar("_T")
_CHECKER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="toolweave-schema-checks")
"""The one thread heavy schema work runs on (see `off_loop`)."""


async def off_loop(work: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
    """`work(*args)` — checking untrusted schemas: a federated manifest read, a definition parsed —
    on one thread beside the event loop, never on it.

    A legal schema may hold thousands of properties, and a manifest hundreds of tools: checked on
    the event loop they would hold every tenant's requests meanwhile. On the thread they only share
    the interpreter with the loop, which gets its turn every few milliseconds. One thread bounds
    what they cost together; callers queue (and their own limits bound how many may queue). `work`
    must read nothing the event loop changes; what it checks is remembered (`schema_error`), so
    the loop's own checks of the same schemas afterwards cost a hash.
    """
    return await asyncio.get_running_loop().run_in_executor(
        _CHECKER, functools.partial(work, *args, **kwargs)
    )


def schema_error(schema: Any) -> jsonschema.SchemaError | None:
    """Why `schema` is not a valid JSON Schema (its `$schema` draft, 2020-12 by default), or None.

    Beyond the metaschema: too deep, too many subschemas, a `$ref` that does not resolve inside the
    document, a `pattern` RE2 cannot compile. Remembered by content: a catalog rebuild checking the
    same definitions again pays a hash, not the check.
    """
    digest = content_digest(schema)
    if digest is None:
        return _schema_error(schema)
    found = _CHECKED.get(digest, _MISSING)
    if found is _MISSING:
        found = _schema_error(schema)
        remember(_CHECKED, digest, found)
    return cast("jsonschema.SchemaError | None", found)


def input_schema_problem(schema: dict[str, Any]) -> str | None:
    """Why a schema cannot be a tool's input schema, or None."""
    if schema.get("type") != "object":
        return "an input schema must have type 'object'"
    error = schema_error(schema)
    if error is not None:
        return f"not a valid JSON Schema: {error.message}"
    return None


def _schema_error(schema: Any) -> jsonschema.SchemaError | None:
    if _depth_exceeds(schema, MAX_SCHEMA_DEPTH):
        return jsonschema.SchemaError(f"the schema is nested more than {MAX_SCHEMA_DEPTH} levels deep")
    if _nodes_exceed(schema, MAX_SCHEMA_NODES):
        return jsonschema.SchemaError(
            f"the schema holds more than {MAX_SCHEMA_NODES} subschemas (properties, items, definitions, ...)"
        )
    error = _metaschema_error(schema)
    if error is not None:
        return error
    return _unsafe_part(schema)


def _metaschema_error(schema: Any) -> jsonschema.SchemaError | None:
    """The metaschema's verdict, in time linear in the schema.

    jsonschema's own `check_schema` costs ~0.3 ms per subschema (the 2020-12 metaschema's dynamic
    references); `metaschema.first_problem` walks a 2020-12 schema once. Where it finds a problem,
    jsonschema checks just that keyword, for its usual message; other drafts go to jsonschema whole
    (bounded by `MAX_SCHEMA_NODES`).
    """
    cls = validator_for(schema, default=jsonschema.Draft202012Validator)
    if cls is jsonschema.Draft202012Validator:
        found = metaschema.first_problem(schema)
        if found is None:
            return None
        path, keyword, part = found
        if keyword:
            try:
                cls.check_schema({keyword: part})
            except jsonschema.SchemaError as error:
                return _rooted(error, path, keyword)
    try:
        cls.check_schema(schema)
    except jsonschema.SchemaError as error:
        return error
    return None


def _rooted(error: jsonschema.SchemaError, path: list[str | int], keyword: str) -> jsonschema.SchemaError:
    """`error` from checking `{keyword: ...}` alone, with its path from the schema's root."""
    rest = list(error.relative_path)
    error.path.clear()
    error.path.extend([*path, *rest] if rest else [*path, keyword])
    return error


_MISSING: Final = object()
_CHECKED: dict[bytes, Any] = {}
_CACHE_SIZE: Final = 4096


def content_digest(schema: Any) -> bytes | None:
    """A fingerprint of a schema's content (None when it is not plain JSON: then nothing is remembered)."""
    try:
        return hashlib.blake2b(orjson.dumps(schema, option=orjson.OPT_SORT_KEYS), digest_size=20).digest()
    except (TypeError, orjson.JSONEncodeError):
        return None


_REMEMBERING = threading.Lock()
"""Checks run on the event loop and on `off_loop`'s thread, and both remember what they found."""


def remember(cache: dict[bytes, Any], digest: bytes, value: Any) -> None:
    with _REMEMBERING:
        if len(cache) >= _CACHE_SIZE:
            cache.pop(next(iter(cache)))
        cache[digest] = value


def _nodes_exceed(schema: Any, limit: int) -> bool:
    return any(count > limit for count, _ in enumerate(_subschemas(schema), 1))


# -- what jsonschema's checks miss: depth, refs, patterns ------------------------------------


def _depth_exceeds(value: Any, limit: int) -> bool:
    """True when `value` nests dicts/lists deeper than `limit` (iterative: no recursion to blow)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if isinstance(node, Mapping):
            children: Any = node.values()
        elif isinstance(node, list):
            children = node
        else:
            continue
        if depth >= limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False


def _subschemas(schema: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[tuple[str | int, ...], Any]]:
    """Every (path, subschema) of `schema`, itself first; data keywords (`const`, `enum`, …) are skipped."""
    yield path, schema
    if not isinstance(schema, Mapping):
        return
    for key, value in schema.items():
        if key in _SCHEMA_MAPS and isinstance(value, Mapping):
            for name, sub in value.items():
                yield from _subschemas(sub, (*path, key, name))
        elif key in _SCHEMA_LISTS and isinstance(value, list):
            for index, sub in enumerate(value):
                yield from _subschemas(sub, (*path, key, index))
        elif key in _SCHEMA_VALUES and isinstance(value, Mapping | bool):
            yield from _subschemas(value, (*path, key))


def _unsafe_part(schema: Any) -> jsonschema.SchemaError | None:
    """The first `$ref`, `pattern` or keyword mix that could reach outside the document or Python's `re`."""
    if not isinstance(schema, Mapping):
        return None
    specification = specification_with(str(schema.get("$schema", "")), default=DRAFT202012)
    root = specification.create_resource(schema)
    root_resolver = METASCHEMAS.combine(LOCAL_ONLY).resolver_with_root(root)
    resolvers: dict[tuple[str | int, ...], Any] = {(): root_resolver}
    for path, sub in _subschemas(schema):
        if not isinstance(sub, Mapping):
            continue
        resolver = _resolver_at(path, resolvers)
        if path and specification.id_of(sub):
            resolver = resolver.in_subresource(specification.create_resource(sub))
        resolvers[path] = resolver
        problem = _ref_problem(sub, resolver) or _pattern_problem(sub)
        if problem is not None:
            return jsonschema.SchemaError(problem, path=list(path))
    return None


def _resolver_at(path: tuple[str | int, ...], resolvers: dict[tuple[str | int, ...], Any]) -> Any:
    """The resolver of the nearest enclosing subschema already visited (parents come first)."""
    for end in range(len(path), -1, -1):
        found = resolvers.get(path[:end])
        if found is not None:
            return found
    raise AssertionError("the root resolver is always known")


def _ref_problem(sub: Mapping[str, Any], resolver: Any) -> str | None:
    for keyword in ("$ref", "$dynamicRef", "$recursiveRef"):
        ref = sub.get(keyword)
        if not isinstance(ref, str):
            continue
        try:
            resolver.lookup(ref)
        except (Unresolvable, ValueError, KeyError, TypeError):
            return (
                f"{keyword} '{ref}' does not resolve inside this schema: a schema may refer only to its "
                "own parts (e.g. '#/$defs/name'), never to a file or URL"
            )
    return None


def _pattern_problem(sub: Mapping[str, Any]) -> str | None:
    patterns = [sub["pattern"]] if isinstance(sub.get("pattern"), str) else []
    pattern_properties = sub.get("patternProperties")
    if isinstance(pattern_properties, Mapping):
        patterns.extend(pattern_properties)
        if "unevaluatedProperties" in sub:
            return "unevaluatedProperties cannot be combined with patternProperties in one schema"
    for pattern in patterns:
        problem = re2_pattern_problem(pattern)
        if problem is not None:
            return problem
    return None


def re2_pattern_problem(pattern: str) -> str | None:
    """Why RE2 refuses a schema `pattern` (backreferences, lookaround, …), or None."""
    try:
        re2_compiled(pattern)
    except re2.error as error:
        detail = error.args[0] if error.args else error
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        return f"pattern '{pattern}' is not supported (patterns run on RE2): {detail}"
    return None


@functools.lru_cache(maxsize=1024)
def re2_compiled(pattern: str) -> Any:
    """`pattern` compiled by RE2 (remembered); raises `re2.error` for what RE2 refuses."""
    return re2.compile(pattern, options=_RE2_OPTIONS)
