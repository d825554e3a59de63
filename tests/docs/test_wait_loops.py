"""A wait loop in a doc example must wait on every jq a reader may have.

`until curl -s URL | jq -e 'FILTER'; do sleep 0.2; done` ends at once with jq 1.6 (Debian's,
Ubuntu 22.04's): while nothing listens, curl prints nothing, and jq 1.6 exits 0 on empty input
even with `-e`. Every later command of the example then hits a port not yet listening. Loops
compare jq's output instead (`until [ "$(curl -s URL | jq 'FILTER')" = true ]`), which waits on
every jq version.
"""

from __future__ import annotations

import re

from doc_blocks import doc_files, shell_blocks

_EXIT_STATUS_LOOP = re.compile(
    r"\b(?:until|while)\b[^\n]*?\|\s*jq\s+(?:-[a-zA-Z]*e[a-zA-Z]*\b|--exit-status\b)"
)


def test_no_wait_loop_relies_on_jq_exit_status() -> None:
    found = [
        f"{block.where}: {line.strip()}"
        for path in doc_files()
        for block in shell_blocks(path)
        for line in block.text.splitlines()
        if _EXIT_STATUS_LOOP.search(line)
    ]
    assert found == [], (
        "wait loops that end at once with jq 1.6 (compare jq's output instead):\n" + "\n".join(found)
    )


def test_the_check_finds_the_loop_jq_1_6_ends_at_once() -> None:
    broken = 'until curl -s "$TW/backends" | jq -e \'all(.backends[]; .status == "connected")\'; do sleep 0.2; done'
    fixed = 'until [ "$(curl -s "$TW/backends" | jq \'all(.backends[]; .status == "connected")\')" = true ]; do sleep 0.2; done'
    assert _EXIT_STATUS_LOOP.search(broken) and not _EXIT_STATUS_LOOP.search(fixed)
