"""Translating ToolHive's Go-template expressions into the Jinja2 that toolweave runs.

Supported: field chains rooted at `.params`, `.steps`, `.workflow` and
`.forEach`; string, raw-string, number, `true`/`false`/`nil` literals;
`if` / `else if` / `else` / `end`; pipelines (`a | f b` is `f b a`) and
parenthesised pipelines with field access after them; the functions `eq ne
lt le gt ge and or not index len printf json fromJson quote`; comments and
`{{-`/`-}}` whitespace trimming. Anything else (`range`, `with`, variables,
`define`, other functions...) raises GoTemplateError naming the construct, so
an import never silently changes meaning.

A source that is exactly one action translates to exactly one `{{ expr }}`,
so Go's `"{{.params.replicas}}"` keeps its native type in toolweave.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Callable
from dataclasses import dataclass

from toolweave.composite.errors import GoTemplateError

ROOTS = frozenset({"params", "steps", "workflow", "forEach"})
_JINJA_KEYWORDS = frozenset(
    {"true", "false", "none", "True", "False", "None", "and", "or", "not", "in", "is", "if", "else"}
)
_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_FIELDS = re.compile(r"(?:\.[A-Za-z_][A-Za-z0-9_]*)+")
_NUMBER = re.compile(
    r"[+-]?(?:0[xX][0-9a-fA-F_]+|0[bB][01_]+|0[oO][0-7_]+|(?:\d[\d_]*)?\.?\d[\d_]*(?:[eE][+-]?\d+)?)"
)
_WHITESPACE = " \t\r\n"
_UNSUPPORTED_KEYWORDS = {
    "range": "'range' loops",
    "with": "'with' blocks",
    "define": "'define' (named templates)",
    "template": "'template' (named templates)",
    "block": "'block' (named templates)",
    "break": "'break'",
    "continue": "'continue'",
}
_PRINTF_VERBS = re.compile(r"%(?P<flags>[-+# 0]*)(?P<width>\d*)(?:\.(?P<precision>\d+))?(?P<verb>[a-zA-Z%])")


@dataclass(frozen=True, slots=True)
class _Token:
    kind: str
    """field, dot, lparen, rparen, pipe, string, number, ident, var, assign, char"""
    value: str | tuple[str, ...]
    adjacent: bool = False
    """No whitespace before it (a field right after `)` accesses the parenthesised value)."""


def translate(source: str) -> str:
    """Translate one Go template string to Jinja; raises GoTemplateError naming what is not supported."""
    pieces: list[str] = []
    blocks: list[str] = []
    position = 0
    trim_next = False
    while True:
        start = source.find("{{", position)
        text = source[position : start if start >= 0 else len(source)]
        if trim_next:
            text = text.lstrip(_WHITESPACE)
        if start < 0:
            pieces.append(_escape_text(text, at_end=True))
            break
        body_start, trim_before = _open_action(source, start)
        if trim_before:
            text = text.rstrip(_WHITESPACE)
        pieces.append(_escape_text(text, at_end=False))
        tokens, position, trim_next, is_comment = _lex_action(source, body_start)
        if not is_comment:
            pieces.append(_action(tokens, blocks, source))
    if blocks:
        raise GoTemplateError(f"an {{{{if}}}} is never closed with {{{{end}}}} in {source!r}")
    return "".join(pieces)


def _open_action(source: str, start: int) -> tuple[int, bool]:
    """Where an action's body starts, and whether it trims the text before it (`{{- `)."""
    body = start + 2
    if source.startswith("-", body) and body + 1 < len(source) and source[body + 1] in _WHITESPACE:
        return body + 2, True
    return body, False


def _escape_text(text: str, at_end: bool) -> str:
    """Literal text stays literal in Jinja: raw-wrap anything Jinja would read as syntax."""
    if not text:
        return text
    risky = "{%" in text or "{#" in text or (text.endswith("{") and not at_end)
    return f"{{% raw %}}{text}{{% endraw %}}" if risky else text


# -- lexing ------------------------------------------------------------------------


def _lex_action(source: str, position: int) -> tuple[list[_Token], int, bool, bool]:
    """Tokens of one action, the index after its `}}`, whether it trims after (`-}}`), whether it is a comment."""
    rest = source[position:].lstrip(" \t")
    if rest.startswith("/*"):
        return _skip_comment(source, source.index("/*", position))
    tokens: list[_Token] = []
    index = position
    spaced = True
    while index < len(source):
        char = source[index]
        if char in _WHITESPACE:
            index += 1
            spaced = True
            continue
        if source.startswith("}}", index):
            return tokens, index + 2, False, False
        if source.startswith("-}}", index) and spaced:
            return tokens, index + 3, True, False
        token, index = _next_token(source, index, not spaced)
        tokens.append(token)
        spaced = False
    raise GoTemplateError(f"an action is not closed with '}}}}' in {source!r}")


def _skip_comment(source: str, start: int) -> tuple[list[_Token], int, bool, bool]:
    end = source.find("*/", start + 2)
    if end < 0:
        raise GoTemplateError(f"a comment is not closed with '*/' in {source!r}")
    after = end + 2
    while after < len(source) and source[after] in " \t":
        after += 1
    if source.startswith("-}}", after):
        return [], after + 3, True, True
    if source.startswith("}}", after):
        return [], after + 2, False, True
    raise GoTemplateError(f"a comment must end its action ('*/}}}}') in {source!r}")


def _next_token(source: str, index: int, adjacent: bool) -> tuple[_Token, int]:
    char = source[index]
    simple = {"(": "lparen", ")": "rparen", "|": "pipe"}
    if char in simple:
        return _Token(simple[char], char, adjacent), index + 1
    if char == ".":
        match = _FIELDS.match(source, index)
        if match:
            names = tuple(match.group(0)[1:].split("."))
            return _Token("field", names, adjacent), match.end()
        return _Token("dot", ".", adjacent), index + 1
    if char == '"':
        return _lex_string(source, index)
    if char == "`":
        end = source.find("`", index + 1)
        if end < 0:
            raise GoTemplateError(f"a raw string is not closed in {source!r}")
        return _Token("string", source[index + 1 : end]), end + 1
    if char == "'":
        return _Token("char", "'"), index + 1
    if char == "$":
        match = _IDENT.match(source, index + 1)
        return _Token("var", "$" + (match.group(0) if match else "")), match.end() if match else index + 1
    if source.startswith(":=", index) or char == "=":
        return _Token("assign", "="), index + (2 if char == ":" else 1)
    match = _NUMBER.match(source, index)
    if match and match.group(0) not in ("+", "-", ""):
        return _Token("number", match.group(0)), match.end()
    match = _IDENT.match(source, index)
    if match:
        return _Token("ident", match.group(0), adjacent), match.end()
    raise GoTemplateError(f"unexpected character {char!r} in {source!r}")


def _lex_string(source: str, index: int) -> tuple[_Token, int]:
    end = index + 1
    while end < len(source):
        if source[end] == "\\":
            end += 2
            continue
        if source[end] == '"':
            literal = source[index : end + 1]
            try:
                value = json.loads(literal)
            except ValueError:
                value = literal[1:-1].encode("latin-1", "backslashreplace").decode("unicode-escape")
            return _Token("string", value), end + 1
        end += 1
    raise GoTemplateError(f"a string is not closed in {source!r}")


# -- actions and pipelines ---------------------------------------------------------------


def _action(tokens: list[_Token], blocks: list[str], source: str) -> str:
    if not tokens:
        raise GoTemplateError(f"an empty action '{{{{}}}}' in {source!r}")
    head = tokens[0]
    if head.kind == "ident" and head.value in _UNSUPPORTED_KEYWORDS:
        raise GoTemplateError(
            f"{_UNSUPPORTED_KEYWORDS[str(head.value)]} cannot be translated (in {source!r})"
        )
    if head.kind == "ident" and head.value == "if":
        blocks.append("if")
        return "{% if " + _pipeline_expr(tokens[1:], source) + " %}"
    if head.kind == "ident" and head.value == "else":
        if not blocks:
            raise GoTemplateError(f"{{{{else}}}} without {{{{if}}}} in {source!r}")
        if len(tokens) > 1:
            if not (tokens[1].kind == "ident" and tokens[1].value == "if"):
                raise GoTemplateError(f"'else {tokens[1].value}' cannot be translated (in {source!r})")
            return "{% elif " + _pipeline_expr(tokens[2:], source) + " %}"
        return "{% else %}"
    if head.kind == "ident" and head.value == "end":
        if not blocks:
            raise GoTemplateError(f"{{{{end}}}} without {{{{if}}}} in {source!r}")
        blocks.pop()
        return "{% endif %}"
    return "{{ " + _pipeline_expr(tokens, source) + " }}"


def _pipeline_expr(tokens: list[_Token], source: str) -> str:
    parser = _Parser(tokens, source)
    expr = parser.pipeline()
    if parser.position != len(tokens):
        raise GoTemplateError(f"unexpected {parser.describe(tokens[parser.position])} in {source!r}")
    return expr


@dataclass(slots=True)
class _Operand:
    expr: str
    function: str | None = None


class _Parser:
    """Recursive descent over one action's tokens, producing a Jinja expression."""

    def __init__(self, tokens: list[_Token], source: str) -> None:
        self.tokens = tokens
        self.source = source
        self.position = 0

    def peek(self) -> _Token | None:
        return self.tokens[self.position] if self.position < len(self.tokens) else None

    def fail(self, what: str) -> GoTemplateError:
        return GoTemplateError(f"{what} cannot be translated (in {self.source!r})")

    def describe(self, token: _Token) -> str:
        return f"{token.kind} {token.value!r}" if token.kind != "field" else "." + ".".join(token.value)

    def pipeline(self) -> str:
        expr: str | None = None
        while True:
            expr = self.command(expr)
            token = self.peek()
            if token is None or token.kind != "pipe":
                break
            self.position += 1
        if expr is None:
            raise GoTemplateError(f"an empty pipeline in {self.source!r}")
        return expr

    def command(self, piped: str | None) -> str:
        operands: list[_Operand] = []
        while (token := self.peek()) is not None and token.kind not in ("pipe", "rparen"):
            operands.append(self.operand())
        if not operands:
            raise GoTemplateError(f"an empty command in {self.source!r}")
        head, args = operands[0], operands[1:]
        if head.function is None:
            if args or piped is not None:
                raise self.fail("passing arguments to a value that is not a function")
            return head.expr
        for arg in args:
            if arg.function is not None:
                raise self.fail(f"the function {arg.function!r} used as an argument without parentheses")
        values = [arg.expr for arg in args] + ([piped] if piped is not None else [])
        return _call(head.function, values, self)

    def operand(self) -> _Operand:
        token = self.tokens[self.position]
        self.position += 1
        if token.kind == "field":
            return _Operand(_field_expr(token.value, self))  # type: ignore[arg-type]
        if token.kind == "string":
            return _Operand(repr(token.value))
        if token.kind == "number":
            return _Operand(_number(str(token.value), self))
        if token.kind == "lparen":
            inner = self.pipeline()
            closing = self.peek()
            if closing is None or closing.kind != "rparen":
                raise GoTemplateError(f"a '(' is not closed in {self.source!r}")
            self.position += 1
            return _Operand(self.chain(f"({inner})"))
        if token.kind == "ident":
            return self.identifier(str(token.value))
        return self.unsupported(token)

    def chain(self, expr: str) -> str:
        """Field access right after a parenthesised pipeline: `(fromJson .x).user.name`."""
        while (token := self.peek()) is not None and token.kind == "field" and token.adjacent:
            self.position += 1
            expr += "".join(_attribute(name) for name in token.value)
        return expr

    def identifier(self, name: str) -> _Operand:
        literals = {"true": "true", "false": "false", "nil": "none"}
        if name in literals:
            return _Operand(literals[name])
        if name in _FUNCTIONS:
            return _Operand(name, function=name)
        if name in _UNSUPPORTED_KEYWORDS:
            raise self.fail(_UNSUPPORTED_KEYWORDS[name])
        raise self.fail(f"the function {name!r}")

    def unsupported(self, token: _Token) -> _Operand:
        reasons = {
            "dot": "the dot ('.') on its own (use a field such as .params.x)",
            "var": f"template variables ({token.value})",
            "assign": "variable assignment",
            "char": "character constants",
            "pipe": "a '|' without a command before it",
            "rparen": "an unmatched ')'",
        }
        raise self.fail(reasons.get(token.kind, f"{token.kind} {token.value!r}"))


def _field_expr(names: tuple[str, ...], parser: _Parser) -> str:
    root = names[0]
    if root not in ROOTS:
        raise parser.fail(f"the field .{root} (templates see .params, .steps, .workflow and .forEach)")
    return root + "".join(_attribute(name) for name in names[1:])


def _attribute(name: str) -> str:
    return f"[{name!r}]" if name in _JINJA_KEYWORDS else f".{name}"


def _number(text: str, parser: _Parser) -> str:
    cleaned = text.replace("_", "")
    try:
        if re.fullmatch(r"[+-]?0[xXbBoO].*", cleaned):
            return str(int(cleaned, 0))
        return str(int(cleaned)) if re.fullmatch(r"[+-]?\d+", cleaned) else repr(float(cleaned))
    except ValueError:
        raise parser.fail(f"the number {text!r}") from None


# -- functions ---------------------------------------------------------------------


def _arity(name: str, values: list[str], parser: _Parser, exact: int | None = None, least: int = 1) -> None:
    if (exact is not None and len(values) != exact) or len(values) < least:
        wanted = f"{exact}" if exact is not None else f"at least {least}"
        raise GoTemplateError(f"{name} takes {wanted} argument(s), got {len(values)} (in {parser.source!r})")


def _eq(values: list[str], parser: _Parser) -> str:
    _arity("eq", values, parser, least=2)
    first, rest = values[0], values[1:]
    return "(" + " or ".join(f"{first} == {other}" for other in rest) + ")"


def _compare(operator: str) -> Callable[[list[str], _Parser], str]:
    def translate_compare(values: list[str], parser: _Parser) -> str:
        _arity(operator, values, parser, exact=2)
        return f"({values[0]} {operator} {values[1]})"

    return translate_compare


def _logic(word: str) -> Callable[[list[str], _Parser], str]:
    def translate_logic(values: list[str], parser: _Parser) -> str:
        _arity(word, values, parser)
        return "(" + f" {word} ".join(values) + ")"

    return translate_logic


def _not(values: list[str], parser: _Parser) -> str:
    _arity("not", values, parser, exact=1)
    return f"(not {values[0]})"


def _index(values: list[str], parser: _Parser) -> str:
    _arity("index", values, parser)
    return f"({values[0]})" + "".join(f"[{key}]" for key in values[1:])


def _filter(name: str, filter_name: str) -> Callable[[list[str], _Parser], str]:
    def translate_filter(values: list[str], parser: _Parser) -> str:
        _arity(name, values, parser, exact=1)
        return f"({values[0]} | {filter_name})"

    return translate_filter


def _printf(values: list[str], parser: _Parser) -> str:
    _arity("printf", values, parser)
    try:
        fmt = _literal_string(values[0])
    except ValueError:
        raise parser.fail("printf with a format that is not a string literal") from None
    converted = _PRINTF_VERBS.sub(lambda match: _printf_verb(match, parser), fmt)
    if len(values) == 1:
        return repr(converted.replace("%%", "%"))
    return f"({converted!r} | format({', '.join(values[1:])}))"


def _literal_string(expr: str) -> str:
    """The value of a string literal this module emitted (a Python repr), else ValueError."""
    if len(expr) >= 2 and expr[0] == expr[-1] and expr[0] in "'\"":
        value = ast.literal_eval(expr)
        if isinstance(value, str):
            return value
    raise ValueError("not a string literal")


def _printf_verb(match: re.Match[str], parser: _Parser) -> str:
    verb = match.group("verb")
    mapping = {
        "v": "s",
        "s": "s",
        "d": "d",
        "f": "f",
        "g": "g",
        "e": "e",
        "x": "x",
        "X": "X",
        "o": "o",
        "%": "%",
    }
    if verb not in mapping:
        raise parser.fail(f"the printf verb %{verb}")
    return match.group(0)[:-1] + mapping[verb]


_FUNCTIONS: dict[str, Callable[[list[str], _Parser], str]] = {
    "eq": _eq,
    "ne": _compare("!="),
    "lt": _compare("<"),
    "le": _compare("<="),
    "gt": _compare(">"),
    "ge": _compare(">="),
    "and": _logic("and"),
    "or": _logic("or"),
    "not": _not,
    "index": _index,
    "len": _filter("len", "length"),
    "json": _filter("json", "tojson"),
    "fromJson": _filter("fromJson", "fromjson"),
    "quote": _filter("quote", "quote"),
    "printf": _printf,
}


def _call(name: str, values: list[str], parser: _Parser) -> str:
    return _FUNCTIONS[name](values, parser)
