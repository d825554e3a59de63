"""Reading a config document (TOML or YAML) with every cost bounded.

A config file, or a composite file it names (`{file: ...}`), may come from anyone
who can write a path the operator points at, and a malformed one must end in a
config problem, never a traceback, a hang or an exhausted memory. As found: a
YAML "billion laughs" ran past 60 s at 600 MB, a recursive alias and 50,000-deep
nesting ended in `RecursionError`, a 5,000-digit TOML integer in a `ValueError`,
and `{file: /dev/zero}` read until `MemoryError`. So:

- only a regular file is read, and at most `MAX_DOCUMENT_BYTES` of it;
- YAML aliases may not refer to a node that contains them, and what aliases
  expand to is counted before anything is built (`MAX_VALUES` values);
- nesting deeper than `MAX_DEPTH` is a problem (also for TOML);
- every parser error, including Python's limits on integer digits and on
  recursion, is reported as a problem with the file's name.
"""

from __future__ import annotations

import re
import stat
import tomllib
from pathlib import Path
from typing import Any, Final

import yaml

from toolweave.errors import ToolweaveError
from toolweave.problems import Problem

MAX_DOCUMENT_BYTES: Final = 10 << 20
"""Largest config or composite file read (10 MiB; real ones are kilobytes)."""
MAX_DEPTH: Final = 100
"""Deepest nesting of tables/lists/mappings in a document."""
MAX_VALUES: Final = 200_000
"""Most values a YAML document may expand to, counting every alias's target each time it is used."""


class DocumentTooCostly(ToolweaveError, yaml.YAMLError):
    """A YAML document whose aliases are recursive or expand past `MAX_VALUES`, or that nests too deeply."""


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader that refuses recursive aliases and measures expansion before building."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._open_anchors: set[str] = set()
        self._depth = 0
        """How many nodes `compose_node` is inside: deeper than `MAX_DEPTH` is refused before the
        composer's recursion gets near Python's limit (a `RecursionError` there costs seconds)."""

    def _next_anchor(self) -> str | None:
        """The anchor of the parser's next event, not consumed (None: it has none); PyYAML's stubs
        leave `peek_event` untyped."""
        event: yaml.Event = yaml.parser.Parser.peek_event(self)
        anchor: str | None = getattr(event, "anchor", None)
        return anchor

    def compose_node(self, parent: Any, index: Any) -> Any:
        if self._depth >= MAX_DEPTH:
            raise DocumentTooCostly(f"the document is nested more than {MAX_DEPTH} levels deep")
        self._depth += 1
        try:
            return self._compose_node(parent, index)
        finally:
            self._depth -= 1

    def _compose_node(self, parent: Any, index: Any) -> Any:
        if self.check_event(yaml.AliasEvent):
            anchor = self._next_anchor()
            if anchor in self._open_anchors:
                raise DocumentTooCostly(f"the alias *{anchor} refers to a node that contains it (recursive)")
            return super().compose_node(parent, index)
        anchor = self._next_anchor()
        if anchor is None:
            return super().compose_node(parent, index)
        self._open_anchors.add(anchor)
        try:
            return super().compose_node(parent, index)
        finally:
            self._open_anchors.discard(anchor)

    def compose_document(self) -> Any:
        node = super().compose_document()
        _check_expansion(node)
        return node


def _check_expansion(root: Any) -> None:
    """Count the values `root` expands to (shared nodes once per use) and its depth, without expanding."""
    sizes: dict[int, int] = {}
    depths: dict[int, int] = {}
    stack: list[tuple[Any, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        if id(node) in sizes:
            continue
        children = _children(node)
        if not children_done and children:
            stack.append((node, True))
            stack.extend((child, False) for child in children if id(child) not in sizes)
            continue
        sizes[id(node)] = 1 + sum(sizes[id(child)] for child in children)
        depths[id(node)] = 1 + max((depths[id(child)] for child in children), default=0)
        if sizes[id(node)] > MAX_VALUES:
            raise DocumentTooCostly(
                f"the document expands to more than {MAX_VALUES} values (through its aliases)"
            )
        if depths[id(node)] > MAX_DEPTH:
            raise DocumentTooCostly(f"the document is nested more than {MAX_DEPTH} levels deep")


def _children(node: Any) -> list[Any]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


def read_documents(file: Path, issues: list[Problem]) -> list[Any]:
    """Every document in `file` (TOML: one), or [] with the reasons added to `issues`."""
    text = _read_text(file, issues)
    if text is None:
        return []
    if file.suffix.lower() == ".toml":
        return _toml(text, file, issues)
    if file.suffix.lower() in (".json", ".jsonc"):  # MCP clients' files: comments and trailing commas allowed
        return _jsonc(text, file, issues)
    try:
        return [doc for doc in yaml.load_all(text, Loader=_BoundedLoader) if doc is not None]
    except DocumentTooCostly as error:
        issues.append(Problem("", f"YAML in {file} refused: {error}"))
    except yaml.YAMLError as error:
        issues.append(Problem("", f"invalid YAML in {file}: {error}"))
    except RecursionError:
        issues.append(Problem("", f"YAML in {file} refused: it is nested too deeply"))
    except ValueError as error:  # e.g. an integer past Python's digit limit
        issues.append(Problem("", f"invalid YAML in {file}: {error}"))
    return []


def _read_text(file: Path, issues: list[Problem]) -> str | None:
    try:
        info = file.stat()
    except FileNotFoundError:
        issues.append(
            Problem(
                "",
                f"config file not found: {file} (name the config with -c/--config FILE or the "
                "TOOLWEAVE_CONFIG environment variable; the bundled demo is examples/demo.toml)",
            )
        )
        return None
    except OSError as error:
        issues.append(Problem("", f"cannot read {file}: {error}"))
        return None
    if not stat.S_ISREG(info.st_mode):
        issues.append(Problem("", f"cannot read {file}: not a regular file"))
        return None
    try:
        with file.open("rb") as handle:
            data = handle.read(MAX_DOCUMENT_BYTES + 1)
    except OSError as error:
        issues.append(Problem("", f"cannot read {file}: {error}"))
        return None
    if len(data) > MAX_DOCUMENT_BYTES:
        issues.append(Problem("", f"cannot read {file}: it is larger than {MAX_DOCUMENT_BYTES} bytes"))
        return None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        issues.append(Problem("", f"cannot read {file}: {error}"))
        return None


def _toml(text: str, file: Path, issues: list[Problem]) -> list[Any]:
    try:
        document = tomllib.loads(text)
    except RecursionError:
        issues.append(Problem("", f"TOML in {file} refused: it is nested too deeply"))
        return []
    except ValueError as error:  # TOMLDecodeError, and integers past Python's digit limit
        issues.append(Problem("", f"invalid TOML in {file}: {error}{_unquoted_variable_hint(text, error)}"))
        return []
    if _too_deep(document, MAX_DEPTH):
        issues.append(Problem("", f"TOML in {file} refused: it is nested more than {MAX_DEPTH} levels deep"))
        return []
    return [document]


def _jsonc(text: str, file: Path, issues: list[Problem]) -> list[Any]:
    from toolweave.config.mcp_servers import loads_jsonc

    try:
        document = loads_jsonc(text)
    except RecursionError:
        issues.append(Problem("", f"JSON in {file} refused: it is nested too deeply"))
        return []
    except ValueError as error:
        issues.append(Problem("", f"invalid JSON in {file}: {error}"))
        return []
    if _too_deep(document, MAX_DEPTH):
        issues.append(Problem("", f"JSON in {file} refused: it is nested more than {MAX_DEPTH} levels deep"))
        return []
    return [document]


def _unquoted_variable_hint(text: str, error: Exception) -> str:
    """`port = ${PORT:-8080}` is not TOML: say that `${VAR}` goes inside a string (numbers are converted)."""
    match = re.search(r"at line (\d+)", str(error))
    lines = text.splitlines()
    if match is None or not 0 < int(match.group(1)) <= len(lines):
        return ""
    found = re.search(r"^\s*([\w.-]+)\s*=\s*(\$\{[^}]*\})", lines[int(match.group(1)) - 1])
    if found is None:
        return ""
    key, variable = found.groups()
    return f'. `${{VAR}}` is expanded inside strings only: quote it, {key} = "{variable}" (a number is still read as one)'


def _too_deep(value: Any, limit: int) -> bool:
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, list) else ()
        if children and depth >= limit:
            return True
        stack.extend((child, depth + 1) for child in children)
    return False
