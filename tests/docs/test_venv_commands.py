"""The README installs toolweave into `.venv` without activating it, so a runnable example that calls
bare `toolweave` fails for a reader with "command not found" (the docs test would not notice: its
shell has `.venv/bin` on PATH). Examples call `.venv/bin/toolweave`."""

from __future__ import annotations

import re

from doc_blocks import doc_files, shell_blocks

_BARE = re.compile(r"(?:^|[\s($;&|])toolweave(?= )")


def test_runnable_examples_call_the_venvs_toolweave() -> None:
    found = [
        f"{block.where}: {line.strip()}"
        for path in doc_files()
        for block in shell_blocks(path)
        if block.not_run is None
        for line in block.text.splitlines()
        if _BARE.search(line)
    ]
    assert found == [], "examples calling bare `toolweave` (use .venv/bin/toolweave):\n" + "\n".join(found)
