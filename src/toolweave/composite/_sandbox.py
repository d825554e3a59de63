"""A small Jinja2 sandbox shared by routers and fan-outs.

Templates are compiled once, when a definition is built, and only rendered
per call: parsing a template costs far more than rendering it. Every template
runs in an `ImmutableSandboxedEnvironment`, so a definition can read the call's
arguments but never reach Python internals or mutate what it is given.

This is a private stand-in for the gateway-wide `toolweave.templates`; the two
follow the same rules (a string that is exactly one `{{ expr }}` keeps the
expression's native type) so they can be unified without changing behaviour.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, Final

from jinja2 import ChainableUndefined, TemplateSyntaxError, Undefined, nodes
from jinja2.meta import find_undeclared_variables
from jinja2.sandbox import ImmutableSandboxedEnvironment

Renderer = Callable[[Mapping[str, Any]], Any]
"""A compiled template: context → rendered value."""

PARAMS_NAMES: Final = frozenset({"params", "arguments"})
"""Names under which the call's arguments are also reachable (`{{ params.url }}`)."""

_ENV: Final = ImmutableSandboxedEnvironment(
    undefined=ChainableUndefined, autoescape=False, keep_trailing_newline=True
)
_SINGLE_EXPRESSION: Final = re.compile(r"^\s*\{\{((?:(?!\}\}|\{\{).)*)\}\}\s*$", re.DOTALL)
_TEMPLATE_MARKERS: Final = ("{{", "{%", "{#")


class _Omit:
    """Marks a single-expression value that is undefined: its key is left out."""

    def __repr__(self) -> str:
        return "OMIT"


OMIT: Final = _Omit()


class TemplateError(ValueError):
    """A template that does not parse; the message says where and why."""


def is_template(value: str) -> bool:
    return any(marker in value for marker in _TEMPLATE_MARKERS)


def _syntax_message(error: TemplateSyntaxError) -> str:
    return f"invalid template (line {error.lineno}): {error.message}"


def compile_text(source: str) -> Callable[[Mapping[str, Any]], str]:
    """Compile a text template; raises TemplateError when it does not parse."""
    try:
        template = _ENV.from_string(source)
    except TemplateSyntaxError as error:
        raise TemplateError(_syntax_message(error)) from None
    return template.render


def check_template(source: str) -> str | None:
    """The syntax problem of a template, or None when it parses."""
    try:
        _ENV.parse(source)
    except TemplateSyntaxError as error:
        return _syntax_message(error)
    return None


def compile_value(value: Any) -> Renderer:
    """Compile a JSON-like value whose strings may be templates.

    A string that is exactly one `{{ expr }}` renders to the expression's
    native value (a number stays a number); when that value is undefined the
    enclosing key is omitted, so the target's own default applies.
    """
    if isinstance(value, str):
        return _compile_string(value)
    if isinstance(value, Mapping):
        items = [(key, compile_value(item)) for key, item in value.items()]
        return lambda context: _render_mapping(items, context)
    if isinstance(value, list):
        renderers = [compile_value(item) for item in value]
        return lambda context: [_none_if_omitted(render(context)) for render in renderers]
    return lambda _context: value


def _render_mapping(items: list[tuple[str, Renderer]], context: Mapping[str, Any]) -> dict[str, Any]:
    rendered = {}
    for key, render in items:
        result = render(context)
        if result is not OMIT:
            rendered[key] = result
    return rendered


def _none_if_omitted(value: Any) -> Any:
    return None if value is OMIT else value


def _compile_string(source: str) -> Renderer:
    if not is_template(source):
        return lambda _context: source
    single = _SINGLE_EXPRESSION.match(source)
    if single is not None:
        try:
            expression = _ENV.compile_expression(single.group(1), undefined_to_none=False)
        except TemplateSyntaxError as error:
            raise TemplateError(_syntax_message(error)) from None
        return lambda context: _native(expression(context))
    return compile_text(source)


def _native(value: Any) -> Any:
    return OMIT if isinstance(value, Undefined) else value


def referenced_names(value: Any) -> set[str] | None:
    """The argument names the templates in `value` read, or None when that cannot be told.

    `{{ query }}`, `{{ params.query }}` and `{{ params['query'] }}` all name
    `query`; a use of `params` as a whole (`{{ params | tojson }}`) could read
    anything, hence None.
    """
    names: set[str] = set()
    for source in _template_strings(value):
        found = _names_in(source)
        if found is None:
            return None
        names |= found
    return names


def _template_strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value] if is_template(value) else []
    if isinstance(value, Mapping):
        return [source for item in value.values() for source in _template_strings(item)]
    if isinstance(value, list):
        return [source for item in value for source in _template_strings(item)]
    return []


def _names_in(source: str) -> set[str] | None:
    try:
        tree = _ENV.parse(source)
    except TemplateSyntaxError:
        return None
    names = {name for name in find_undeclared_variables(tree) if name not in _ENV.globals}
    if not names & PARAMS_NAMES:
        return names
    attributes = _params_attributes(tree)
    if attributes is None:
        return None
    return (names - PARAMS_NAMES) | attributes


def _params_attributes(tree: nodes.Template) -> set[str] | None:
    """Attributes read from `params` / `arguments`; None when they are used some other way."""
    uses = [node for node in tree.find_all(nodes.Name) if node.name in PARAMS_NAMES and node.ctx == "load"]
    attributes: set[str] = set()
    resolved = 0
    for node in tree.find_all((nodes.Getattr, nodes.Getitem)):
        target = node.node
        if not (isinstance(target, nodes.Name) and target.name in PARAMS_NAMES):
            continue
        if isinstance(node, nodes.Getattr):
            attributes.add(node.attr)
        elif isinstance(node.arg, nodes.Const) and isinstance(node.arg.value, str):
            attributes.add(node.arg.value)
        else:
            return None
        resolved += 1
    return attributes if resolved == len(uses) else None


def single_expression_name(source: Any) -> str | None:
    """`query` for `{{ query }}` / `{{ params.query }}`: a value that forwards one argument as-is."""
    if not isinstance(source, str):
        return None
    single = _SINGLE_EXPRESSION.match(source)
    if single is None:
        return None
    try:
        expression = _ENV.parse(source).body[0]
    except (TemplateSyntaxError, IndexError):
        return None
    if not isinstance(expression, nodes.Output) or len(expression.nodes) != 1:
        return None
    node = expression.nodes[0]
    if isinstance(node, nodes.Name) and node.name not in PARAMS_NAMES:
        return node.name
    if isinstance(node, nodes.Getattr) and isinstance(node.node, nodes.Name) and node.node.name in PARAMS_NAMES:
        return node.attr
    return None


def arguments_context(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """What templates see: each argument by name, and all of them as `params` / `arguments`."""
    plain = dict(arguments)
    return {**plain, "params": plain, "arguments": plain}
