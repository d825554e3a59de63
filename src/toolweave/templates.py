"""The one template language of toolweave: Jinja2 in an immutable sandbox.

Workflows, routers and fan-outs all render arguments with this module, so a
template means the same thing everywhere. Design points:

- Undefined names are errors (`StrictUndefined`): a typo must fail loudly,
  never send an empty string to a backend.
- A string that is exactly one `{{ expr }}` evaluates to the expression's
  native value (numbers stay numbers, lists stay lists); any other string
  renders to text, which `toolweave.schemas.coerce` can then turn into the type a
  tool's schema asks for.
- Templates are compiled once and cached by source; `compile_value`
  precompiles a whole argument tree so the hot path only evaluates.
- Limits bound what data can make a template do, checked *while* it runs,
  never after: every operator, call, filter and loop iteration is charged to
  the render's budget (`MAX_STEPS` steps, `MAX_WORK_CHARS` characters
  built), and no single value may pass `MAX_VALUE_CHARS` characters,
  `MAX_SEQUENCE` items or `MAX_INT_DIGITS` digits — each checked *before* the
  operation allocates (`center(10**9)` is refused, not attempted).
- `run_bounded` keeps the event loop free: a render first runs inline on a
  small budget (almost every template fits), and only one that outgrows it is
  run again, whole, on a small thread pool (the "compute lane") with the full
  budget. Templates are pure, so the rerun sees exactly what the first saw.
- Error messages never carry parameter values; the values of secret
  parameters are removed from any message that might quote them
  (`toolweave.secrets.redact_text`).
- A value computed from a secret is secret: while a call has secret values
  (`toolweave.secrets.TAINTED`), every filter, method, operator, slice and
  `~` whose input holds one adds its result to them (`_follow`).
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import json
import re
import string
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Literal, ParamSpec, TypeVar

from jinja2 import (
    StrictUndefined,
    Template,
    Undefined,
    filters,
    meta,
    nodes,
    pass_environment,
    pass_eval_context,
)
from jinja2 import TemplateSyntaxError as _JinjaSyntaxError
from jinja2.compiler import CodeGenerator, Frame
from jinja2.exceptions import SecurityError
from jinja2.runtime import Context, Macro
from jinja2.sandbox import ImmutableSandboxedEnvironment

from toolweave.errors import ToolweaveError
from toolweave.secrets import TAINTED, SecretValues

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
MAX_VALUE_CHARS = MAX_RENDERED_CHARS
"""Longest string any one operation (`+`, `~`, `%`, `center`, `replace`, `join`, ...) may build."""
MAX_INT_DIGITS = 4000
"""Most decimal digits an integer built by `*` or `**` may have (Python prints at most 4300)."""
MAX_STEPS = 250_000
"""Operations (calls, filters, operators, loop iterations) one render may take in the compute lane."""
MAX_WORK_CHARS = 50_000_000
"""Characters one render may build in all, summed over its operations, in the compute lane."""
INLINE_STEPS = 1_000
"""Steps a render may take on the event loop before it is moved to the compute lane."""
INLINE_WORK_CHARS = 1_000_000
"""Characters a render may build on the event loop before it is moved to the compute lane."""
LANE_THREADS = 1
"""Threads of the compute lane: heavy renders queue there, never on the event loop. One, because
every lane thread competes with the event loop for the GIL."""
LANE_SLICE_SECONDS = 0.002
"""How long a lane render runs before it pauses to let the event loop have the GIL."""
LANE_PAUSE_SECONDS = 0.002
"""How long it pauses: the lane gets at most half of one core."""

_CLOCK_EVERY = 64
"""Steps between two looks at the clock in the lane (a step is ~1–5 µs)."""

_MACRO_STEPS = 10
"""A macro call costs as much as about ten loop iterations (it builds a frame and a context)."""
_MAX_INT_BITS = int(MAX_INT_DIGITS * 3.3219280948873626)

Context_ = Mapping[str, Any]


# -- errors ------------------------------------------------------------------


class TemplateError(ToolweaveError, ValueError):
    """Any problem with a template: syntax, rendering, limits or coercion."""


class TemplateSyntaxError(TemplateError):
    """The source does not parse; raised when compiling (at load/build time)."""


class TemplateRenderError(TemplateError):
    """Evaluation failed: an undefined name, a sandbox violation, a bad filter input."""


class TemplateLimitError(TemplateRenderError):
    """A size, depth or sequence limit was exceeded."""


# -- the environment -----------------------------------------------------------


def _tojson(value: Any, indent: int | None = None) -> str:
    """Compact JSON (like Go's json.Marshal), not HTML-escaped: values go to tools, not to pages."""
    if indent is None:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
    if isinstance(indent, int) and indent > 16:
        raise TemplateLimitError("tojson indent is limited to 16")
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


# -- the budget: a render's cost, counted while it runs ------------------------------


class _NeedsLane(TemplateLimitError):
    """The inline budget ran out: the render is rerun, whole, in the compute lane (never seen by users)."""


class _Budget:
    """What one render may still spend; every hook charges it before doing the work.

    In the compute lane it also paces the render: after each `LANE_SLICE_SECONDS` of work the
    thread sleeps `LANE_PAUSE_SECONDS`, releasing the GIL. Without that a busy lane thread keeps the
    event loop waiting for the GIL for tens to hundreds of milliseconds (measured: p99 loop lag
    180 ms with two spinning threads on a loaded machine).
    """

    __slots__ = ("chars", "inline", "slice_started", "steps", "until_clock")

    def __init__(self, steps: int, chars: int, *, inline: bool) -> None:
        self.steps = steps
        self.chars = chars
        self.inline = inline
        self.until_clock = _CLOCK_EVERY
        self.slice_started = time.perf_counter()

    def charge(self, steps: int, chars: int) -> None:
        self.steps -= steps
        self.chars -= chars
        if not self.inline:
            self.until_clock -= steps
            if self.until_clock <= 0:
                self._pace()
        if self.steps >= 0 and self.chars >= 0:
            return
        if self.inline:
            raise _NeedsLane("inline budget spent")
        if self.steps < 0:
            raise TemplateLimitError(f"template takes more than {MAX_STEPS} steps (loops, calls, operators)")
        raise TemplateLimitError(f"template builds more than {MAX_WORK_CHARS} characters in all")

    def _pace(self) -> None:
        self.until_clock = _CLOCK_EVERY
        now = time.perf_counter()
        if now - self.slice_started >= LANE_SLICE_SECONDS:
            time.sleep(LANE_PAUSE_SECONDS)
            self.slice_started = time.perf_counter()


_ACTIVE: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar(
    "toolweave_template_budget", default=None
)


def _charge(steps: int = 1, chars: int = 0) -> None:
    budget = _ACTIVE.get()
    if budget is not None:
        budget.charge(steps, chars)


def _budgeted(run: Callable[[], _T]) -> _T:
    """Run one render under the active budget, or under a fresh full one when none is active."""
    if _ACTIVE.get() is not None:
        return run()
    token = _ACTIVE.set(_Budget(MAX_STEPS, MAX_WORK_CHARS, inline=False))
    try:
        return run()
    finally:
        _ACTIVE.reset(token)


_T = TypeVar("_T")
_P = ParamSpec("_P")
_LANE = ThreadPoolExecutor(max_workers=LANE_THREADS, thread_name_prefix="toolweave-templates")


async def run_bounded(render: Callable[_P, _T], *args: _P.args, **kwargs: _P.kwargs) -> _T:
    """`render(*args)` (anything that renders templates and is otherwise pure) without stalling the loop.

    It runs inline on `INLINE_STEPS` / `INLINE_WORK_CHARS`; a render that needs more starts again
    from scratch in the compute lane with the full budget, so one tenant's heavy template costs
    the others nothing but a share of the CPU.
    """
    token = _ACTIVE.set(_Budget(INLINE_STEPS, INLINE_WORK_CHARS, inline=True))
    try:
        return render(*args, **kwargs)
    except _NeedsLane:
        pass
    finally:
        _ACTIVE.reset(token)
    call = functools.partial(_in_lane, functools.partial(render, *args, **kwargs), TAINTED.get())
    return await asyncio.get_running_loop().run_in_executor(_LANE, call)


def _in_lane(run: Callable[[], _T], tainted: SecretValues | None) -> _T:
    token = _ACTIVE.set(_Budget(MAX_STEPS, MAX_WORK_CHARS, inline=False))
    following = TAINTED.set(tainted)  # the lane thread has no context of the call: the secrets go along
    try:
        return run()
    finally:
        TAINTED.reset(following)
        _ACTIVE.reset(token)


def _follow(result: _T, *inputs: Any) -> _T:
    """A string computed from a secret value is a secret value too (`secrets.SecretValues`): the
    sandbox calls this with each filter's, method's, operator's, slice's and `~`'s inputs and
    result. Looking costs the render's budget (characters searched times values followed)."""
    tainted = TAINTED.get()
    if tainted is None or not isinstance(result, str | list | tuple) or not len(tainted):
        return result
    _charge(0, len(tainted) * sum(len(item) for item in inputs if isinstance(item, str)))
    if any(tainted.holds(item) for item in inputs):
        tainted.add(result)
    return result


# -- checks made before an operation allocates ------------------------------------------


def _too_long(size: int, what: str) -> None:
    if size > MAX_VALUE_CHARS:
        raise TemplateLimitError(f"{what} would build {size} characters; the limit is {MAX_VALUE_CHARS}")
    _charge(1, size)


def _check_width(width: Any, what: str) -> None:
    if isinstance(width, int) and width > MAX_VALUE_CHARS:
        raise TemplateLimitError(f"{what} width {width} exceeds the limit of {MAX_VALUE_CHARS}")


def _check_int(value: Any) -> None:
    if isinstance(value, int) and value.bit_length() > _MAX_INT_BITS:
        raise TemplateLimitError(f"integers are limited to {MAX_INT_DIGITS} digits")


def _size(value: Any) -> int:
    return len(value) if isinstance(value, str | list | tuple) else 0


def _check_repeat(seq: Any, times: Any) -> None:
    if isinstance(seq, str | list | tuple) and isinstance(times, int):
        if len(seq) * times > MAX_SEQUENCE:
            raise TemplateLimitError(f"repeating a sequence to more than {MAX_SEQUENCE} items is not allowed")
        _charge(1, len(seq) * max(times, 0))


def _check_power(base: Any, exponent: Any) -> None:
    numbers = isinstance(base, int | float) and isinstance(exponent, int | float)
    if numbers and abs(exponent) > MAX_EXPONENT and abs(base) > 1:
        raise TemplateLimitError(f"exponents above {MAX_EXPONENT} are not allowed")
    integers = isinstance(base, int) and isinstance(exponent, int)
    if integers and exponent > 0 and base.bit_length() * exponent > _MAX_INT_BITS:
        raise TemplateLimitError(f"integers are limited to {MAX_INT_DIGITS} digits")


def _check_product(left: Any, right: Any) -> None:
    _check_repeat(left, right)
    _check_repeat(right, left)
    integers = isinstance(left, int) and isinstance(right, int)
    if integers and left.bit_length() + right.bit_length() > _MAX_INT_BITS:
        raise TemplateLimitError(f"integers are limited to {MAX_INT_DIGITS} digits")


_PRINTF_FIELD = re.compile(r"%(?:\([^)]*\))?[-#0 +]*(\*|\d+)?(?:\.(\*|\d+))?")


def _check_printf(template: Any) -> None:
    """`"%999999999d" % 1` would allocate a gigabyte: widths and precisions are checked first."""
    if not isinstance(template, str):
        return
    for match in _PRINTF_FIELD.finditer(template):
        for number in match.groups():
            if number == "*":
                raise TemplateLimitError("'%*' (a width taken from the arguments) is not allowed")
            if number is not None and int(number) > MAX_VALUE_CHARS:
                raise TemplateLimitError(f"format width {number} exceeds the limit of {MAX_VALUE_CHARS}")


_SPEC_NUMBER = re.compile(r"\d+")


def _check_format_spec(template: str) -> None:
    """`"{:>999999999}".format(1)`: every width and precision of a `str.format` template is checked."""
    try:
        fields = list(string.Formatter().parse(template))
    except ValueError:
        return  # the format call itself reports it
    for _literal, _field, spec, _conversion in fields:
        if not spec:
            continue
        if "{" in spec:
            raise TemplateLimitError("nested fields in a format spec are not allowed")
        for number in _SPEC_NUMBER.findall(spec):
            if int(number) > MAX_VALUE_CHARS:
                raise TemplateLimitError(f"format width {number} exceeds the limit of {MAX_VALUE_CHARS}")


def _check_binop(operator: str, left: Any, right: Any) -> None:
    _charge()
    if operator == "*":
        _check_product(left, right)
    elif operator == "**":
        _check_power(left, right)
    elif operator == "+":
        if isinstance(left, str | list | tuple) and isinstance(right, str | list | tuple):
            _too_long(len(left) + len(right), "'+'")
    elif operator == "%":
        _check_printf(left)


def _check_str_method(method: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[Any, ...]:
    """Bound the output of the str methods that can build more than their input; returns the args
    (a `join` argument is materialized once, so it is measured and then joined)."""
    owner = getattr(method, "__self__", None)
    if not isinstance(owner, str):
        return args
    name = getattr(method, "__name__", "")
    if name in ("center", "ljust", "rjust", "zfill"):
        width = args[0] if args else kwargs.get("width", 0)
        _check_width(width, f"'{name}'")
        _charge(1, width if isinstance(width, int) else 0)
    elif name == "expandtabs":
        size = args[0] if args else kwargs.get("tabsize", 8)
        if isinstance(size, int):
            _too_long(len(owner) + owner.count("\t") * max(size, 0), "'expandtabs'")
    elif name == "replace":
        _check_replace(owner, *args[:3])
    elif name == "join" and args:
        items = list(args[0])
        _too_long(sum(_size(item) for item in items) + len(owner) * max(len(items) - 1, 0), "'join'")
        return (items, *args[1:])
    elif name == "translate" and args and isinstance(args[0], Mapping):
        longest = max((_size(value) for value in args[0].values()), default=1)
        _too_long(len(owner) * max(longest, 1), "'translate'")
    return args


def _check_replace(text: Any, old: Any = None, new: Any = None, count: Any = None) -> None:
    if not (isinstance(text, str) and isinstance(old, str) and isinstance(new, str)):
        return
    found = len(text) + 1 if old == "" else text.count(old)
    if isinstance(count, int) and count >= 0:
        found = min(found, count)
    _too_long(len(text) + found * (len(new) - len(old)), "'replace'")


def _safe_range(*args: int) -> range:
    result = range(*args)
    if len(result) > MAX_SEQUENCE:
        raise TemplateLimitError(f"range() of {len(result)} items exceeds the limit of {MAX_SEQUENCE}")
    return result


def _counted(iterable: Any) -> Iterator[Any]:
    """Every `{% for %}` iterates through this: each iteration is a step of the budget."""
    for item in iterable:
        _charge()
        yield item


def _concat(parts: Iterable[Any]) -> str:
    """`a ~ b`: measured before it is joined."""
    texts = [part if isinstance(part, str) else str(part) for part in parts]
    _too_long(sum(len(text) for text in texts), "'~'")
    return "".join(texts)


class _BoundedCodeGenerator(CodeGenerator):
    """Jinja's code generator, with `~` going through `environment.tw_concat` (a size check) and
    slices through `environment.getitem` (Jinja slices inline, where no secret can be followed)."""

    def visit_Getitem(self, node: nodes.Getitem, frame: Frame) -> None:
        if not isinstance(node.arg, nodes.Slice):
            super().visit_Getitem(node, frame)
            return
        self.write("environment.getitem(")
        self.visit(node.node, frame)
        self.write(", slice(")
        for position, part in enumerate((node.arg.start, node.arg.stop, node.arg.step)):
            self.write(", " if position else "")
            if part is None:
                self.write("None")
            else:
                self.visit(part, frame)
        self.write("))")

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        self.write("environment.tw_concat((")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


class _Sandbox(ImmutableSandboxedEnvironment):
    """The sandbox plus two data-friendly rules and the budget.

    Dot access on a dict prefers its keys, so `output.items` or `output.keys`
    reach the data a tool returned rather than dict methods. Every call,
    operator and `~` is charged to the render's budget and checked before it
    runs, so a template cannot build a gigabyte string or a number with a
    million digits.
    """

    code_generator_class = _BoundedCodeGenerator
    intercepted_binops = frozenset({"*", "**", "+", "%"})

    def getattr(self, obj: Any, attribute: str) -> Any:
        if isinstance(obj, dict) and attribute in obj:
            return obj[attribute]
        return super().getattr(obj, attribute)

    def getitem(self, obj: Any, argument: Any) -> Any:
        item = super().getitem(obj, argument)
        return _follow(item, obj) if isinstance(obj, str) and TAINTED.get() is not None else item

    def call_binop(self, context: Context, operator: str, left: Any, right: Any) -> Any:
        _check_binop(operator, left, right)
        result = super().call_binop(context, operator, left, right)
        return _follow(result, left, right) if TAINTED.get() is not None else result

    def call(__self, __context: Context, __obj: Any, *args: Any, **kwargs: Any) -> Any:
        _charge(_MACRO_STEPS if isinstance(__obj, Macro) else 1)
        args = _check_str_method(__obj, args, kwargs)
        result = super().call(__context, __obj, *args, **kwargs)
        if TAINTED.get() is None:
            return result
        return _follow(result, getattr(__obj, "__self__", None), *args, *kwargs.values())

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        wrapped = super().wrap_str_format(value)
        if wrapped is not None:
            _check_format_spec(value.__self__)
        return wrapped

    @staticmethod
    def tw_concat(parts: Iterable[Any]) -> str:
        if TAINTED.get() is None:
            return _concat(parts)
        items = tuple(parts)
        return _follow(_concat(items), *items)


# -- filters that could build more than they are given, checked first ----------------------


def _center(value: Any, width: int = 80) -> str:
    _check_width(width, "'center'")
    _charge(1, width if isinstance(width, int) else 0)
    return filters.do_center(value, width)


def _indent(text: Any, width: int | str = 4, first: bool = False, blank: bool = False) -> str:
    pad = width if isinstance(width, str) else " " * min(max(width, 0), MAX_VALUE_CHARS + 1)
    source = str(text)
    _too_long(len(source) + (source.count("\n") + 1) * len(pad), "'indent'")
    return filters.do_indent(text, width, first, blank)


def _join(eval_ctx: Any, value: Iterable[Any], d: str = "", attribute: str | int | None = None) -> str:
    items = list(value)
    _too_long(sum(len(str(item)) for item in items) + len(d) * max(len(items) - 1, 0), "'join'")
    joined: str = filters.do_join(eval_ctx, items, d, attribute)
    return joined


def _replace(eval_ctx: Any, s: Any, old: Any, new: Any, count: int | None = None) -> str:
    _check_replace(str(s), str(old), str(new), count)
    return filters.do_replace(eval_ctx, s, old, new, count)


def _format(value: Any, *args: Any, **kwargs: Any) -> str:
    _check_printf(value)
    return filters.do_format(value, *args, **kwargs)


def _wordwrap(environment: Any, s: str, width: int = 79, break_long_words: bool = True, wrapstring: str | None = None, break_on_hyphens: bool = True) -> str:  # fmt: skip
    if wrapstring is not None:
        _too_long(len(s) * (1 + len(wrapstring)), "'wordwrap'")
    return filters.do_wordwrap(environment, s, width, break_long_words, wrapstring, break_on_hyphens)


def _batch(value: Iterable[Any], linecount: int, fill_with: Any = None) -> Iterator[list[Any]]:
    if fill_with is not None and isinstance(linecount, int) and linecount > MAX_SEQUENCE:
        raise TemplateLimitError(f"batch of more than {MAX_SEQUENCE} items is not allowed")
    return filters.do_batch(value, linecount, fill_with)


def _slice(value: Any, slices: int, fill_with: Any = None) -> Iterator[list[Any]]:
    if isinstance(slices, int) and slices > MAX_SEQUENCE:
        raise TemplateLimitError(f"slice into more than {MAX_SEQUENCE} parts is not allowed")
    sliced: Iterator[list[Any]] = filters.do_slice(value, slices, fill_with)
    return sliced


_BOUNDED_FILTERS: dict[str, Callable[..., Any]] = {
    "center": _center,
    "indent": _indent,
    "join": pass_eval_context(_join),
    "replace": pass_eval_context(_replace),
    "format": _format,
    "wordwrap": pass_environment(_wordwrap),
    "batch": _batch,
    "slice": _slice,
}


def _charged(run: Callable[..., Any]) -> Callable[..., Any]:
    """A filter that costs a step, and whose text result counts toward the characters built."""

    @functools.wraps(run)
    def filtered(*args: Any, **kwargs: Any) -> Any:
        _charge()
        result = run(*args, **kwargs)
        if isinstance(result, str):
            _charge(0, len(result))
        if TAINTED.get() is None:
            return result
        return _follow(result, *args, *kwargs.values())

    return filtered


def _make_environment() -> _Sandbox:
    env = _Sandbox(undefined=StrictUndefined, autoescape=False, keep_trailing_newline=True)
    env.filters.update(_BOUNDED_FILTERS)
    env.filters["tojson"] = _tojson
    env.filters["fromjson"] = _fromjson
    env.filters["quote"] = _quote
    env.filters = {name: _charged(run) for name, run in env.filters.items()}
    env.filters[_LOOP_FILTER] = _counted
    env.globals["range"] = _safe_range
    del env.globals["lipsum"]  # lipsum(n=10**6) is a CPU bomb nobody needs in tool arguments
    return env


_LOOP_FILTER = "tw_counted"


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
        _count_loops(tree)
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
        return _budgeted(lambda: self._evaluate(context))

    def render_text(self, context: Context_) -> str:
        """Render to text, stopping as soon as the output passes `MAX_RENDERED_CHARS`."""
        return _budgeted(lambda: self._render_text(context))

    def _evaluate(self, context: Context_) -> Any:
        template = self._expression
        if template is None:
            return self._render_text(context)
        try:
            state = template.new_context(_as_dict(context))
            for _ in template.root_render_func(state):
                pass
            value = state.vars[_RESULT]
            if isinstance(value, Undefined):
                value._fail_with_undefined_error()
        except TemplateError:
            raise
        except Exception as error:  # noqa: BLE001 - any failure inside a template is the template's error
            raise TemplateRenderError(_render_message(error, self.source)) from None
        native = _to_native(value)
        _check_native_size(native, self.source)
        return native

    def _render_text(self, context: Context_) -> str:
        template = self._template
        if template is None:
            return self.source
        parts: list[str] = []
        size = 0
        try:
            for chunk in template.root_render_func(template.new_context(_as_dict(context))):
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


def _count_loops(tree: nodes.Template) -> None:
    """Route every `{% for %}`'s iterable through the counting filter, so each iteration is charged."""
    for loop in tree.find_all(nodes.For):
        loop.iter = nodes.Filter(loop.iter, _LOOP_FILTER, [], [], None, None, lineno=loop.lineno)


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


def _check_native_size(value: Any, source: str) -> None:
    """A lone `{{ expr }}` is held to the same output limit as rendered text (strings and items counted)."""
    if not isinstance(value, str | list | dict):
        return  # numbers, booleans, None: the common case, nothing to measure
    size = 0
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            size += len(item)
        elif isinstance(item, dict):
            size += len(item)
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            size += len(item)
            stack.extend(item)
        else:
            size += 1
        if size > MAX_RENDERED_CHARS:
            raise TemplateLimitError(
                f"template output exceeds {MAX_RENDERED_CHARS} characters (in {_clip(source)})"
            )


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


def _as_dict(context: Context_) -> dict[str, Any]:
    """The context as Jinja's `new_context` takes it (it copies it anyway); a dict is passed as is."""
    return context if isinstance(context, dict) else dict(context)


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
