"""The one template language of toolweave: Jinja2 in an immutable sandbox.

Workflows, routers and fan-outs all render arguments with this module, so a
template means the same thing everywhere. Design points:

- Undefined names are errors (`StrictUndefined`): a typo must fail loudly,
  never send an empty string to a backend.
- A string that is exactly one `{{ expr }}` evaluates to the expression's
  native value (numbers stay numbers, lists stay lists); any other string
  renders to text, which `coerce` can then turn into the type a tool's schema
  asks for.
- Templates are compiled once and cached by source; `compile_value`
  precompiles a whole argument tree so the hot path only evaluates.
- Limits bound what data can make a template do: nesting depth, rendered
  size, sequence repetition, exponents, and `range`.
- Error messages never carry parameter values; the values of secret
  parameters are removed from any message that might quote them
  (`toolweave.secrets.redact_text`).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Literal

from jinja2 import StrictUndefined, Template, Undefined, meta, nodes
from jinja2 import TemplateSyntaxError as _JinjaSyntaxError
from jinja2.runtime import Context
from jinja2.sandbox import ImmutableSandboxedEnvironment, SecurityError

MAX_SOURCE_CHARS = 100_000
"""Longest template source accepted."""
MAX_RENDERED_CHARS = 1_000_000
"""Longest text a template may render."""
MAX_DEPTH = 64
"""Deepest nesting of dicts/lists `render_value` walks."""
MAX_SEQUENCE = 100_000
"""Longest string/list `*` may build, and the largest `range`."""
MAX_EXPONENT = 256
"""Largest exponent `**` accepts for bases other than -1, 0 and 1."""

Context_ = Mapping[str, Any]


# -- errors ------------------------------------------------------------------


class TemplateError(ValueError):
    """Any problem with a template: syntax, rendering, limits or coercion."""


class TemplateSyntaxError(TemplateError):
    """The source does not parse; raised when compiling (at load/build time)."""


class TemplateRenderError(TemplateError):
    """Evaluation failed: an undefined name, a sandbox violation, a bad filter input."""


class TemplateLimitError(TemplateRenderError):
    """A size, depth or sequence limit was exceeded."""


class CoercionError(TemplateError):
    """Rendered text cannot be turned into the type a schema asks for."""


# -- the environment -----------------------------------------------------------


def _tojson(value: Any, indent: int | None = None) -> str:
    """Compact JSON (like Go's json.Marshal), not HTML-escaped: values go to tools, not to pages."""
    if indent is None:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    return json.dumps(value, ensure_ascii=False, indent=indent, default=str)


def _fromjson(value: Any) -> Any:
    """Parse JSON text; already-parsed values pass through so pipelines stay forgiving."""
    if not isinstance(value, str | bytes):
        return value
    try:
        return json.loads(value)
    except ValueError as error:
        raise TemplateRenderError(
            f"fromjson: the text is not valid JSON ({_short_json_error(error)})"
        ) from None


def _short_json_error(error: ValueError) -> str:
    if isinstance(error, json.JSONDecodeError):
        return f"{error.msg} at character {error.pos}"
    return "invalid JSON"


def _quote(value: Any) -> str:
    """A double-quoted, escaped string literal (what Go's `quote`/`%q` gives)."""
    return json.dumps(value if isinstance(value, str) else str(value), ensure_ascii=False)


def _safe_range(*args: int) -> range:
    result = range(*args)
    if len(result) > MAX_SEQUENCE:
        raise TemplateLimitError(f"range() of {len(result)} items exceeds the limit of {MAX_SEQUENCE}")
    return result


class _Sandbox(ImmutableSandboxedEnvironment):
    """The sandbox plus two data-friendly rules.

    Dot access on a dict prefers its keys, so `output.items` or `output.keys`
    reach the data a tool returned rather than dict methods. `*` and `**` are
    intercepted so a template cannot build a gigabyte string or a number with
    a million digits.
    """

    intercepted_binops = frozenset({"*", "**"})

    def getattr(self, obj: Any, attribute: str) -> Any:
        if isinstance(obj, dict) and attribute in obj:
            return obj[attribute]
        return super().getattr(obj, attribute)

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        if operator == "*":
            _check_repeat(left, right)
            _check_repeat(right, left)
        elif operator == "**":
            _check_power(left, right)
        return super().call_binop(context, operator, left, right)


def _check_repeat(seq: Any, times: Any) -> None:
    if isinstance(seq, str | list | tuple) and isinstance(times, int) and len(seq) * times > MAX_SEQUENCE:
        raise TemplateLimitError(f"repeating a sequence to more than {MAX_SEQUENCE} items is not allowed")


def _check_power(base: Any, exponent: Any) -> None:
    numbers = isinstance(base, int | float) and isinstance(exponent, int | float)
    if numbers and abs(exponent) > MAX_EXPONENT and abs(base) > 1:
        raise TemplateLimitError(f"exponents above {MAX_EXPONENT} are not allowed")


def _make_environment() -> _Sandbox:
    env = _Sandbox(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)
    env.filters["tojson"] = _tojson
    env.filters["fromjson"] = _fromjson
    env.filters["quote"] = _quote
    env.globals["range"] = _safe_range
    return env


ENV = _make_environment()
"""The shared sandboxed environment. Read-only by convention: do not add filters at runtime."""

GLOBAL_NAMES = frozenset(ENV.globals)
"""Names every template may use besides its context (`range`, `dict`, ...)."""


# -- compiling -----------------------------------------------------------------

_MARKERS = ("{{", "{%", "{#")


def is_template(value: Any) -> bool:
    """True for strings holding template syntax; anything else is a literal."""
    return isinstance(value, str) and any(marker in value for marker in _MARKERS)


class CompiledTemplate:
    """One template source, compiled once.

    `kind` is `static` (no template syntax: renders to itself), `native`
    (exactly one `{{ expr }}`, possibly surrounded by whitespace: evaluates to
    the expression's value) or `text`.
    """

    __slots__ = ("_expression", "_template", "kind", "names", "paths", "source", "tree")

    def __init__(self, source: str) -> None:
        self.source = source
        self.kind: Literal["static", "native", "text"] = "static"
        self._template: Template | None = None
        self._expression: Template | None = None
        self.tree: nodes.Template | None = None
        """The parsed source (constant subexpressions folded by compiling), for analysis only."""
        self.names: frozenset[str] = frozenset()
        """Top-level names the template reads from its context (locals and globals excluded)."""
        self.paths: frozenset[tuple[str, ...]] = frozenset()
        """Attribute/constant-index chains it reads (see `template_paths`)."""
        if not is_template(source):
            return
        if len(source) > MAX_SOURCE_CHARS:
            raise TemplateSyntaxError(f"template is longer than {MAX_SOURCE_CHARS} characters")
        try:
            tree = ENV.parse(source)  # parsed once: analysed, then compiled
        except _JinjaSyntaxError as error:
            raise TemplateSyntaxError(_syntax_message(error, source)) from None
        self.names = frozenset(meta.find_undeclared_variables(tree)) - GLOBAL_NAMES
        paths: set[tuple[str, ...]] = set()
        _collect_paths(tree, paths, inner=False)
        self.paths = frozenset(paths)
        expression = _single_expression(tree)
        if expression is not None:
            assign = nodes.Assign(nodes.Name(_RESULT, "store"), expression, lineno=1)
            self._expression = _compile(nodes.Template([assign], lineno=1))
        self._template = _compile(tree)
        self.tree = tree
        self.kind = "native" if self._expression is not None else "text"

    def render(self, context: Context_) -> Any:
        """The native value for `native` templates, text for `text`, the source for `static`."""
        if self.kind == "native":
            return self.evaluate(context)
        if self.kind == "text":
            return self.render_text(context)
        return self.source

    def evaluate(self, context: Context_) -> Any:
        """Evaluate a `native` template to its value (other kinds render to text)."""
        template = self._expression
        if template is None:
            return self.render_text(context)
        try:
            state = template.new_context(context)
            for _ in template.root_render_func(state):
                pass
            value = state.vars[_RESULT]
            if isinstance(value, Undefined):
                value._fail_with_undefined_error()
        except TemplateError:
            raise
        except Exception as error:  # noqa: BLE001 - any failure inside a template is the template's error
            raise TemplateRenderError(_render_message(error, self.source)) from None
        return _to_native(value)

    def render_text(self, context: Context_) -> str:
        """Render to text, stopping as soon as the output passes `MAX_RENDERED_CHARS`."""
        template = self._template
        if template is None:
            return self.source
        parts: list[str] = []
        size = 0
        try:
            for chunk in template.root_render_func(template.new_context(context)):
                size += len(chunk)
                if size > MAX_RENDERED_CHARS:
                    raise TemplateLimitError(
                        f"template output exceeds {MAX_RENDERED_CHARS} characters (in {_clip(self.source)})"
                    )
                parts.append(chunk)
        except TemplateError:
            raise
        except Exception as error:  # noqa: BLE001 - any failure inside a template is the template's error
            raise TemplateRenderError(_render_message(error, self.source)) from None
        return "".join(parts)


_RESULT = "result"


def _compile(tree: nodes.Template) -> Template:
    """Compile a parsed template; its globals become a plain dict.

    Jinja keeps a template's globals as a ChainMap and copies it into every
    render context; a plain dict makes that copy several times cheaper, which
    is most of the cost of evaluating a small expression.
    """
    template = ENV.from_string(tree)
    template.globals = dict(template.globals)
    return template


def _single_expression(tree: nodes.Template) -> nodes.Expr | None:
    """The expression of a template that is exactly one `{{ expr }}` (surrounding whitespace allowed)."""
    if len(tree.body) != 1 or not isinstance(tree.body[0], nodes.Output):
        return None
    parts = [
        node
        for node in tree.body[0].nodes
        if not (isinstance(node, nodes.TemplateData) and not node.data.strip())
    ]
    if len(parts) != 1 or isinstance(parts[0], nodes.TemplateData):
        return None
    return parts[0]


def _to_native(value: Any) -> Any:
    """Make Jinja's lazy results (ranges, generators, tuples) plain JSON-like values."""
    if isinstance(value, list | dict | str | int | float | bool) or value is None:
        return value
    if isinstance(value, tuple | range | set | frozenset):
        return list(value)
    if hasattr(value, "__next__"):
        items = []
        for item in value:
            items.append(item)
            if len(items) > MAX_SEQUENCE:
                raise TemplateLimitError(f"an expression produced more than {MAX_SEQUENCE} items")
        return items
    return value


def _clip(source: str, limit: int = 120) -> str:
    text = source if len(source) <= limit else source[: limit - 3] + "..."
    return repr(text)


def _syntax_message(error: _JinjaSyntaxError, source: str) -> str:
    line = f" on line {error.lineno}" if error.lineno and "\n" in source.strip() else ""
    return f"template syntax error{line}: {error.message} (in {_clip(source)})"


def _render_message(error: Exception, source: str) -> str:
    if isinstance(error, SecurityError):
        return f"not allowed in a sandboxed template: {error} (in {_clip(source)})"
    detail = str(error) or type(error).__name__
    return f"{detail} (in {_clip(source)})"


@functools.lru_cache(maxsize=8192)
def compile_template(source: str) -> CompiledTemplate:
    """Compile (or fetch from the cache) one template; raises TemplateSyntaxError with a clear message."""
    return CompiledTemplate(source)


def check_syntax(source: str) -> str | None:
    """None when `source` compiles, else the problem (for validators that collect every issue)."""
    try:
        compile_template(source)
    except TemplateError as error:
        return str(error)
    return None


def render_text(source: str, context: Context_) -> str:
    """Render a template to text (a native `{{ expr }}` is rendered as text too)."""
    return compile_template(source).render_text(context)


def render_value(value: Any, context: Context_, _depth: int = 0) -> Any:
    """Render every string in a JSON-like value; `{{ expr }}`-only strings keep their native type."""
    if _depth > MAX_DEPTH:
        raise TemplateLimitError(f"values nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, str):
        return compile_template(value).render(context) if is_template(value) else value
    if isinstance(value, dict):
        return {key: render_value(item, context, _depth + 1) for key, item in value.items()}
    if isinstance(value, list):
        return [render_value(item, context, _depth + 1) for item in value]
    return value


# -- precompiled values (the hot path) -------------------------------------------


class ValueTemplate:
    """A JSON-like value with its templates compiled, ready to render many times.

    Static parts are copied on each render so a caller that mutates the result
    (an executor filling defaults, say) never changes the definition.
    """

    __slots__ = ("_render", "is_static", "sources")

    def __init__(self, render: Callable[[Context_], Any], is_static: bool, sources: tuple[str, ...]) -> None:
        self._render = render
        self.is_static = is_static
        self.sources = sources

    def render(self, context: Context_) -> Any:
        return self._render(context)


def compile_value(value: Any) -> ValueTemplate:
    """Compile every template in a JSON-like value once; raises TemplateSyntaxError (first found)."""
    sources: list[str] = []
    render = _compile_node(value, sources, 0)
    return ValueTemplate(render, not sources, tuple(sources))


def _compile_node(value: Any, sources: list[str], depth: int) -> Callable[[Context_], Any]:
    if depth > MAX_DEPTH:
        raise TemplateSyntaxError(f"values nested deeper than {MAX_DEPTH} levels")
    if isinstance(value, str) and is_template(value):
        sources.append(value)
        return compile_template(value).render
    if isinstance(value, dict):
        before = len(sources)
        items = [(key, _compile_node(item, sources, depth + 1)) for key, item in value.items()]
        if len(sources) == before:
            return _static(value)
        return lambda context: {key: render(context) for key, render in items}
    if isinstance(value, list):
        before = len(sources)
        renders = [_compile_node(item, sources, depth + 1) for item in value]
        if len(sources) == before:
            return _static(value)
        return lambda context: [render(context) for render in renders]
    return _static(value)


def _static(value: Any) -> Callable[[Context_], Any]:
    if isinstance(value, dict | list):
        return lambda _context: copy_json(value)
    return lambda _context: value


def copy_json(value: Any) -> Any:
    """A deep copy of a JSON-like value (much cheaper than `copy.deepcopy`)."""
    if isinstance(value, dict):
        return {key: copy_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [copy_json(item) for item in value]
    return value


def iter_template_strings(value: Any, path: str = "") -> Iterable[tuple[str, str]]:
    """Every template string in a JSON-like value with its relative path (`a.b[2]`)."""
    if isinstance(value, str):
        if is_template(value):
            yield path, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from iter_template_strings(item, f"{path}.{key}" if path else str(key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from iter_template_strings(item, f"{path}[{index}]")


# -- what a template refers to (for validation) -------------------------------------


def template_names(source: str) -> set[str]:
    """Top-level names a template reads from its context (locals and globals excluded)."""
    return set(compile_template(source).names)


def template_paths(source: str) -> set[tuple[str, ...]]:
    """Attribute/constant-index chains a template reads: `steps.fetch.output.text` → ('steps', 'fetch', 'output', 'text').

    Only the longest chain of each access is reported; a dynamic index ends
    the chain there (`steps[x].output` → ('steps',)).
    """
    return set(compile_template(source).paths)


def _collect_paths(node: nodes.Node, found: set[tuple[str, ...]], inner: bool) -> None:
    if isinstance(node, nodes.Getattr | nodes.Getitem):
        if not inner:
            path = _chain(node)
            if path:
                found.add(path)
        _collect_paths(node.node, found, inner=True)
        if isinstance(node, nodes.Getitem):
            _collect_paths(node.arg, found, inner=False)
        return
    if isinstance(node, nodes.Name):
        if not inner and node.ctx == "load":
            found.add((node.name,))
        return
    for child in node.iter_child_nodes():
        _collect_paths(child, found, inner=False)


def _chain(node: nodes.Node) -> tuple[str, ...] | None:
    parts: list[str] = []
    while isinstance(node, nodes.Getattr | nodes.Getitem):
        if isinstance(node, nodes.Getattr):
            parts.append(node.attr)
        elif isinstance(node.arg, nodes.Const) and isinstance(node.arg.value, str | int):
            parts.append(str(node.arg.value))
        else:
            parts.clear()
        node = node.node
    if isinstance(node, nodes.Name) and node.ctx == "load":
        return (node.name, *reversed(parts))
    return None


# -- coercion to a schema type ---------------------------------------------------

_TRUE = frozenset({"true", "yes", "on", "1"})
_FALSE = frozenset({"false", "no", "off", "0"})
_INT_RE = re.compile(r"^[+-]?\d+$")


def schema_types(schema: Any) -> tuple[str, ...]:
    """The JSON Schema `type` of a schema as a tuple (empty when unconstrained)."""
    if not isinstance(schema, Mapping):
        return ()
    kind = schema.get("type")
    if isinstance(kind, str):
        return (kind,)
    if isinstance(kind, list):
        return tuple(item for item in kind if isinstance(item, str))
    return ()


def coerce(value: Any, schema: Any) -> Any:
    """Turn rendered text into the type `schema` asks for; walks into objects and arrays.

    Strings are left alone when the schema allows a string or says nothing;
    non-strings are left alone (native values are already typed). Raises
    CoercionError with a message that never quotes the value.
    """
    if isinstance(value, str):
        return _coerce_text(value, schema_types(schema))
    if isinstance(value, dict) and isinstance(schema, Mapping):
        properties = schema.get("properties")
        if isinstance(properties, Mapping) and any(key in properties for key in value):
            return {key: _coerce_field(key, item, properties.get(key)) for key, item in value.items()}
        return value
    if isinstance(value, list) and isinstance(schema, Mapping) and isinstance(schema.get("items"), Mapping):
        items = schema["items"]
        return [coerce(item, items) for item in value]
    return value


def _coerce_field(key: str, value: Any, schema: Any) -> Any:
    if schema is None:
        return value
    try:
        return coerce(value, schema)
    except CoercionError as error:
        raise CoercionError(f"{key}: {error}") from None


def _coerce_text(text: str, types: tuple[str, ...]) -> Any:
    if not types or "string" in types:
        return text
    stripped = text.strip()
    for kind in types:
        converted = _convert(stripped, kind)
        if converted is not _NO:
            return converted
    expected = " or ".join(types)
    raise CoercionError(f"expected {expected}, but the template rendered text that is not one")


_NO = object()


def _convert(text: str, kind: str) -> Any:
    if kind == "integer":
        if _INT_RE.match(text):
            return int(text)
        number = _float(text)
        return int(number) if isinstance(number, float) and number.is_integer() else _NO
    if kind == "number":
        if _INT_RE.match(text):
            return int(text)
        number = _float(text)
        return _NO if number is None else number
    if kind == "boolean":
        lowered = text.lower()
        return True if lowered in _TRUE else False if lowered in _FALSE else _NO
    if kind == "null":
        return None if text in ("", "null", "None") else _NO
    if kind in ("object", "array"):
        try:
            parsed = json.loads(text)
        except ValueError:
            return _NO
        wanted = dict if kind == "object" else list
        return parsed if isinstance(parsed, wanted) else _NO
    return _NO


def _float(text: str) -> float | None:
    try:
        number = float(text)
    except ValueError:
        return None
    return number if number == number and number not in (float("inf"), float("-inf")) else None
