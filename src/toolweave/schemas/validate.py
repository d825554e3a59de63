"""Validators compiled from an accepted JSON Schema (`compile_validator`), and argument validation
against a tool's `inputSchema` (`ArgumentValidator`, compiled once per tool).

Invalid arguments never reach a backend, and the error names the field (never its value when the
schema marks it secret). Every validator built here is bounded like the check that admitted its
schema (`check.py`): `$ref` resolved only inside its own document, `pattern` and
`patternProperties` run on RE2.

Hot path: a plain schema is also compiled into a predicate (`toolweave.schemas.fast`) that says
"valid" only when jsonschema would; every failure goes to jsonschema for the verdict and messages.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import Any, Final, cast

import jsonschema
import orjson
from jsonschema.exceptions import ValidationError
from jsonschema.protocols import Validator
from jsonschema.validators import extend, validator_for
from referencing.exceptions import Unresolvable

from toolweave.schemas.check import LOCAL_ONLY, content_digest, re2_compiled, remember, schema_error
from toolweave.schemas.fast import fast_check
from toolweave.secrets import secret_fields

_MISSING: Final = object()
_COMPILED: dict[bytes, Any] = {}


def compile_validator(schema: Mapping[str, Any]) -> Validator | None:
    """A reusable validator for `schema`; None when the schema itself is invalid (see `schema_error`).

    Every validator toolweave uses is built here; one per distinct schema content (validators are
    immutable, so tools with equal schemas, and every catalog rebuild, share one).
    """
    digest = content_digest(schema)
    found = _COMPILED.get(digest, _MISSING) if digest is not None else _MISSING
    if found is _MISSING:
        found = _compile(schema)
        if digest is not None:
            remember(_COMPILED, digest, found)
    return cast("Validator | None", found)


def _compile(schema: Mapping[str, Any]) -> Validator | None:
    if schema_error(schema) is not None:
        return None
    base = validator_for(schema, default=jsonschema.Draft202012Validator)
    own = orjson.loads(orjson.dumps(schema))  # shared by every caller: a copy none of them can change
    return _withre2_compiled(base)(own, registry=LOCAL_ONLY)


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
    if validator.is_type(instance, "string") and re2_compiled(pattern).search(instance) is None:
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, pattern_properties: Mapping[str, Any], instance: Any, schema: Any
) -> Iterator[ValidationError]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in pattern_properties.items():
        for name, value in instance.items():
            if re2_compiled(pattern).search(name) is not None:
                yield from validator.descend(value, subschema, path=name, schema_path=pattern)


def _additional_properties(
    validator: Any, additional: Any, instance: Any, schema: Mapping[str, Any]
) -> Iterator[ValidationError]:
    """jsonschema's `additionalProperties`, with `patternProperties` matched by RE2."""
    if not validator.is_type(instance, "object"):
        return
    listed = schema.get("properties", {})
    patterns = [re2_compiled(pattern) for pattern in schema.get("patternProperties", {})]
    extras = [
        name
        for name in instance
        if name not in listed and not any(regex.search(name) is not None for regex in patterns)
    ]
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        joined = ", ".join(repr(extra) for extra in sorted(extras))
        if patterns:
            regexes = ", ".join(repr(each) for each in sorted(schema["patternProperties"]))
            yield ValidationError(
                f"{joined} {'does' if len(extras) == 1 else 'do'} not match any of the regexes: {regexes}"
            )
        else:
            verb = "was" if len(extras) == 1 else "were"
            yield ValidationError(f"Additional properties are not allowed ({joined} {verb} unexpected)")


@functools.cache
def _withre2_compiled(base: type[Validator]) -> type[Validator]:
    """`base` (one draft's validator class) with every regex keyword on RE2."""
    # jsonschema's `extend` is untyped; it returns a validator class like `base`
    return cast(
        "type[Validator]",
        extend(  # type: ignore[no-untyped-call]
            base,
            {
                "pattern": _pattern,
                "patternProperties": _pattern_properties,
                "additionalProperties": _additional_properties,
            },
        ),
    )


class ArgumentValidator:
    __slots__ = ("_fast", "_secret_fields", "_validator")

    def __init__(self, schema: Mapping[str, Any] | None) -> None:
        schema = dict(schema or {"type": "object"})
        # a backend's broken schema must not make its tool uncallable: then nothing is checked here
        self._validator: Any = compile_validator(schema)
        self._fast = fast_check(schema) if self._validator is not None else None
        self._secret_fields = secret_fields(schema)

    def problems(self, arguments: Any) -> list[str]:
        """Every problem with the arguments, each naming its field; empty when valid."""
        if self._validator is None:
            return []
        fast = self._fast
        if fast is not None and fast(arguments):
            return []
        try:
            if self._validator.is_valid(arguments):
                return []
            errors = sorted(self._validator.iter_errors(arguments), key=lambda e: list(e.absolute_path))
        except Unresolvable as error:  # `schema_error` lets none through; kept as a clear refusal, not a 500
            return [f"the tool's input schema cannot be checked: {error}"]
        return [describe_error(error, self._secret_fields) for error in errors]


def describe_error(error: ValidationError, secrets: frozenset[str] = frozenset()) -> str:
    path = ".".join(str(p) for p in error.absolute_path)
    if error.validator == "required":
        missing = error.message.split("'")[1] if "'" in error.message else error.message
        where = f"{path}." if path else ""
        return f"missing required argument '{where}{missing}'"
    if error.validator == "additionalProperties":
        return f"unexpected argument(s) at '{path or '(root)'}': {error.message.split('(')[-1].rstrip(')')}"
    field = path or "(arguments)"
    top = str(error.absolute_path[0]) if error.absolute_path else ""
    if top in secrets:
        return f"argument '{field}' is invalid ({error.validator} {error.validator_value!r} failed)"
    return f"argument '{field}': {error.message}"
