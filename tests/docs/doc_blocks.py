r"""The shell examples of the README and docs/*.md, as the docs test reads them.

A fenced block whose info string is `bash`, `sh`, `shell` or `console` is a shell example;
other blocks (TOML, JSON, Python, transcripts without an info string) are not run. HTML
comments on the lines just above a block annotate it, invisibly to readers:

* `<!-- not-run: REASON -->` — the block cannot run in CI (it installs from PyPI, writes into a
  user's client configuration, runs for minutes...). The reason is listed after the test run.
* `<!-- expect: TEXT -->` — TEXT must appear in the block's output (stdout and stderr); several
  may be given. Without one, a block passes when every command in it succeeds.

A `console` block is a transcript: its `$ ` lines (with their `\` continuation lines) are the
commands, and every other non-blank line is output that must appear, as it is shown, in theirs.
Its commands' exit status is not checked (a transcript may show a command failing on purpose,
like `validate` on a broken file); the output is.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHELL_LANGUAGES = {"bash", "sh", "shell", "console"}
_FENCE = re.compile(r"^```([\w-]*)[^\n]*\n(.*?)^```[ \t]*$", re.MULTILINE | re.DOTALL)
_ANNOTATION = re.compile(r"^<!--\s*(not-run|expect):\s*(.*?)\s*-->$")


@dataclass(frozen=True)
class Block:
    """One shell example: where it is, its text, and what the comments above it say."""

    path: Path
    line: int
    text: str
    not_run: str | None = None
    expect: tuple[str, ...] = field(default=())

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(ROOT)}:{self.line}"


def doc_files() -> list[Path]:
    """The README, then docs/*.md in name order."""
    return [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def shell_blocks(path: Path) -> list[Block]:
    """Every shell example of one file, in order, with its annotations."""
    text = path.read_text(encoding="utf-8")
    blocks = []
    for match in _FENCE.finditer(text):
        if match.group(1) not in SHELL_LANGUAGES:
            continue
        line = text.count("\n", 0, match.start()) + 1
        not_run, expect = _annotations(text[: match.start()])
        body = match.group(2)
        if match.group(1) == "console":
            body, shown = _transcript(body)
            expect += shown
        blocks.append(Block(path, line, body, not_run, tuple(expect)))
    return blocks


def _transcript(body: str) -> tuple[str, list[str]]:
    """A console transcript's commands (as a script that goes on past a failure) and its output lines."""
    commands: list[str] = []
    shown: list[str] = []
    continued = False
    for raw in body.splitlines():
        if continued or raw.startswith("$ "):
            command = raw if continued else raw[2:]
            continued = command.endswith("\\")
            commands.append(command if continued else f"{command} || true")
        elif raw.strip():
            shown.append(raw.strip())
    return "".join(f"{c}\n" for c in commands), shown


def _annotations(before: str) -> tuple[str | None, list[str]]:
    """The `not-run` reason and `expect` snippets of the comment lines right above a block."""
    not_run: str | None = None
    expect: list[str] = []
    for raw in reversed(before.rstrip("\n").splitlines()):
        found = _ANNOTATION.match(raw.strip())
        if not found:
            break
        kind, value = found.groups()
        if kind == "not-run":
            not_run = value
        else:
            expect.insert(0, value)
    return not_run, expect
